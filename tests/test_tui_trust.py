"""What a compiler engineer needs to trust the TUI (issue 20, keys and evidence half): every
key acts or says why, plans are never saved over a file the user did not choose, overlapping
decisions show as conflicts, labels are unique, and the graph shows its inputs, outputs,
properties and a legend. Fake engine (tests/test_tui.py); a few seconds each."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

from engine.errors import PlanError
from engine.parallel.plan import DecisionKind, DecisionStatus, FusionDecision, FusionPlan, MemberRef
from tests.test_tui import make_app, screen, settle
from workbench.present.opgraph import graph_ports, op_labels, op_properties
from workbench.tui.engine_adapter import EngineAnalyses
from workbench.tui.facts import DecisionRow, PlanState, conflict_lines, conflicts
from workbench.tui.fusion_table import FusionTable
from workbench.tui.graph_canvas import GraphCanvas
from workbench.tui.synthetic import synthetic_graph

SIZE = (200, 55)


def run(coro):
    return asyncio.run(coro)


def notes(app) -> list[str]:
    return [n.message for n in app._notifications]


# --- keys ------------------------------------------------------------------------------------

def test_keys_that_cannot_act_say_why(tmp_path):
    async def go():
        app, _ = make_app(tmp_path, plan=False)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            for key, said in (("f", "select an op first to focus"), ("greater_than_sign", "go to its successor"),
                              ("less_than_sign", "go to its predecessor"), ("n", "no search results"),
                              ("x", "no compile is running")):
                app.clear_notifications()
                await pilot.press(key)
                await pilot.pause()
                assert any(said in n for n in notes(app)), (key, notes(app))
            await pilot.press("3")  # no plan: the table is empty
            for key in ("a", "r", "A", "u"):
                app.clear_notifications()
                await pilot.press(key)
                assert any("no decision" in n for n in notes(app)), key
            await pilot.press("1", "right_square_bracket", "right_square_bracket")
            app.clear_notifications()
            await pilot.press("greater_than_sign")  # now there is a selection: it moves
            assert app.query_one(GraphCanvas).selected == "n2" and not notes(app)
    run(go())


def test_j_and_k_move_the_fusion_table_and_q_quits(tmp_path):
    async def go():
        app, _ = make_app(tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            await pilot.press("3", "j")
            table = app.query_one(FusionTable)
            assert table.cursor_row == 1 and table.current.id == "D2"
            await pilot.press("k", "a")  # approves the row under the cursor: D1
            assert app.plan.row("D1").status is DecisionStatus.APPROVED
            assert app.plan.row("D2").status is DecisionStatus.PROPOSED
            await pilot.press("q")  # the approval is not saved: q warns once
            await pilot.pause()
            assert app.is_running and "unsaved choices" in " ".join(n.message for n in app._notifications)
            await pilot.press("q")
            await pilot.pause()
        assert app.return_code == 0 and not app.is_running
    run(go())


def test_q_quits_at_once_when_nothing_is_unsaved(tmp_path):
    async def go():
        app, _ = make_app(tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            await pilot.press("q")
            await pilot.pause()
        assert app.return_code == 0 and not app.is_running
    run(go())


def test_help_explains_the_terms_and_scrolls_with_j(tmp_path):
    async def go():
        app, _ = make_app(tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            await pilot.press("question_mark")
            await pilot.pause()
            help_screen = app.screen
            scroll = help_screen.query_one("VerticalScroll")
            text = screen(app)
            for _ in range(8):  # j scrolls: the keys, then the terms come into view
                await pilot.press(*"j" * 12)
                await pilot.pause()
                text += screen(app)
            assert scroll.scroll_y > 0
            assert "q / ctrl+q" in text and "terms" in text
            for term in ("block (llvm, now)", "chunk of the outer parallel loop", "block (cuda)", "edge: one-to-few",
                         "edge: all-to-all", "edge: partial", "decision: branch-stage", "decision: block-level vertical",
                         "status: approved", "Blocks: ◆", "Blocks: ■", "Blocks: ·"):
                assert term in text, term
            await pilot.press("q")  # closes the help, does not quit
            await pilot.pause()
            assert app.is_running and app.screen is not help_screen
    run(go())


def test_palette_screenshot_is_saved_in_the_export_folder(tmp_path):
    async def go():
        app, _ = make_app(tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            commands = {c.title: c for c in app.get_system_commands(app.screen)}
            commands["Screenshot"].callback()  # what the palette's entry runs
            for _ in range(40):
                await pilot.pause(0.05)
                if any("Saved screenshot" in n for n in notes(app)):
                    break
            shots = list((tmp_path / "export").glob("screenshot-synthetic-*.svg"))
            assert len(shots) == 1 and shots[0].read_text().startswith("<svg"), notes(app)
            assert not any("Failed" in n for n in notes(app))
    run(go())


# --- saving ----------------------------------------------------------------------------------

def _session(tmp_path):
    graph = synthetic_graph(12)
    proposal = SimpleNamespace(plan=FusionPlan("m", "llvm", "fp", ()))

    def load_plan(path, target, arch=None):
        raise PlanError(f"{path} is for target 'cuda', not '{target}'")

    return SimpleNamespace(model=SimpleNamespace(name="m"), graph=graph, load_plan=load_plan,
                           propose=lambda target, arch=None: proposal)


def test_another_targets_plan_file_is_left_alone(tmp_path, monkeypatch):
    """--plan cuda_plan.json on llvm: a new llvm plan, saved to llvm's own default file."""
    monkeypatch.chdir(tmp_path)
    cuda = tmp_path / "cuda_plan.json"
    cuda.write_text(FusionPlan("m", "cuda", "fp", ()).dumps())
    state = EngineAnalyses(str(cuda), target="llvm").load_or_propose(_session(tmp_path))
    assert isinstance(state, PlanState)
    assert state.path == str(Path("out") / "m-llvm" / "plan.json") and state.owns_file
    assert "is for target 'cuda', not 'llvm': left alone" in state.note


