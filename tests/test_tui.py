"""The TUI driven headlessly (App.run_test + Pilot) with a fake session and fake analyses.

The fakes return the engine's own dataclasses where those are cheap (OperatorGraph,
KernelTime, StageEvent) and the TUI's facts shapes for the analyses."""

from __future__ import annotations

import asyncio
import enum
import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.events import Cancelled, Stage, StageEvent, StageStatus
from engine.parallel.plan import DecisionStatus, FusionPlan
from engine.runtime.measure import KernelTime, Latency  # (imports TVM once, before any timed interaction)
from engine.session import target_info
from workbench.tui import events
from workbench.tui.app import WorkbenchApp
from workbench.tui.blocks_view import BlocksView
from workbench.tui.compile_panel import CompilePanel
from workbench.tui.engine_adapter import EngineAnalyses
from workbench.tui.facts import BlockDepsReport, BlockGrid, DecisionRow, EdgeDeps, PlanState, Unavailable
from workbench.tui.fusion_table import FusionTable
from workbench.tui.graph_canvas import GraphCanvas, is_port
from workbench.tui.graph_view import GraphView
from workbench.tui.layout import Detail
from workbench.tui.synthetic import synthetic_graph
from workbench.tui.timing_view import NOT_TIMED, KernelTable, ResourceTable, TimingView

SIZE = (160, 45)
STAGE_NAMES = ("import", "fuse", "schedule", "apply plan", "build", "verify", "time")


class FakeSession:
    """Session-shaped: a synthetic graph; compile walks the stages in a few ms."""

    def __init__(self, graph, stage_delay: float = 0.0, resources: tuple = ()):
        self.graph = graph
        self.model = SimpleNamespace(name=graph.model)
        self.stage_delay = stage_delay
        self.resources = resources  # KernelResources-shaped rows a compile reports
        self.compiles = []
        self.scheduled_for = []

    def kernels(self, fused_pairs: bool = True):
        out, ops = [], [n.id for n in self.graph.nodes]
        i = 0
        while i < len(ops):
            take = 2 if fused_pairs and self.graph.node(ops[i]).op == "Conv" and i + 1 < len(ops) else 1
            out.append(SimpleNamespace(index=len(out), func=f"k{len(out)}_{self.graph.node(ops[i]).op.lower()}",
                                       ops=tuple(ops[i:i + take])))
            i += take
        return tuple(out)

    def scheduled(self, target="llvm", arch=None):
        self.scheduled_for.append((target, arch))
        return SimpleNamespace(kernels=self.kernels())

    def compile(self, options=None, progress=None, cancel=None):
        self.compiles.append(options)
        for stage in Stage:
            if cancel is not None and cancel.is_set():
                raise Cancelled(f"compile cancelled before stage '{stage.value}'")
            if stage is Stage.APPLY_PLAN and options.plan is None:
                progress(StageEvent(stage, StageStatus.SKIP, message="no plan"))
                continue
            progress(StageEvent(stage, StageStatus.START))
            time.sleep(self.stage_delay)
            progress(StageEvent(stage, StageStatus.DONE, self.stage_delay, f"{stage.value} ok"))
        kernels = self.kernels(fused_pairs=True)
        verification = SimpleNamespace(passed=True, summary=lambda: "outputs match")
        spec = target_info(options.target)
        if spec.host_emulation:  # this machine has no GPU: verified in emulation, nothing timed
            return SimpleNamespace(model=self.graph.model, target=options.target, kernels=kernels, kernel_times=(),
                                   latency=None, onnxruntime_latency=None, verification=verification,
                                   ran_on="host emulation", launches=len(kernels), kernel_resources=self.resources,
                                   notes=("timing skipped: kernels ran in host emulation, not on the device",))
        scale = 0.5 if options.plan else 1.0
        times = tuple(KernelTime(k.func, 1, scale * 0.01 * (k.index + 1), 0.01, 0.01, 0.01, 0.01,
                                 1 / len(kernels)) for k in kernels)
        return SimpleNamespace(model=self.graph.model, target=options.target, kernels=kernels, kernel_times=times,
                               latency=Latency(1.5 * scale, 1.4, 1.6, 1.6, 20),
                               onnxruntime_latency=Latency(1.0, 1.0, 1.0, 1.0, 20), verification=verification,
                               ran_on=spec.device_kind, launches=len(kernels), kernel_resources=(), notes=())


