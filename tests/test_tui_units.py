"""Pure parts of the TUI: layout, rasterising, search, bars, facts, the engine boundary, CLI."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.errors import BlockDepsError, PlanError
from engine.events import CompileOptions
from engine.parallel.plan import DecisionStatus
from engine.runtime.measure import KernelTime
from workbench.present.timing import kernel_rows
from workbench.tui.engine_adapter import EngineAnalyses
from workbench.tui.facts import DecisionRow, Unavailable, measured_gains, op_times
from workbench.tui.graph_canvas import neighbourhood
from workbench.tui.graph_view import search_graph
from workbench.tui.layout import ClusterSpec, Detail, drawn_clusters, layout_graph
from workbench.tui.raster import Cell, decode, rasterise
from workbench.tui.synthetic import synthetic_graph
from workbench.tui.timing_view import bar, bar_chart

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def graph():
    return synthetic_graph(60)


def test_layout_boxes_fit_labels_and_do_not_overlap(graph):
    layout = layout_graph(graph, Detail.FULL)
    assert set(layout.boxes) == {n.id for n in graph.nodes}
    boxes = list(layout.boxes.items())
    for node_id, box in boxes:
        assert box.w >= max(len(t) for t in layout.texts[node_id]) + 2 and box.h == 4
    for i, (_, a) in enumerate(boxes):
        for _, b in boxes[i + 1:]:
            assert a.x + a.w <= b.x or b.x + b.w <= a.x or a.y + a.h <= b.y or b.y + b.h <= a.y
    assert len(layout.edges) == len(graph.edges)


def test_levels_of_detail_shrink_the_drawing(graph):
    full, op, compact = (layout_graph(graph, d) for d in Detail)
    assert full.width * full.height > op.width * op.height > compact.width * compact.height
    assert all(b.h == 1 and b.w == len(compact.texts[n][0]) + 2 for n, b in compact.boxes.items())


def test_raster_draws_boxes_edges_and_arrows(graph):
    grid = rasterise(layout_graph(graph, Detail.OP))
    kinds = {decode(v)[0] for row in grid.rows for _, v in row.values()}
    assert {Cell.BORDER, Cell.TEXT, Cell.EDGE, Cell.ARROW} <= kinds
    arrows = sum(1 for row in grid.rows for ch, v in row.values() if decode(v)[0] is Cell.ARROW)
    assert arrows >= len(graph.edges) * 0.9  # one arrowhead per edge (a few may share a cell)
    text = "\n".join("".join(row.get(x, (" ", 0))[0] for x in range(grid.width)) for row in grid.rows)
    assert "Concat" in text and "╭" in text and "▼" in text


def test_clusters_nest_and_partial_overlaps_are_dropped(graph):
    specs = [ClusterSpec("k", ("n1", "n2")), ClusterSpec("g", ("n1", "n2", "n3", "n4"), "group"),
             ClusterSpec("bad", ("n4", "n5"))]
    kept = drawn_clusters(specs, [n.id for n in graph.nodes])
    assert [c.label for c in kept] == ["g", "k"]
    layout = layout_graph(graph, Detail.FULL, specs)
    (_, outer), (_, inner) = layout.clusters
    assert outer.x < inner.x and outer.y < inner.y  # the group box surrounds the kernel box


def test_overlapping_clusters_keep_the_earlier_one(graph):
    """The app lists built kernels first, then approved decisions: they win a conflict."""
    a, b = ClusterSpec("a", ("n1", "n2")), ClusterSpec("b", ("n2", "n3"), "group")
    ids = [n.id for n in graph.nodes]
    assert [c.label for c in drawn_clusters([a, b], ids)] == ["a"]
    assert [c.label for c in drawn_clusters([b, a], ids)] == ["b"]


def test_search_by_name_op_and_shape(graph):
    assert search_graph(graph, "stem") == ["n0"]
    pools = search_graph(graph, "maxpool")
    assert pools and all(graph.node(p).op == "MaxPool" for p in pools)
    assert search_graph(graph, "1x256x28") == [n.id for n in graph.nodes if n.op == "Concat"] + \
        [n.id for n in graph.nodes if n.op != "Concat" and any(t.shape == (1, 256, 28, 28) for t in n.inputs)]
    assert search_graph(graph, "  ") == []


def test_neighbourhood_radius(graph):
    near = neighbourhood(graph.dag, "n0", 1)
    assert near == {"n0", *graph.dag.successors("n0")}


def test_bars_have_eighth_resolution():
    assert bar(1.0, 1.0, 4) == "████"
    assert bar(0.5, 1.0, 3) == "█▌"
    assert bar(0.0, 1.0, 3) == ""
    rows = kernel_rows([KernelTime("a", 1, 2.0, 2, 2, 2, 2, 0.5), KernelTime("b", 1, 1.0, 1, 1, 1, 1, 0.25)])
    chart = bar_chart(rows, 2.0, width=10).plain.splitlines()
    assert chart[0].startswith("a") and "██████████" in chart[0] and "█████" in chart[1]


def test_op_times_and_measured_gains():
    k = lambda func, *ops: SimpleNamespace(func=func, ops=ops)
    t = lambda name, ms: KernelTime(name, 1, ms, ms, ms, ms, ms, 0.0)
    before_k, before_t = (k("a", "x"), k("b", "y"), k("c", "z")), (t("a", 1.0), t("b", 2.0), t("c", 5.0))
    after_k, after_t = (k("ab", "x", "y"), k("c", "z")), (t("ab", 2.5), t("c", 5.0))
    assert op_times(before_k, before_t) == {"x": 1.0, "y": 2.0, "z": 5.0}
    row = DecisionRow("d0", "horizontal", ("x", "y"), "", "", DecisionStatus.APPROVED)
    assert measured_gains([row], before_k, before_t, after_k, after_t) == {"d0": pytest.approx(0.5)}


# What a TUI module other than the adapter may import of the engine: the facade, events,
# plain facts and the plan's types (no analyses).
TUI_ENGINE_IMPORTS = {"engine.session", "engine.events", "engine.errors", "engine.files", "engine.graphviz",
                      "engine.opgraph", "engine.parallel.plan"}


def test_engine_and_presenter_import_no_ui_library_and_only_the_adapter_asks_for_analyses():
    code = ("import sys, engine.session, engine.pipeline, engine.graphviz, engine.blockdeps, engine.parallel, "
            "workbench.present.plan, workbench.present.fusion, workbench.present.blockdeps, "
            "workbench.present.report; "
            "bad = [m for m in ('textual', 'rich', 'matplotlib') if m in sys.modules]; print(bad); "
            "sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for path in (ROOT / "workbench" / "tui").glob("*.py"):
        text = path.read_text()
        imported = set(re.findall(r"^\s*(?:from|import) (engine[\w.]*)", text, re.M))
        assert path.name == "engine_adapter.py" or imported <= TUI_ENGINE_IMPORTS, (path.name, imported)
        assert "import tvm" not in text, path.name


class _RefusingSession:
    """Session-shaped: every analysis raises the engine's one-line errors."""

    model = SimpleNamespace(name="m")

    def block_deps(self, target, arch=None, progress=None):
        raise BlockDepsError("kernel fused_conv2d: unsupported loop nest")

    def propose(self, target, arch=None):
        raise PlanError("no kernels to fuse")