def test_a_plan_file_that_does_not_fit_is_overwritten_only_when_confirmed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    stale = tmp_path / "mine.json"
    stale.write_text(FusionPlan("other_model", "llvm", "fp", ()).dumps())  # the same target: kept as the path
    state = EngineAnalyses(str(stale), target="llvm").load_or_propose(_session(tmp_path))
    assert state.path == str(stale) and not state.owns_file

    async def go():
        app, _ = make_app(tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            app.plan.path, app.plan.owns_file = str(stale), False
            before = stale.read_text()
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert "Overwrite it?" in screen(app)
            await pilot.press("n")
            await pilot.pause()
            assert stale.read_text() == before and any("plan not saved" in n for n in notes(app))
            await pilot.press("ctrl+s")
            await pilot.pause()
            await pilot.press("y")
            await pilot.pause()
            assert stale.read_text() != before and app.plan.owns_file
            app.clear_notifications()
            await pilot.press("ctrl+s")  # its own file now: no question
            await pilot.pause()
            assert "Overwrite it?" not in screen(app) and any("plan saved" in n for n in notes(app))
    run(go())


# --- evidence and labels ---------------------------------------------------------------------

def _row(did, members, status=DecisionStatus.APPROVED):
    return DecisionRow(did, "horizontal", members, "", "", status)


def test_conflicts_are_approved_decisions_sharing_a_kernel():
    rows = [_row("d0", ("a", "b")), _row("d1", ("b", "c")), _row("d2", ("c",), DecisionStatus.PROPOSED),
            _row("d3", ("x", "y"))]
    assert conflicts(rows) == {"d0": ("d1",), "d1": ("d0",)}
    assert conflict_lines(rows, ("d1",)) == ["d1 shares a kernel with approved d0: only d0 (first in plan order) "
                                             "is applied; reject one (r)"]
    assert conflict_lines(rows, ("d3",)) == []


def test_approving_an_overlapping_decision_marks_both_and_says_so(tmp_path):
    async def go():
        app, _ = make_app(tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            rows = [DecisionRow("D1", "horizontal", ("n1", "n6"), "", "0.10 ms", DecisionStatus.PROPOSED),
                    DecisionRow("D2", "branch-stage", ("n6", "n9"), "", "0.05 ms", DecisionStatus.PROPOSED)]
            app.plan.rows = rows
            app.query_one("FusionPane").set_plan(app.plan, app.graph)
            await pilot.press("3", "a", "a")
            await pilot.pause()
            shot = screen(app)
            assert "approved ⚠ D2" in shot and "approved ⚠ D1" in shot
            assert "2 share kernels ⚠" in shot
            assert any("D2 shares a kernel with approved D1: only D1" in n for n in notes(app))
    run(go())


def _member(kernel, label, op):
    return MemberRef(kernel, f"f{kernel}", (op,), (label,), "Softmax", (1, 4), 10, 4)


def test_two_kernels_of_one_operator_are_named_once():
    from engine.parallel.plan import Evidence, Gain

    d = FusionDecision("d31", DecisionKind.VERTICAL_BLOCK, 0,
                       (_member(7, "r142/softmax", "n7"), _member(8, "r142/softmax", "n7")),
                       Gain(1, 1, (4, 4), 4, 1.0, 1.0, 4.0), Evidence("a -> b", (), True, True, 0, 0, False, False))
    assert d.title() == "r142/softmax (2 kernels)"
    assert d.title({"n7": "attn/softmax"}) == "attn/softmax (2 kernels)"


def test_duplicate_op_labels_get_their_id():
    graph = synthetic_graph(12)
    twin = graph.nodes[2]
    labels = op_labels(SimpleNamespace(nodes=graph.nodes[:3] + (SimpleNamespace(id="dup", label=twin.label),)))
    assert labels[twin.id] == f"{twin.label} ({twin.id})" and labels["dup"] == f"{twin.label} (dup)"
    assert labels["n0"] == "stem/conv"  # unique labels stay as they are


def test_fork_on_a_graph_input_is_named_so():
    from engine.parallel.detection import _fork_label

    assert _fork_label(None, None, "input") == "graph input 'input'"


# --- the graph -------------------------------------------------------------------------------

def test_graph_ports_and_properties():
    graph = synthetic_graph(12)
    ports = graph_ports(graph)
    assert [p.id for p in ports] == ["in:input", "out:tn11"]
    assert ports[0].ops == ("n0",) and ports[0].shape == (1, 3, 224, 224)
    rows = dict(op_properties(graph, "n0", "k0 fused_conv", 0.25))
    assert rows["op"] == "Conv  n0" and rows["in 0"] == "1x3x224x224 float32  input"
    assert rows["out 0"].startswith("1x64x28x28 float32") and rows["kernel"] == "k0 fused_conv  0.250 ms"
    assert "MFLOP" in rows["work"] and rows["from / to"].startswith("graph input")


def test_graph_shows_inputs_outputs_properties_and_legend(tmp_path):
    async def go():
        app, _ = make_app(tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            shot = screen(app)
            assert "input input" in shot and "1 input, 1 output" in shot
            for mark in ("legend", "graph input / output tensor", "kernel kN", "fusion decision dN",
                         "search match", "kernel time after c/C"):
                assert mark in shot, mark
            await pilot.press("right_square_bracket")  # select n0
            shot = screen(app)
            assert "op: Conv  n0" in shot and "in 0: 1x3x224x224 float32  input" in shot
            assert "kernel: k0 k0_conv" in shot  # the kernel from the scheduled module, before any compile
            canvas = app.query_one(GraphCanvas)
            assert any(spec.label.startswith("k0 ") for spec, _ in canvas.scene.layout.clusters)
    run(go())


def test_relayout_keeps_the_node_under_the_eye_in_place(tmp_path):
    """Clusters arriving (or a zoom) lay the graph out again: the selected node stays where it
    was on screen instead of the view jumping."""
    async def go():
        app, _ = make_app(tmp_path, n_nodes=80)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            canvas = app.query_one(GraphCanvas)
            for _ in range(30):
                await pilot.press("right_square_bracket")
            await settle(pilot, app)
            node = canvas.selected
            box = canvas.scene.layout.boxes[node]
            place = (box.x - canvas.scroll_x, box.y - canvas.scroll_y)
            await pilot.press("b")  # clusters off: another layout
            await settle(pilot, app)
            box = canvas.scene.layout.boxes[node]
            # rows stay; columns too, unless the new layout is narrower than the view (no scrolling then)
            assert box.y - canvas.scroll_y == place[1]
            assert box.x - canvas.scroll_x == place[0] or canvas.virtual_size.width <= canvas.size.width
    run(go())