class FakeAnalyses(EngineAnalyses):
    """Block dependencies and a plan in the TUI's shapes; saves the plan as JSON."""

    def __init__(self, plan_dir: Path, blocks: bool = True, plan: bool = True, target: str | None = None,
                 arch: str | None = None):
        super().__init__(target=target, arch=arch)
        self.plan_dir, self.blocks, self.with_plan = plan_dir, blocks, plan
        self.saved = []
        self.calls = []  # (analysis, target) in the order they ran

    def block_deps(self, session, progress=None):
        self.calls.append(("blocks", self.target))
        if not self.blocks:
            return Unavailable("engine.blockdeps is not importable (test)")
        ks = session.kernels()
        edges = []
        for a, b in zip(ks, ks[1:3]):
            edges.append(EdgeDeps(f"{a.index}->{b.index}", BlockGrid(a.func, (4, 8), a.ops),
                                  BlockGrid(b.func, (4, 8), b.ops), "one-to-few",
                                  needs=lambda c: tuple(p for p in (c - 1, c, c + 1) if 0 <= p < 32),
                                  figures=(("fan-in", "mean 2.9, max 3"),)))
        return BlockDepsReport(tuple(edges), (("edges", str(len(edges))),), target=self.target,
                               block_axis=self.block_axis)

    def block_graph_dot(self, session, report, edge_key):
        return 'digraph B { "p0" -> "c0"; "p1" -> "c0"; }'

    def load_or_propose(self, session, path=None):
        self.calls.append(("plan", self.target))
        if not self.with_plan:
            return Unavailable("engine.parallel has no plan API (test)")
        default = "plan.json" if self.target == EngineAnalyses().target else f"plan-{self.target}.json"
        target = Path(path or self.plan_dir / default)
        rows = [DecisionRow("D1", "horizontal", ("n1", "n6"), "same input, 2 convs", "0.10 ms",
                            DecisionStatus.PROPOSED),
                DecisionRow("D2", "horizontal", ("n3", "n9"), "independent branches", "0.05 ms",
                            DecisionStatus.PROPOSED)]
        if target.exists():
            status = json.loads(target.read_text())
            rows = [DecisionRow(r.id, r.kind, r.members, r.evidence, r.estimated_gain, DecisionStatus(status[r.id]))
                    for r in rows]
        return PlanState(rows, str(target), target=self.target)

    def set_status(self, plan, ids, status):
        plan.rows = [DecisionRow(r.id, r.kind, r.members, r.evidence, r.estimated_gain, status)
                     if r.id in ids else r for r in plan.rows]
        plan.dirty = True
        return []

    def plan_outcome(self, plan, result):
        return ""  # no outcome of the engine's own: the app measures gains from the two runs

    def save_plan(self, plan):
        path = Path(plan.path)
        path.write_text(json.dumps({r.id: r.status.value for r in plan.rows}))
        self.saved.append(path)
        return path

    def compile_plan(self, plan):
        return FusionPlan("synthetic", "llvm", "test", ())


def make_app(tmp_path, n_nodes=40, **kw) -> tuple[WorkbenchApp, FakeSession]:
    session = FakeSession(synthetic_graph(n_nodes), stage_delay=kw.pop("stage_delay", 0.0),
                          resources=kw.pop("resources", ()))
    analyses = FakeAnalyses(tmp_path, **kw)
    app = WorkbenchApp("synthetic", session_factory=lambda spec: session, analyses=analyses,
                       out_dir=tmp_path / "export")
    app.animation_level = "none"  # no indeterminate-bar animation: Pilot waits less
    return app, session


async def settle(pilot, app) -> None:
    """Let workers finish and their messages land (a superseded layout worker is cancelled)."""
    from textual.worker import WorkerCancelled

    for _ in range(4):
        for worker in [w for w in app.workers if not w.is_finished]:
            try:
                await worker.wait()
            except WorkerCancelled:
                pass
        await pilot.pause()


def run(coro):
    return asyncio.run(coro)


