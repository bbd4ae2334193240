"""WorkbenchApp: tabs over one model. Domain work runs in named thread workers that call the
engine's Session (and engine_adapter for the analyses) and post results back as messages."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import Callable

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.widgets import Footer, Header, TabbedContent, TabPane

from engine.events import STAGES, Cancelled, FusionPolicy, StageEvent
from engine.parallel.plan import DecisionStatus, FusionPlan
from engine.session import target_info, target_names
from workbench.tui import events
from workbench.tui.blocks_view import BlockGridWidget, BlocksView, EdgeTable
from workbench.tui.compile_panel import CompilePanel
from workbench.tui.engine_adapter import EngineAnalyses
from workbench.tui.facts import (BlockDepsReport, PlanState, Unavailable, conflict_lines, kernel_groups,
                                 measured_gains)
from workbench.tui.fusion_table import FusionTable
from workbench.tui.fusion_view import FusionPane
from workbench.tui.graph_canvas import GraphCanvas
from workbench.tui.graph_view import GraphView
from workbench.tui.help import HelpScreen, key_rows
from workbench.tui.layout import ClusterSpec
from workbench.present.timing import op_medians
from workbench.tui.timing_view import (NOT_TIMED, GroupTable, KernelTable, ResourceTable, TimingTable, TimingView,
                                       outcome_text, run_of)

TABS = ("graph", "blocks", "fusion", "timing", "compile")


class WorkbenchApp(App):
    TITLE = "blockwise"
    BINDINGS = [
        Binding("1", "tab('graph')", "Graph"),
        Binding("2", "tab('blocks')", "Blocks"),
        Binding("3", "tab('fusion')", "Fusion"),
        Binding("4", "tab('timing')", "Timing"),
        Binding("5", "tab('compile')", "Compile", show=False),
        Binding("slash", "search", "Search", show=False),
        Binding("c", "compile('before')", "Compile"),
        Binding("C", "compile('after')", "Compile+plan"),
        Binding("W", "compile('winners')", "Keep measured winners"),
        Binding("T", "switch_target", "Target"),
        Binding("x", "cancel_compile", "Cancel", show=False),
        Binding("e", "export", "Export"),
        Binding("ctrl+s", "save_plan", "Save plan", show=False),
        Binding("ctrl+o", "reload_plan", "Reload plan", show=False),
        Binding("d", "toggle_theme", "Light/dark", show=False),
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit_asking", "Quit", show=False),
    ]
    CSS = "TabPane { padding: 0; }"

    def __init__(self, spec: str, session_factory: Callable[[str], object] | None = None,
                 analyses: EngineAnalyses | None = None, out_dir: str | Path | None = None,
                 runs: int = 20) -> None:
        super().__init__()
        if session_factory is None:
            from engine.session import Session

            session_factory = Session
        self.spec = spec
        self.session_factory = session_factory
        self.analyses = analyses or EngineAnalyses()
        self.out_dir = Path(out_dir) if out_dir else None
        self.runs = runs
        self.session = None
        self.graph = None
        self.kernels = ()
        self.plan: PlanState | Unavailable | None = None
        self.block_report: BlockDepsReport | Unavailable | None = None
        self.results: dict[str, object] = {"before": None, "after": None}
        self._generation = 0  # target switches so far: results of an earlier target's analyses are dropped
        self._unsaved_plans: dict[str, PlanState] = {}  # target -> its plan with unsaved choices
        self._quit_warned = False  # `q` with unsaved plan choices warned once
        self._cancel = threading.Event()
        self._engine_lock = threading.Lock()  # one engine job at a time (TVM state is shared)

    def compose(self) -> ComposeResult:
        yield Header()
        with TabbedContent(id="tabs"):
            with TabPane("1 Graph", id="graph"):
                yield GraphView()
            with TabPane("2 Blocks", id="blocks"):
                yield BlocksView()
            with TabPane("3 Fusion", id="fusion"):
                yield FusionPane()
            with TabPane("4 Timing", id="timing"):
                yield TimingView()
            with TabPane("5 Compile", id="compile"):
                yield CompilePanel()
        yield Footer()

    def on_mount(self) -> None:
        self._show_target()
        self.sub_title = f"opening {self.spec}…"
        self.query_one(GraphCanvas).focus()
        self.open_model()

    # --- workers (no widget access: they post messages) ------------------------------------

    @work(thread=True, name="open", group="engine")
    def open_model(self) -> None:
        try:
            session = self.session_factory(self.spec)
            graph = session.graph
        except Exception as err:  # shown in the UI, not a traceback
            self.post_message(events.OpenFailed(_one_line(err)))
            return
        self.post_message(events.ModelOpened(session, graph))

    @work(thread=True, name="analyse", group="analyse")
    def analyse(self, session, generation: int = 0, plan: PlanState | None = None) -> None:
        """Schedule (import, fuse, schedule: cached by the session), propose the fusion plan,
        then analyse block dependencies (slow on big models; compiles may run meanwhile), all
        for the current target. `plan`: an unsaved plan of this target to show again instead
        of loading or proposing one. Results carry `generation` (see events.AnalysisMessage)."""
        target, arch = self.analyses.target, self.analyses.arch

        def progress(done: int, total: int) -> None:
            self.post_message(events.BlockDepsProgress(done, total, generation))

        with self._engine_lock:
            if generation != self._generation:  # switched again while this waited
                return
            try:
                kernels = session.scheduled(target, arch).kernels
                self.post_message(events.KernelsReady(kernels, generation))
            except Exception as err:
                failed = Unavailable(f"scheduling failed: {_one_line(err)}")
                self.post_message(events.BlockDepsReady(failed, generation))
                self.post_message(events.PlanReady(failed, generation=generation))
                return
            plan = plan or _guarded(lambda: self.analyses.load_or_propose(session))
            self.post_message(events.PlanReady(plan, generation=generation))
        if generation == self._generation:
            self.post_message(events.BlockDepsReady(_guarded(lambda: self.analyses.block_deps(session, progress)),
                                                    generation))

    @work(thread=True, exclusive=True, name="compile", group="compile")
    def compile_model(self, kind: str, plan: FusionPlan | None,
                      policy: FusionPolicy = FusionPolicy.APPROVED) -> None:
        """`plan`: the fusion plan whose approved decisions the compile applies (None: none);
        MEASURED_WINNERS: every proposed decision is tried and the measured winners kept."""
        self.post_message(events.CompileStarted(kind, [s.value for s in STAGES]))

        def progress(ev: StageEvent) -> None:
            self.post_message(events.CompileProgress(kind, ev.stage.value, ev.status.value, ev.seconds, ev.message))

        if self._engine_lock.locked():
            self.post_message(events.CompileProgress(kind, STAGES[0].value, "wait", 0.0,
                                                     "waiting for the model's scheduling and fusion proposal"))
        with self._engine_lock:
            try:
                if self._cancel.is_set():
                    raise Cancelled("compile cancelled before it started")
                options = self.analyses.compile_options(runs=self.runs, plan=plan, fusion_policy=policy)
                result = self.session.compile(options, progress=progress, cancel=self._cancel)
            except Cancelled as err:
                self.post_message(events.CompileFailed(kind, str(err), cancelled=True))
                return
            except Exception as err:
                self.post_message(events.CompileFailed(kind, _one_line(err)))
                return
        self.post_message(events.CompileFinished(kind, result))

    @work(thread=True, exclusive=True, name="export", group="export")
    def export_worker(self, out_dir: Path, clusters, op_ms, edge_key) -> None:
        from workbench.tui.export import export_views

        block_dot = None
        report = self.block_report
        if isinstance(report, Unavailable) or report is None:
            block_dot = report or Unavailable("block dependencies not analysed yet")
        else:
            try:
                block_dot = self.analyses.block_graph_dot(self.session, report, edge_key)
            except Exception as err:
                block_dot = Unavailable(_one_line(err))
        try:
            written, skipped = export_views(out_dir, self.graph, clusters, op_ms, block_dot, self.results,
                                            self.plan if isinstance(self.plan, PlanState) else None)
        except Exception as err:
            self.post_message(events.ExportDone([], [f"export failed: {_one_line(err)}"]))
            return
        self.post_message(events.ExportDone(written, skipped))

    # --- results -----------------------------------------------------------------------

    def on_model_opened(self, message: events.ModelOpened) -> None:
        self.session, self.graph = message.session, message.graph
        s = self.graph.summary()
        self.sub_title = f"{self.graph.model}: {s.ops} ops"
        self.query_one(GraphView).set_graph(self.graph)
        self.analyse(self.session, self._generation, self._unsaved_plans.pop(self.analyses.target, None))

    def on_open_failed(self, message: events.OpenFailed) -> None:
        self.sub_title = "could not open the model"
        self.query_one("#details").update(Text(f"could not open {self.spec}: {message.error}", style="bold red"))
        self.notify(message.error, title="could not open the model", severity="error", timeout=10)

    def on_kernels_ready(self, message: events.KernelsReady) -> None:
        if message.generation == self._generation:
            self.query_one(FusionPane).set_kernels(message.kernels)  # the plan numbers these kernels
        if message.generation == self._generation and not any(self.results.values()):
            self.kernels = tuple(message.kernels)
            self._update_clusters()

    def on_block_deps_progress(self, message: events.BlockDepsProgress) -> None:
        if message.generation == self._generation:
            self.query_one(BlocksView).set_progress(message.done, message.total)

    def on_block_deps_ready(self, message: events.BlockDepsReady) -> None:
        if message.generation != self._generation:
            return
        self.block_report = message.report
        self.query_one(BlocksView).set_report(message.report)

    def on_plan_ready(self, message: events.PlanReady) -> None:
        if message.generation != self._generation:
            return
        self.plan = message.plan
        self.query_one(FusionPane).set_plan(message.plan, self.graph)
        self._update_clusters()

    def on_compile_started(self, message: events.CompileStarted) -> None:
        what = "with the approved plan" if message.kind == "after" else "before the plan"
        self.query_one(CompilePanel).start(f"compiling {self.graph.model} for {self.analyses.describe_target()} "
                                           f"({what})", message.stages)
        self.sub_title = f"{self.graph.model}: compiling…"

    def on_compile_progress(self, m: events.CompileProgress) -> None:
        self.query_one(CompilePanel).stage_event(m.stage, m.status, m.seconds, m.message)

    def on_compile_finished(self, message: events.CompileFinished) -> None:
        result = message.result
        self.results[message.kind] = result
        self.kernels = tuple(result.kernels)
        run = run_of(result, message.kind, self.analyses.ran_on_device(result), self.graph)
        lat = (f"{run.latency_ms:.3f} ms (measured on {run.measured_on})" if run.latency_ms is not None
               else NOT_TIMED if run.emulated else "no timing")
        self.query_one(CompilePanel).finish(Text(outcome_text(run), style="bold green"))
        self.query_one(TimingView).set_run(message.kind, run)
        kernel_of = {op: k.func for k in result.kernels for op in k.ops}
        self.query_one(GraphView).set_timing(op_medians(result.kernels, result.kernel_times), kernel_of)
        self._update_clusters()
        self._update_measured(message.kind, result)
        self.sub_title = f"{self.graph.model}: compiled ({message.kind} the plan), {lat}"
        self.notify(f"compile done ({message.kind} the plan): {lat}, {result.launches} launches")

    def on_compile_failed(self, message: events.CompileFailed) -> None:
        self.query_one(CompilePanel).finish(Text(message.error, style="bold red"), cancelled=message.cancelled)
        self.sub_title = f"{self.graph.model}: compile {'cancelled' if message.cancelled else 'failed'}"
        self.notify(message.error, title="compile cancelled" if message.cancelled else "compile failed",
                    severity="warning" if message.cancelled else "error", timeout=8)

    def on_export_done(self, message: events.ExportDone) -> None:
        lines = [f"wrote {p}" for p in message.written] + [f"skipped {s}" for s in message.skipped]
        self.last_export = message
        self.notify("\n".join(lines) or "nothing to export", title="export", timeout=10)

    # --- messages from widgets ---------------------------------------------------------

    def on_fusion_table_decision_highlighted(self, message: FusionTable.DecisionHighlighted) -> None:
        # a plan arriving in the background highlights its first row; only a person moving the
        # cursor in the table should move the graph under them
        table = self.query_one(FusionTable)
        self.query_one(GraphCanvas).set_highlight(message.row.members if message.row else (),
                                                  scroll=table.has_focus)

    def on_fusion_table_decision_changed(self, message: FusionTable.DecisionChanged) -> None:
        if isinstance(self.plan, PlanState):
            refused = self.analyses.set_status(self.plan, message.ids, message.status)
            self.query_one(FusionPane).update_rows(self.plan.rows)
            if refused:
                self.notify("\n".join(refused), title="cannot approve (rejected by the engine)",
                            severity="warning", timeout=8)
            clashes = conflict_lines(self.plan.rows, message.ids) if message.status is DecisionStatus.APPROVED else []
            if clashes:
                self.notify("\n".join(clashes), title="conflicting decisions", severity="warning", timeout=8)

    def on_timing_table_ops_chosen(self, message: TimingTable.OpsChosen) -> None:
        """enter on a timing row: its operators highlighted and the first selected in the graph."""
        if not message.ops:
            self.notify(f"{message.label}: no operators known for this kernel", severity="warning")
            return

        def show() -> None:
            canvas = self.query_one(GraphCanvas)
            canvas.set_highlight(message.ops, scroll=True)
            canvas.selected = next((n.id for n in self.graph.nodes if n.id in set(message.ops)), message.ops[0])

        self.action_tab("graph", then=show)
        self.notify(f"{message.label}: {len(message.ops)} operator(s) highlighted in the graph")

    def on_graph_canvas_node_selected(self, message: GraphCanvas.NodeSelected) -> None:
        if message.node_id is not None:
            self.query_one(BlocksView).select_for_op(message.node_id)

    # --- actions -----------------------------------------------------------------------

    def action_tab(self, tab: str, then=None) -> None:
        targets = {"graph": (GraphCanvas,), "blocks": (EdgeTable,), "fusion": (FusionTable,),
                   "timing": (GroupTable, KernelTable, ResourceTable)}.get(tab, ())  # the first one shown gets focus
        # Drop focus first: else it moves on to a neighbour in the pane being hidden, and
        # TabbedContent shows the pane of a focused widget again (the key would be lost).
        self.set_focus(None)
        self.query_one(TabbedContent).active = tab

        def focus(tries: int = 8) -> None:  # once the pane is shown: hidden widgets refuse focus
            if self.query_one(TabbedContent).active != tab:
                return  # another tab was chosen meanwhile
            shown = [w for cls in targets for w in self.query(cls) if w.display and w.focusable]
            if shown:
                shown[0].focus()
            elif targets and tries:  # the switcher shows the pane a refresh later: keys must reach it
                self.call_after_refresh(focus, tries - 1)
                return
            if then is not None:
                then()

        self.call_after_refresh(focus)

    async def action_quit_asking(self) -> None:
        """`q` quits, except the first time while the plan has unsaved choices (lazygit asks
        too): it says so and a second `q` quits (ctrl+q always quits)."""
        unsaved = isinstance(self.plan, PlanState) and self.plan.dirty or bool(self._unsaved_plans)
        if unsaved and not self._quit_warned:
            self._quit_warned = True
            self.notify("the fusion plan has unsaved choices: ctrl+s saves it, q again quits without saving",
                        severity="warning", title="quit?", timeout=8)
            return
        await self.action_quit()

    def action_search(self) -> None:
        """`/` from any view: the graph's search box."""
        self.action_tab("graph", then=self.query_one(GraphView).action_search)

    def action_compile(self, kind: str) -> None:
        if self.session is None:
            self.notify("the model is still opening", severity="warning")
            return
        if self.query_one(CompilePanel).running:
            self.notify("a compile is already running (x: cancel)", severity="warning")
            return
        fusion_plan, policy = None, FusionPolicy.APPROVED
        if kind in ("after", "winners"):
            if not isinstance(self.plan, PlanState):
                reason = self.plan.reason if isinstance(self.plan, Unavailable) else "not analysed yet"
                self.notify(f"no fusion plan: {reason}", severity="warning")
                return
            if kind == "after" and not self.plan.approved:
                self.notify("no approved decisions: approve some in 3 Fusion (a / A), or W to keep "
                            "the measured winners", severity="warning")
                return
            fusion_plan = self.analyses.compile_plan(self.plan)
            if kind == "winners":  # every proposed decision tried; the plan then approves the winners
                kind, policy = "after", FusionPolicy.MEASURED_WINNERS
        self._cancel.clear()
        self.query_one(CompilePanel).running = True
        self.action_tab("compile")
        self.compile_model(kind, fusion_plan, policy)

    def action_switch_target(self, name: str | None = None) -> None:
        """Analyse and compile for `name` (default: the next target of the engine's table):
        the views of the old target are emptied and the analyses run again. A plan with unsaved
        choices is kept in memory for its target (each target has its own plan file)."""
        name = name or self.analyses.next_target()
        if name == self.analyses.target:
            self.notify(f"already on {name}")
            return
        if self.query_one(CompilePanel).running:
            self.notify("a compile is running (x: cancel it first)", severity="warning")
            return
        old = self.analyses.target
        if isinstance(self.plan, PlanState) and self.plan.dirty:
            self._unsaved_plans[old] = self.plan
            self.notify(f"the {old} plan has unsaved choices: kept for when you switch back (ctrl+s there "
                        f"saves it to {self.plan.path})", title="fusion plan", timeout=8)
        self.analyses.switch_target(name)
        self._generation += 1
        self.plan, self.block_report, self.kernels = None, None, ()
        self.results = {"before": None, "after": None}
        self._show_target()
        waiting = f"analysing for {self.analyses.describe_target()}…"
        self.query_one(BlocksView).reset(f"block dependencies: {waiting}")
        self.query_one(FusionPane).reset(f"fusion plan: {waiting}")
        self.query_one(TimingView).reset()
        self.query_one(CompilePanel).reset()
        if self.graph is not None:
            self.query_one(GraphView).set_timing({}, {})
            self._update_clusters()
        if self.session is not None:
            self.sub_title = f"{self.graph.model}: {self.graph.summary().ops} ops"
            self.analyse(self.session, self._generation, self._unsaved_plans.pop(name, None))
        self.notify(f"target {self.analyses.describe_target()}: a block is one {self.analyses.block_axis}",
                    title="target switched")

    def action_cancel_compile(self) -> None:
        if self.query_one(CompilePanel).running:
            self._cancel.set()
            self.notify("cancelling after the current stage…")
        else:
            self.notify("no compile is running (c / C start one)")

    def deliver_screenshot(self, filename: str | None = None, path: str | None = None,
                           time_format: str | None = None) -> str | None:
        """The palette's Screenshot: into the export folder (Textual's default, ~/Downloads, may
        not exist, which made it fail), named after the model, not the title's brackets."""
        folder = Path(path) if path else self._export_dir()
        folder.mkdir(parents=True, exist_ok=True)
        if filename is None:
            from datetime import datetime

            model = self.graph.model if self.graph is not None else "blockwise"
            filename = f"screenshot-{model}-{datetime.now():%Y%m%d-%H%M%S}.svg"
        return super().deliver_screenshot(filename, str(folder), time_format)

    def _export_dir(self) -> Path:
        """--out, else out/MODEL-tui: where `e` and the palette's Screenshot write."""
        return self.out_dir or Path("out") / f"{self.graph.model if self.graph is not None else 'blockwise'}-tui"

    def action_export(self) -> None:
        if self.graph is None:
            self.notify("the model is still opening", severity="warning")
            return
        out_dir = self.out_dir or Path("out") / f"{self.graph.model}-tui"
        edge = self.query_one(BlocksView).edge
        op_ms = self.query_one(GraphView)._op_ms
        which = f" (block graph: the Blocks tab's edge {edge.title})" if edge else ""
        self.notify(f"exporting to {out_dir}…{which}")
        self.export_worker(out_dir, self._clusters(), op_ms, edge.key if edge else None)

    def action_save_plan(self) -> None:
        if not isinstance(self.plan, PlanState):
            self.notify("no fusion plan to save", severity="warning")
            return
        plan = self.plan
        if not plan.owns_file and Path(plan.path).exists():  # a file this plan did not come from
            from workbench.tui.confirm import ConfirmScreen

            self.push_screen(ConfirmScreen(f"{plan.path} holds a plan this one did not come from "
                                           f"({plan.note}). Overwrite it?"),
                             lambda yes: self._write_plan(plan) if yes else self.notify("plan not saved")
                             )
            return
        self._write_plan(plan)

    def _write_plan(self, plan: PlanState) -> None:
        try:
            path = self.analyses.save_plan(plan)
        except OSError as err:
            self.notify(_one_line(err), title="could not save the plan", severity="error")
            return
        plan.dirty, plan.owns_file = False, True
        self.query_one(FusionPane).refresh_state()
        self.notify(f"plan saved to {path}")

    def action_reload_plan(self) -> None:
        if self.session is None:
            self.notify("the model is still opening: no plan to reload yet", severity="warning")
        else:
            self.post_message(events.PlanReady(self.analyses.load_or_propose(self.session),
                                               generation=self._generation))

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.current_theme.dark else "textual-dark"

    def action_help(self) -> None:
        scopes = [("everywhere", WorkbenchApp), ("graph", GraphView), ("graph", GraphCanvas),
                  ("fusion", FusionTable), ("timing", KernelTable), ("blocks", EdgeTable),
                  ("blocks", BlockGridWidget)]
        rows = key_rows(scopes) + [("blocks", "enter", "on an edge: pick its consumer's blocks"),
                                   ("everywhere", "ctrl+p", "command palette (Switch target to …, Screenshot)"),
                                   ("everywhere", "q / ctrl+q", "quit"),
                                   ("everywhere", "tab / shift+tab", "move focus between widgets")]
        from workbench.present.glossary import glossary

        self.push_screen(HelpScreen(rows, glossary(self.analyses.target, self.analyses.block_axis)))

    def get_system_commands(self, screen):
        yield from super().get_system_commands(screen)
        for title, help_text, callback in (
                ("Compile", "build, verify and time the model before the plan (c)", lambda: self.action_compile("before")),
                ("Compile with plan", "apply the approved fusion decisions, then build and time (C)",
                 lambda: self.action_compile("after")),
                ("Cancel compile", "stop after the current stage (x)", self.action_cancel_compile),
                ("Export SVGs", "op graph, block graph, timing plot (e)", self.action_export),
                ("Save fusion plan", "write the plan JSON (ctrl+s)", self.action_save_plan),
                ("Reload fusion plan", "read the plan JSON again (ctrl+o)", self.action_reload_plan),
                ("Toggle light/dark", "switch the theme (d)", self.action_toggle_theme),
                ("Show keys", "every key binding (?)", self.action_help)):
            yield SystemCommand(title, help_text, callback)
        for name in target_names():
            if name != self.analyses.target:
                yield SystemCommand(f"Switch target to {name}", f"analyse and compile for {name}: a block is one "
                                    f"{target_info(name).block_axis} (T)",
                                    lambda n=name: self.action_switch_target(n))
        for tab in TABS:
            yield SystemCommand(f"Go to {tab}", f"switch to the {tab} view", lambda t=tab: self.action_tab(t))

    # --- derived views -----------------------------------------------------------------

    def _show_target(self) -> None:
        self.title = f"blockwise [{self.analyses.describe_target()}]"

    def _clusters(self) -> tuple[ClusterSpec, ...]:
        """Kernels as built first, then approved, proposed and rejected decisions: where two
        overlap without nesting, the earlier one is drawn."""
        groups = ()
        if isinstance(self.plan, PlanState):
            rank = {DecisionStatus.APPROVED: 0, DecisionStatus.PROPOSED: 1, DecisionStatus.REJECTED: 2}
            rows = sorted((r for r in self.plan.rows if len(r.members) > 1), key=lambda r: rank.get(r.status, 3))
            groups = tuple(ClusterSpec(f"{r.id} {r.kind}", tuple(r.members), "group") for r in rows)
        kernels = tuple(ClusterSpec(g.name, g.ops, "kernel") for g in kernel_groups(self.kernels))
        return kernels + groups

    def _update_clusters(self) -> None:
        if self.graph is not None:
            self.query_one(GraphCanvas).set_clusters(self._clusters())
            self.query_one(GraphView).set_kernels(self.kernels)

    def _update_measured(self, kind: str, result) -> None:
        if kind != "after" or not isinstance(self.plan, PlanState):
            return
        note = self.analyses.plan_outcome(self.plan, result)
        if note:  # the engine measured each decision in the apply step
            self.query_one(FusionPane).update_rows(self.plan.rows, note)
            if result.fusion.policy == FusionPolicy.MEASURED_WINNERS.value:
                how = ("measured winners" if any(v is not None for v in self.plan.measured.values())
                       else "winners by estimate (no device to measure on)")
                self.notify(f"approved the {how}: {', '.join(r.id for r in self.plan.approved) or 'none'} "
                            "(ctrl+s saves the plan)", title="fusion")
            return
        before, after = self.results["before"], self.results["after"]
        if before is None or after is None:
            return
        gains = measured_gains(self.plan.rows, before.kernels, before.kernel_times, after.kernels,
                               after.kernel_times)
        rows = [replace(r, measured_gain_ms=gains[r.id]) if r.id in gains else r for r in self.plan.rows]
        self.query_one(FusionPane).update_rows(rows)


def _guarded(make):
    """make(), or Unavailable saying how the analysis failed."""
    try:
        return make()
    except Exception as err:
        return Unavailable(f"analysis failed: {_one_line(err)}")


def _one_line(err: BaseException) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0]}" if text else type(err).__name__
