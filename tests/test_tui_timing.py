"""The Timing tab on the injected fake engine (tests/test_tui.py's factory): the before/after
of ONE plan compile in one table, sorting that belongs to the view, a row that leads to the
graph, the reference-moved warning."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from engine.parallel.outcome import DecisionOutcome, DecisionResult, PlanOutcome, group_timings
from engine.timing import KernelTime, Latency, Spread
from tests.test_tui import FakeSession, make_app, screen, settle
from workbench.tui.graph_canvas import GraphCanvas
from workbench.tui.blocks_view import BlocksView
from workbench.tui.timing_view import BeforeAfterPanel, GroupTable, KernelTable

SIZE = (200, 55)


class PlanFakeSession(FakeSession):
    """A plan compile fuses the first two kernels into hfused_D1 and reports both builds timed
    in its apply step, as engine.parallel.apply does; onnxruntime's latency per compile is
    `ort_ms` in turn (to move the reference between compiles)."""

    def __init__(self, *args, ort_ms=(1.0, 1.0), **kw):
        super().__init__(*args, **kw)
        self.ort_ms = list(ort_ms)

    def compile(self, options=None, progress=None, cancel=None):
        result = super().compile(options, progress, cancel)
        ort = self.ort_ms.pop(0) if self.ort_ms else 1.0
        result.onnxruntime_latency = Latency(ort, ort * 0.99, ort * 1.01, ort * 1.01, 20, ort * 0.995, ort * 1.005)
        if options.plan is None:
            return result
        before = tuple(SimpleNamespace(var=f"lv{k.index}", **vars(k)) for k in result.kernels)
        fused = SimpleNamespace(index=0, var="lv_fused", func="hfused_D1", ops=before[0].ops + before[1].ops)
        after = (fused, *before[2:])
        before_t = {k.func: Spread(0.02 * (k.index + 1), 0.019 * (k.index + 1), 0.021 * (k.index + 1), 9)
                    for k in before}
        after_t = {**before_t, "hfused_D1": Spread(0.045, 0.044, 0.046, 9)}
        labels = {n.id: n.label for n in self.graph.nodes}
        groups = group_timings(before, after, {"hfused_D1": ("D1", (0, 1))}, before_t, after_t, labels)
        outcome = PlanOutcome(
            (DecisionOutcome("D1", DecisionResult.APPLIED, "", "hfused_D1", 2, 1, (0.02, 0.04), 0.045, 0.004),),
            len(before), len(after), "outputs match", unfused_ms=1.2, fused_ms=1.1, e2e_noise_ms=0.05,
            kernel_timing="each kernel timed alone", groups=groups,
            unfused=Spread(1.2, 1.18, 1.22, 60), fused=Spread(1.1, 1.08, 1.12, 60))
        result.kernels = tuple(SimpleNamespace(index=i, func=k.func, ops=k.ops) for i, k in enumerate(after))
        result.kernel_times = tuple(KernelTime(k.func, 1, after_t[k.func].median_ms, after_t[k.func].median_ms,
                                               after_t[k.func].median_ms, after_t[k.func].q1_ms,
                                               after_t[k.func].q3_ms, 0.0) for k in after)
        result.launches = len(after)
        result.fusion = outcome
        return result


def make_plan_app(tmp_path, **kw):
    app, _ = make_app(tmp_path)
    session = PlanFakeSession(app.session_factory("synthetic").graph, **kw)
    app.session_factory = lambda spec: session
    return app, session


async def compile_then_plan_compile(pilot, app):
    """`c` (no plan), then approve every decision and `C` (with the plan), then the Timing tab."""
    await settle(pilot, app)
    await pilot.press("c")
    await settle(pilot, app)
    await pilot.press("3", "A", "C")
    await settle(pilot, app)
    await pilot.press("4")


def test_before_after_table_renders_both_columns_from_one_compile(tmp_path):
    async def go():
        app, session = make_plan_app(tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            await pilot.press("4")
            await pilot.pause()
            assert "builds and times the unfused and the fused model in one compile" in screen(app)
            await pilot.press("3")
            await settle(pilot, app)  # the plan's decisions are in the table before A approves them
            await pilot.press("A", "C")  # only the plan compile: no `c` before it
            await settle(pilot, app)
            assert len(session.compiles) == 1
            await pilot.press("4")
            shot = screen(app)
            assert "before/after the plan: one compile" in shot
            for header in ("Group (after ← before)", "Before ms", "After ms", "Δ after−before ms", "Speedup"):
                assert header in shot, header
            fused = next(line for line in shot.splitlines() if "hfused_D1 ←" in line)
            # before = both members (0.02 + 0.04), after = the fused kernel; its delta has a sign and noise
            assert "stem/conv" in fused and "0.060" in fused and "0.045" in fused
            assert "−0.015 ±0.008" in fused and "1.33x ±0.19" in fused and "faster" in fused
            alone = next(line for line in shot.splitlines() if "  k2_conv  " in line and "after █" not in line)
            assert alone.count("0.060") == 2 and "within noise" in alone  # a kernel left alone: itself
            assert "end to end, same run: unfused 1.200 ms -> fused 1.100 ms: 1.09x ±0.08 (faster)" in shot
            assert "fused − unfused: −0.100 ms ±0.080 (faster)" in shot
            assert app.query_one(GroupTable).row_count == len(app.results["after"].kernels)
            # the Compile tab's outcome carries the same-run figures too
            await pilot.press("5")
            assert "same run: unfused 1.200 ms -> fused 1.100 ms" in screen(app)
    asyncio.run(go())


def test_sorting_belongs_to_the_view_and_shows_its_direction(tmp_path):
    async def go():
        app, _ = make_plan_app(tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await compile_then_plan_compile(pilot, app)
            await pilot.pause()
            groups = app.query_one(GroupTable)
            assert groups.has_focus and "Kernel ▲" in screen(app)  # execution order first
            # each group named by the kernel id the graph and the Fusion tab use for it
            kernel_of = {op: f"k{k.index}" for k in app.results["after"].kernels for op in k.ops}
            for i in range(groups.row_count):
                row = groups.sorted_rows()[i]
                assert str(groups.get_row_at(i)[0]) == kernel_of[row.ops[0]]
            await pilot.press("o", "o")  # Kernel -> Group -> Before ms, largest first
            assert "Before ms ▼" in screen(app)
            before = [r.row.before_ms for r in groups.sorted_rows()]
            assert before == sorted(before, reverse=True)
            assert str(groups.get_row_at(0)[1]).startswith("k21_conv")
            await pilot.press("O")
            assert "Before ms ▲" in screen(app)
            assert [r.row.before_ms for r in groups.sorted_rows()] == sorted(before)
            # o/O on a kernel table sorts both kernel tables: one order for the view
            await pilot.press("tab")
            before_table, after_table = app.query(KernelTable)
            assert before_table.has_focus
            await pilot.press(*"o" * 6)  # Med ms -> Q1, Q3, Calls, GFLOP/s, GB/s, Kernel (kN name)
            assert (before_table.sort_index, before_table.descending) == (7, False)
            assert (after_table.sort_index, after_table.descending) == (7, False)
            assert screen(app).count("Kernel ▲") == 2
            for table in (before_table, after_table):
                numbers = [int(str(table.get_row_at(i)[-1]).split()[0][1:]) for i in range(table.row_count)]
                assert numbers == sorted(numbers)  # k9 before k10
    asyncio.run(go())


def test_a_timing_row_leads_to_its_operators_in_the_graph(tmp_path):
    async def go():
        app, _ = make_plan_app(tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            await pilot.press("3", "A", "C")
            await settle(pilot, app)
            await pilot.press("4")
            await pilot.pause()
            await pilot.press("enter")  # the first group: hfused_D1 and the two kernels it replaced
            await settle(pilot, app)
            canvas = app.query_one(GraphCanvas)
            fused = next(k for k in app.results["after"].kernels if k.func == "hfused_D1")
            assert app.query_one("#tabs").active == "graph"
            assert canvas._highlight == frozenset(fused.ops) and canvas.selected == fused.ops[0]
            assert any("hfused_D1 ←" in n.message for n in app._notifications)
    asyncio.run(go())


def test_a_reference_that_moved_between_compiles_is_a_warning(tmp_path):
    async def go():
        app, _ = make_plan_app(tmp_path, ort_ms=(423.55, 329.62))
        async with app.run_test(size=SIZE) as pilot:
            await compile_then_plan_compile(pilot, app)
            shot = screen(app)
            assert "⚠ onnxruntime moved 423.55 -> 329.62 ms between the two compiles" in shot
            assert "compare within one compile" in shot
    asyncio.run(go())


def test_no_warning_when_the_reference_held_still(tmp_path):
    async def go():
        app, _ = make_plan_app(tmp_path, ort_ms=(1.0, 1.002))
        async with app.run_test(size=SIZE) as pilot:
            await compile_then_plan_compile(pilot, app)
            assert "moved" not in screen(app)
            assert app.query_one(BeforeAfterPanel).query_one(GroupTable).display
    asyncio.run(go())


def test_export_takes_the_blocks_tab_edge_and_writes_one_timing_chart(tmp_path):
    async def go():
        app, _ = make_plan_app(tmp_path)
        asked = []
        real = app.analyses.block_graph_dot
        app.analyses.block_graph_dot = lambda session, report, key: asked.append(key) or real(session, report, key)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            await pilot.press("c")
            await settle(pilot, app)
            await pilot.press("3")
            await pilot.pause()
            await pilot.press("A", "C")
            await settle(pilot, app)
            await pilot.press("2")
            await pilot.pause()
            await pilot.press("j")  # the edge table has the keys: the second edge
            await pilot.pause()
            picked = app.query_one(BlocksView).edge
            assert picked.key == "1->2"
            await pilot.press("1")
            await pilot.pause()
            canvas = app.query_one(GraphCanvas)
            canvas.selected = "n0"  # a graph selection elsewhere does not move the Blocks tab's edge
            await pilot.pause()
            assert app.query_one(BlocksView).edge.key == "1->2"
            await pilot.press("e")
            await settle(pilot, app)
            assert asked == ["1->2"]
            assert any(f"the Blocks tab's edge {picked.title}" in n.message for n in app._notifications)
            out = tmp_path / "export"
            assert (out / "timing.png").stat().st_size > 0 and not (out / "timing-before.svg").exists()
            svg = (out / "timing.svg").read_text()
            assert "time per kernel, before and after the plan" in svg and "kernel totals" in svg
            assert "before: unfused build" in svg and "after: fused build" in svg  # the legend
            fused = next(k for k in app.results["after"].kernels if k.func == "hfused_D1")
            assert f"k{fused.index} hfused_D1" in svg  # named as the graph and the Timing tab name it
            opgraph = (out / "opgraph.svg").read_text()
            assert "operator graph" in opgraph and "legend" in opgraph and "fusion decision: approved" in opgraph
    asyncio.run(go())
