"""The TUI on the real engine: fire_module opened, analysed, compiled (llvm) with and without
the fusion plan, exported; the same for cuda in host emulation. About 40 s."""

from __future__ import annotations

import asyncio
import json

from tests.conftest import SAMPLES
from tests.test_tui import op_boxes, screen, settle
from workbench.tui.app import WorkbenchApp
from workbench.tui.blocks_view import BlocksView
from workbench.tui.engine_adapter import EngineAnalyses
from engine.parallel.plan import DecisionStatus
from workbench.tui.facts import PlanState
from workbench.tui.fusion_table import FusionTable
from workbench.tui.graph_canvas import GraphCanvas
from workbench.tui.timing_view import NOT_TIMED


def test_fire_module_end_to_end(tmp_path):
    async def go():
        plan_file = tmp_path / "plan.json"
        app = WorkbenchApp(str(SAMPLES / "fire_module.onnx"), analyses=EngineAnalyses(str(plan_file)),
                           out_dir=tmp_path / "export", runs=3)
        app.animation_level = "none"
        async with app.run_test(size=(160, 45)) as pilot:
            await settle(pilot, app)
            canvas = app.query_one(GraphCanvas)
            assert len(op_boxes(canvas)) == len(app.graph.nodes)
            assert "expand3x3/conv" in screen(app)
            # block dependencies from engine.blockdeps
            await pilot.press("2")
            view = app.query_one(BlocksView)
            assert view.report is not None and view.report.edges
            shot = screen(app)
            assert view.edge.edge_class in shot and "needs" in shot
            # the fusion plan from engine.parallel: approve, save as the CLI's JSON
            await pilot.press("3")
            assert isinstance(app.plan, PlanState) and app.query_one(FusionTable).row_count >= 1
            await pilot.press("A", "ctrl+s")
            saved = json.loads(plan_file.read_text())
            assert saved["model"] == "fire_module" and saved["decisions"][0]["status"] == "approved"
            # compile before and after the plan (real llvm builds)
            await pilot.press("c")
            await settle(pilot, app)
            assert app.results["before"] is not None, screen(app)
            await pilot.press("C")
            await settle(pilot, app)
            after = app.results["after"]
            assert after is not None, screen(app)
            assert after.launches < app.results["before"].launches
            # A approved all: the expands writing into the concat's slices apply first
            assert any(k.func.startswith("sfused_") for k in after.kernels)
            assert any(r.measured_gain_ms is not None for r in app.plan.rows if r.status is DecisionStatus.APPROVED)
            await pilot.press("4")
            shot = screen(app)
            assert "sfused_" in shot and "vs the c compile" in shot
            # the before/after of the plan compile: both builds, one row per operator group
            assert "before/after the plan: one compile" in shot and "sfused_d" in shot and " ← " in shot, shot
            assert "end to end, same run: unfused" in shot
            await pilot.press("e")
            await settle(pilot, app)
            for name in ("opgraph.svg", "blockgraph.svg", "timing.svg", "timing.png"):
                assert (tmp_path / "export" / name).stat().st_size > 0, name
    asyncio.run(go())


def test_keep_measured_winners_approves_what_the_compile_kept(tmp_path):
    async def go():
        app = WorkbenchApp(str(SAMPLES / "fire_module.onnx"), analyses=EngineAnalyses(str(tmp_path / "p.json")),
                           out_dir=tmp_path / "export", runs=3)
        app.animation_level = "none"
        async with app.run_test(size=(160, 45)) as pilot:
            await settle(pilot, app)
            await pilot.press("3", "W")
            await settle(pilot, app)
            after = app.results["after"]
            assert after is not None and after.fusion.policy == "auto", screen(app)
            applied = {d.id for d in after.fusion.decisions if d.result.value == "applied"}
            assert {r.id for r in app.plan.approved} == applied
            assert all(r.status is DecisionStatus.PROPOSED for r in app.plan.rows
                       if r.id not in applied and r.status is not DecisionStatus.REJECTED)
    asyncio.run(go())


def test_fire_module_for_cuda_without_a_gpu(tmp_path):
    """--target cuda on this machine: blockIdx block maps, the CUDA plan in its own file, a
    compile verified in host emulation and not timed; T switches to llvm and back."""
    async def go():
        analyses = EngineAnalyses(str(tmp_path / "cuda-plan.json"), target="cuda")
        app = WorkbenchApp(str(SAMPLES / "fire_module.onnx"), analyses=analyses, out_dir=tmp_path / "export", runs=3)
        app.animation_level = "none"
        async with app.run_test(size=(160, 45)) as pilot:
            await settle(pilot, app)
            assert "blockwise [cuda]" in screen(app)
            await pilot.press("2")
            shot = screen(app)
            assert "a block is one blockIdx" in shot and "× blockIdx (blockIdx" in shot, shot
            await pilot.press("3")
            assert isinstance(app.plan, PlanState) and app.plan.target == "cuda" and app.plan.rows
            assert app.plan.path == str(tmp_path / "cuda-plan.json") and "estimated gain" in screen(app)
            await pilot.press("c")
            await settle(pilot, app)
            result = app.results["before"]
            assert result is not None and result.ran_on == "host emulation", screen(app)
            assert NOT_TIMED in screen(app)
            await pilot.press("4")
            shot = screen(app)
            assert NOT_TIMED in shot and "measured on" not in shot
            if result.kernel_resources:  # the target's codegen check reports them (ptxas found)
                assert "from ptxas" in shot and "fused_conv2d_add_relu_kernel" in shot
            await pilot.press("T")
            await settle(pilot, app)
            assert app.analyses.target == "llvm" and app.plan.target == "llvm"
            assert app.plan.path.endswith("fire_module-llvm/plan.json")  # not the cuda plan's file
            await pilot.press("2")
            assert "a block is one chunk of the outer parallel loop" in screen(app)
    asyncio.run(go())