def test_open_model_draws_the_graph(tmp_path):
    async def go():
        app, _ = make_app(tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            canvas = app.query_one(GraphCanvas)
            assert canvas.scene is not None and len(op_boxes(canvas)) == 40
            assert {"in:input", "out:tn39"} <= set(canvas.scene.layout.boxes)  # graph input and output
            shot = screen(app)
            assert "Conv 1x64x28x28" in shot and "stem/conv" in shot
            assert "▼" in shot and "╭" in shot  # arrows and boxes
            assert "synthetic: 40 ops" in shot
            # fused kernels from the scheduled module are clusters
            assert any(spec.kind == "kernel" for spec, _ in canvas.scene.layout.clusters)
    run(go())


def test_search_next_match_and_focus(tmp_path):
    async def go():
        app, _ = make_app(tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            await pilot.press("slash", *"maxpool", "enter")
            view = app.query_one(GraphView)
            canvas = app.query_one(GraphCanvas)
            assert len(view.matches) >= 2
            first = canvas.selected
            assert first == view.matches[0] and app.graph.node(first).op == "MaxPool"
            await pilot.press("n")
            assert canvas.selected == view.matches[1]
            await pilot.press("N")
            assert canvas.selected == first
            await pilot.press("f")
            await settle(pilot, app)
            assert canvas.focused_view and first in canvas.scene.layout.boxes
            assert len(op_boxes(canvas)) < 40
            assert "focus:" in screen(app)
            await pilot.press("escape")
            await settle(pilot, app)
            assert not canvas.focused_view and len(op_boxes(canvas)) == 40
            await pilot.press("slash", *"1x96", "enter")  # by shape
            assert view.matches and all("96" in str(app.graph.node(m).outputs[0].shape) for m in view.matches)
    run(go())


def test_clusters_arriving_after_the_first_layout_do_not_move_what_is_on_screen(tmp_path):
    """Kernels come from scheduling, seconds after the graph is drawn: the node nearest the
    middle of the view stays where it was on screen, even at the top-left."""
    async def go():
        from workbench.tui.layout import ClusterSpec

        app, _ = make_app(tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            canvas = app.query_one(GraphCanvas)
            canvas.set_clusters(())  # the first layout, without kernels
            await settle(pilot, app)
            canvas.scroll_to(0, 0, animate=False, immediate=True)
            await pilot.pause()
            boxes = canvas.scene.layout.boxes
            mx, my = canvas.size.width / 2, canvas.size.height / 2
            middle = min(boxes, key=lambda n: (abs(boxes[n].center[0] - mx) + 2 * abs(boxes[n].center[1] - my), n))
            before = (boxes[middle].x - int(canvas.scroll_x), boxes[middle].y - int(canvas.scroll_y))
            ids = [n.id for n in app.graph.nodes]
            canvas.set_clusters((ClusterSpec("k0 a_long_kernel_name_that_widens_the_box", tuple(ids[:3])),))
            await settle(pilot, app)
            after_box = canvas.scene.layout.boxes[middle]
            assert canvas.scene.layout.clusters and after_box != boxes[middle]  # the layout did change
            assert after_box.y > boxes[middle].y  # the kernel's box pushed it down ...
            assert after_box.y - int(canvas.scroll_y) == before[1]  # ... and the view followed
            assert abs(after_box.x - int(canvas.scroll_x) - before[0]) <= 1  # (no sideways scroll: it fits)
    run(go())


def test_zoom_levels_and_pan(tmp_path):
    async def go():
        app, _ = make_app(tmp_path, n_nodes=120)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            canvas = app.query_one(GraphCanvas)
            await pilot.press("minus")
            await settle(pilot, app)
            assert canvas.scene.layout.detail is Detail.OP
            assert "stem/conv" not in screen(app)
            await pilot.press("minus")
            await settle(pilot, app)
            assert canvas.scene.layout.detail is Detail.COMPACT and "[Conv]" in screen(app)
            await pilot.press("plus", "plus")
            await settle(pilot, app)
            assert canvas.scene.layout.detail is Detail.FULL
            y = canvas.scroll_y
            await pilot.press("j", "j", "down")
            assert canvas.scroll_y == y + 6
    run(go())


def test_approve_reject_highlight_and_save(tmp_path):
    async def go():
        app, _ = make_app(tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            canvas = app.query_one(GraphCanvas)
            # the plan loaded in the background highlights its first row without moving the view
            assert canvas._highlight and canvas.scroll_offset == (0, 0)
            await pilot.press("3")
            table = app.query_one(FusionTable)
            assert table.has_focus and table.row_count == 2
            assert canvas._highlight == {"n1", "n6"}  # the first row's members
            await pilot.press("a")  # approve D1, cursor moves to D2
            assert app.plan.row("D1").status is DecisionStatus.APPROVED and app.plan.dirty
            assert canvas._highlight == {"n3", "n9"}
            await pilot.press("r")
            assert app.plan.row("D2").status is DecisionStatus.REJECTED
            shot = screen(app)
            assert "approved" in shot and "rejected" in shot and "unsaved" in shot
            await pilot.press("ctrl+s")
            saved = json.loads((tmp_path / "plan.json").read_text())
            assert saved == {"D1": "approved", "D2": "rejected"}
            await pilot.press("R")
            assert all(r.status is DecisionStatus.REJECTED for r in app.plan.rows)
            await pilot.press("ctrl+o")  # reload from the file
            await pilot.pause()
            assert app.plan.row("D1").status is DecisionStatus.APPROVED
    run(go())


def test_compile_before_and_after_fills_timing(tmp_path):
    async def go():
        app, session = make_app(tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            await pilot.press("C")  # nothing approved yet: refused
            await settle(pilot, app)
            assert not session.compiles
            await pilot.press("c")
            await settle(pilot, app)
            assert app.results["before"] is not None
            assert "done: " in screen(app)  # compile tab outcome
            panel = app.query_one(CompilePanel)
            assert all(r.state in ("done", "skip") for r in panel.rows.values())
            assert list(panel.rows) == list(STAGE_NAMES)
            await pilot.press("3", "A", "C")
            await settle(pilot, app)
            assert session.compiles[-1].plan is not None and app.results["after"] is not None
            await pilot.press("4")
            shot = screen(app)
            assert "before the plan" in shot and "after the plan" in shot
            assert "Time %" in shot and "█" in shot and "vs the c compile: 2.00x" in shot
            table = app.query(KernelTable).first()
            times = app.results["before"].kernel_times  # both runs have the same kernel names
            names = sorted(t.name for t in times)
            # by median per inference, descending
            assert table.get_row_at(0)[-1].endswith(" " + max(times, key=lambda t: t.median_ms * t.calls).name)
            await pilot.press(*"o" * 6)  # Med ms -> Q1, Q3, Calls, GFLOP/s, GB/s -> Kernel (kN name)
            kernels = [f"k{k.index} {k.func}" for k in app.results["before"].kernels]
            assert "Kernel ▲" in screen(app) and table.get_row_at(0)[-1] == kernels[0]
            await pilot.press("O")
            assert "Kernel ▼" in screen(app) and table.get_row_at(0)[-1] == kernels[-1]
            # measured gains reach the decisions
            assert all(r.measured_gain_ms is not None for r in app.plan.rows)
            # nodes are coloured by kernel time
            assert app.query_one(GraphCanvas)._heat
    run(go())


def test_compile_can_be_cancelled_and_ui_stays_responsive(tmp_path):
    async def go():
        app, session = make_app(tmp_path, stage_delay=0.5)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            await pilot.press("c")
            await pilot.press("x")  # takes effect after the running stage
            await pilot.press("1", "minus")  # the UI answers keys while compiling
            assert app.query_one("#tabs").active == "graph"
            await settle(pilot, app)
            assert app.query_one(GraphCanvas).detail is Detail.OP
            assert app.results["before"] is None
            panel = app.query_one(CompilePanel)
            assert not panel.running and any(r.state == "cancelled" for r in panel.rows.values())
    run(go())


def test_blocks_view_highlights_producer_blocks(tmp_path):
    async def go():
        app, _ = make_app(tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            await pilot.press("2")
            view = app.query_one(BlocksView)
            assert view.edge is not None and view.edge.edge_class == "one-to-few"
            shot = screen(app)
            assert "one-to-few" in shot and "needs 2" in shot  # block 0 needs 0 and 1
            await pilot.press("j")  # the edge list has the keys first; j/k as in k9s
            assert view.edge.key == "1->2" and "k1_relu -> k2_conv" in screen(app)
            await pilot.press("k", "enter", "right", "down")  # enter: into the consumer's blocks; block 9
            assert view.edge.key == "0->1" and "consumer chunk 9 needs 3" in screen(app)  # llvm: a chunk of the loop
            await pilot.press("shift+tab", "shift+tab", "j")  # back to the edge list
            assert view.edge.key == "1->2"
    run(go())


def test_unavailable_analyses_are_said_not_faked(tmp_path):
    async def go():
        app, _ = make_app(tmp_path, blocks=False, plan=False)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            await pilot.press("2")
            assert "Block dependency analysis not available" in screen(app)
            await pilot.press("3")
            assert "Fusion plan not available" in screen(app)
            assert app.query_one(FusionTable).row_count == 0
    run(go())


def test_export_writes_svgs_and_notifies(tmp_path):
    async def go():
        app, _ = make_app(tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            await pilot.press("c")
            await settle(pilot, app)
            await pilot.press("e")
            await settle(pilot, app)
            out = tmp_path / "export"
            for name in ("opgraph.svg", "blockgraph.svg", "timing.svg", "timing.png"):
                assert (out / name).stat().st_size > 0, name
            assert "<svg" in (out / "opgraph.svg").read_text()
            notes = [n.message for n in app._notifications]
            assert any(f"wrote {out / 'opgraph.svg'}" in n for n in notes)  # the notification says where
    run(go())


def test_help_lists_every_key_and_theme_toggles(tmp_path):
    async def go():
        app, _ = make_app(tmp_path)
        async with app.run_test(size=(160, 80)) as pilot:
            await settle(pilot, app)
            await pilot.press("question_mark")
            await pilot.pause()
            shot = screen(app)
            for key in ("Approve all", "Focus", "Search", "Next match", "Zoom in", "Export", "command palette",
                        "Light/dark", "Sort"):
                assert key in shot, key
            await pilot.press("escape")
            dark = app.current_theme.dark
            await pilot.press("d")
            assert app.current_theme.dark != dark
    run(go())


def test_graph_screen_snapshot(tmp_path):
    """A fixed-size screenshot of the opening screen: its key text lines are stable."""
    async def go():
        app, _ = make_app(tmp_path, n_nodes=12)
        async with app.run_test(size=(120, 36)) as pilot:
            await settle(pilot, app)
            svg = app.export_screenshot()
            (tmp_path / "graph.svg").write_text(svg)
            assert svg.startswith("<svg") and "stem/conv" in svg
            text = screen(app).splitlines()
            assert text[1].split() == ["1", "Graph", "2", "Blocks", "3", "Fusion", "4", "Timing", "5", "Compile"]
            assert any("╭" in line and "╮" in line for line in text)
            assert any("Conv 1x64x28x28" in line for line in text)
            assert text[-1].rstrip().endswith("^p palette") and "/ Search" in text[-1]
    run(go())


class _Limiter(enum.Enum):  # shaped like engine.resources.Limiter
    REGISTERS = "registers"
    THREADS = "threads"


def _resources(kernel: str, registers: int, occupancy: float | None, spills: int = 0):
    """A KernelResources-shaped row (engine/resources.py), as a cuda compile reports them."""
    return SimpleNamespace(kernel=kernel, registers=registers, shared_bytes=6912, local_bytes=spills,
                           spill_stores=spills, spill_loads=spills, threads_per_block=128 if occupancy else None,
                           occupancy=occupancy, limiter=_Limiter.REGISTERS if occupancy else None)


def test_switching_target_reruns_the_analyses_for_it(tmp_path):
    async def go():
        app, session = make_app(tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            analyses = app.analyses
            assert analyses.target == "llvm" and analyses.calls == [("plan", "llvm"), ("blocks", "llvm")]
            assert "blockwise [llvm]" in screen(app)
            await pilot.press("3", "a")  # a choice on the llvm plan, not saved
            await pilot.press("c")
            await settle(pilot, app)
            assert app.results["before"] is not None and session.compiles[-1].target == "llvm"
            await pilot.press("T")
            await settle(pilot, app)
            assert analyses.target == "cuda" and session.scheduled_for[-1] == ("cuda", None)
            assert analyses.calls[-2:] == [("plan", "cuda"), ("blocks", "cuda")]
            # the old target's views are emptied; the plan is the cuda one, with its own file
            assert app.results == {"before": None, "after": None}
            assert app.plan.target == "cuda" and app.plan.path == str(tmp_path / "plan-cuda.json")
            assert all(r.status is DecisionStatus.PROPOSED for r in app.plan.rows) and not app.plan.dirty
            assert "blockwise [cuda] — synthetic: 40 ops" in screen(app)
            await pilot.press("3")
            assert f"target cuda   plan file {tmp_path / 'plan-cuda.json'}" in screen(app)
            await pilot.press("2")
            shot = screen(app)
            assert "a block is one blockIdx" in shot and "blockIdx p→c" in shot
            assert "consumer blockIdx 0 needs 2" in shot and "32 × blockIdx" in shot
            await pilot.press("4")
            assert "not compiled yet" in screen(app)
            await pilot.press("5")
            await pilot.pause()
            assert "No compile yet" in screen(app), screen(app)
            # a result of the old target's analyses arriving late is dropped
            app.post_message(events.PlanReady(Unavailable("stale llvm analysis"), generation=0))
            await pilot.pause()
            assert isinstance(app.plan, PlanState) and app.plan.target == "cuda"
            # the palette offers the way back; the llvm plan comes back with its unsaved choice
            commands = {c.title: c for c in app.get_system_commands(app.screen)}
            assert "Switch target to cuda" not in commands
            commands["Switch target to llvm"].callback()
            await settle(pilot, app)
            assert analyses.target == "llvm" and analyses.calls[-1] == ("blocks", "llvm")
            assert app.plan.row("D1").status is DecisionStatus.APPROVED and app.plan.dirty
            assert app.plan.path == str(tmp_path / "plan.json")
    run(go())


def test_target_switch_from_the_command_palette(tmp_path):
    async def go():
        app, _ = make_app(tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            await pilot.press("ctrl+p")
            await pilot.pause()
            await pilot.press(*"switch target")
            await pilot.pause(0.3)
            assert "Switch target to cuda" in screen(app)
            await pilot.press("enter")
            await settle(pilot, app)
            assert app.analyses.target == "cuda" and app.analyses.calls[-1] == ("blocks", "cuda")
            assert "blockwise [cuda]" in screen(app)
    run(go())


def test_target_switch_waits_for_a_running_compile(tmp_path):
    async def go():
        app, _ = make_app(tmp_path, stage_delay=0.3)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            await pilot.press("c", "T")
            assert app.analyses.target == "llvm"
            assert any("compile is running" in n.message for n in app._notifications)
            await settle(pilot, app)
    run(go())


def test_cuda_compile_without_a_gpu_says_not_timed_and_shows_resources(tmp_path):
    async def go():
        rows = (_resources("fused_conv2d_add_relu_kernel", 64, 0.5), _resources("concatenate_kernel", 255, None, 8))
        app, session = make_app(tmp_path, target="cuda", arch="sm_80", resources=rows)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            assert session.scheduled_for[0] == ("cuda", "sm_80")
            assert "blockwise [cuda --arch sm_80]" in screen(app)
            await pilot.press("c")
            await settle(pilot, app)
            options = session.compiles[-1]
            assert options.target == "cuda" and options.arch == "sm_80"
            shot = screen(app)  # the compile tab
            assert f"done: 22 launches, {NOT_TIMED}; see 4 Timing" in shot
            await pilot.press("4")
            shot = screen(app)
            assert NOT_TIMED in shot and "measured on" not in shot
            assert "0.000" not in shot  # no table of zero times
            assert "from ptxas" in shot and "occupancy: theoretical (estimated)" in shot
            assert "Regs" in shot and "Occ. (est.)" in shot and "Limiter (est.)" in shot
            lines = [line for line in shot.splitlines() if "fused_conv2d_add_relu_kernel" in line]
            assert lines and lines[0].split("│")[1].split()[:7] == ["64", "6912", "0", "0/0", "128", "50%",
                                                                   "registers"]
            spilling = next(line for line in shot.splitlines() if "concatenate_kernel" in line)
            assert "8/8" in spilling and "—" in spilling  # unknown occupancy is a dash, not 0%
            assert app.query_one(ResourceTable).row_count == 2
    run(go())


def test_timed_run_is_labelled_measured_and_plan_gains_estimated(tmp_path):
    async def go():
        app, _ = make_app(tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            await pilot.press("3")
            shot = screen(app)
            assert "estimated gain" in shot and "estimated 0.10 ms" in shot
            await pilot.press("c")
            await settle(pilot, app)
            assert "(measured on cpu)" in screen(app)
            await pilot.press("4")
            shot = screen(app)
            assert "latency and kernel times measured on cpu" in shot and NOT_TIMED not in shot
            assert "from ptxas" not in shot  # no resources reported: no resource table
    run(go())


def op_boxes(canvas) -> list[str]:
    """The ops drawn (not the graph's input and output tensors, drawn as nodes too)."""
    return [n for n in canvas.scene.layout.boxes if not is_port(n)]


def screen(app) -> str:
    """The current screen as plain text (what export_screenshot draws, without the SVG)."""
    import io

    from rich.console import Console

    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), record=True, legacy_windows=False,
                      safe_box=False, force_terminal=True, color_system="truecolor")
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text()