def test_adapter_says_why_the_engine_refused(tmp_path):
    analyses = EngineAnalyses(str(tmp_path / "plan.json"))
    assert analyses.block_deps(_RefusingSession()) == Unavailable("kernel fused_conv2d: unsupported loop nest")
    assert analyses.load_or_propose(_RefusingSession()) == Unavailable("no kernels to fuse")


def test_workbench_model_without_subcommand_opens_the_tui(monkeypatch):
    from workbench import cli
    from workbench.tui import app as app_module

    opened = []
    monkeypatch.setattr(app_module.WorkbenchApp, "run", lambda self: opened.append((self.spec, self.runs)))
    assert cli.main(["fire_module", "--runs", "3"]) == 0
    assert cli.main(["tui", "zoo:inception_v1"]) == 0
    assert opened == [("fire_module", 3), ("zoo:inception_v1", 20)]


def test_tui_target_and_arch_reach_the_adapter(monkeypatch):
    from workbench import cli
    from workbench.tui import app as app_module

    opened = []
    monkeypatch.setattr(app_module.WorkbenchApp, "run", lambda self: opened.append(self.analyses))
    assert cli.main(["tui", "fire_module", "--target", "cuda", "--arch", "sm_80", "--plan", "p.json"]) == 0
    assert cli.main(["fire_module"]) == 0
    cuda, default = opened
    assert (cuda.target, cuda.arch, cuda.describe_target()) == ("cuda", "sm_80", "cuda --arch sm_80")
    assert cuda.block_axis == "blockIdx"
    assert cuda.compile_options(runs=3) == CompileOptions(target="cuda", arch="sm_80", runs=3)
    assert default.target == CompileOptions().target and default.arch is None


def test_adapter_keeps_plan_file_and_arch_with_their_target(tmp_path):
    """--plan and --arch were given for one target: the other target has its own plan file
    (a plan is never saved over another target's) and its default arch."""
    analyses = EngineAnalyses(str(tmp_path / "mine.json"), target="cuda", arch="sm_80")
    session = SimpleNamespace(model=SimpleNamespace(name="fire_module"))
    assert analyses.plan_path(session) == str(tmp_path / "mine.json")
    analyses.switch_target(analyses.next_target())
    assert analyses.target == "llvm" and analyses.arch is None
    assert analyses.plan_path(session) == str(Path("out") / "fire_module-llvm" / "plan.json")
    assert analyses.compile_options().arch is None
    analyses.switch_target("cuda")
    assert analyses.arch == "sm_80" and analyses.plan_path(session) == str(tmp_path / "mine.json")
    with pytest.raises(ValueError):
        analyses.switch_target("vulkan")


def test_ran_on_device_tells_emulation_from_the_device():
    analyses = EngineAnalyses()
    assert analyses.ran_on_device(SimpleNamespace(target="llvm", ran_on="cpu"))
    assert not analyses.ran_on_device(SimpleNamespace(target="cuda", ran_on="host emulation"))
    assert analyses.ran_on_device(SimpleNamespace(target="cuda", ran_on="cuda"))


def test_resource_cells_label_unknown_figures():
    from workbench.tui.timing_view import RESOURCE_HEADERS, resource_cells

    limiter = SimpleNamespace(value="shared memory")
    row = SimpleNamespace(kernel="k", registers=40, shared_bytes=49152, local_bytes=0, spill_stores=0,
                          spill_loads=0, threads_per_block=256, occupancy=0.375, limiter=limiter)
    assert resource_cells(row) == ["40", "49152", "0", "0/0", "256", "38%", "shared memory", "k"]
    unknown = SimpleNamespace(**{**vars(row), "threads_per_block": None, "occupancy": None, "limiter": None})
    assert resource_cells(unknown)[4:7] == ["—", "—", "—"]
    assert len(RESOURCE_HEADERS) == len(resource_cells(row))
    assert all("(est.)" in h for h in RESOURCE_HEADERS if h.startswith(("Occ", "Limiter")))
