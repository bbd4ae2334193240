"""FusionPane: the plan's state line, the FusionTable and the selected decision's details."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from engine.parallel.plan import DecisionStatus
from workbench.present.opgraph import op_labels
from workbench.tui.facts import DecisionRow, PlanState, Unavailable, conflicts, overlaps
from workbench.tui.fusion_table import FusionTable


class FusionPane(Vertical):
    DEFAULT_CSS = """
    FusionPane { height: 1fr; }
    FusionPane #plan-state { height: auto; padding: 0 1; background: $boost; }
    FusionPane FusionTable { height: 1fr; }
    FusionPane #decision { height: auto; max-height: 12; padding: 0 1; border-top: solid $primary 40%; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.plan: PlanState | None = None
        self.graph = None
        self.labels: dict[str, str] = {}  # op id -> unique label
        self.kernel_of: dict[str, str] = {}  # op id -> "k27"

    def set_kernels(self, kernels) -> None:
        """The scheduled kernels: members are listed with the kernel computing them (kN)."""
        self.kernel_of = {op: f"k{k.index}" for k in kernels for op in k.ops}
        self.show_decision(self.table.current if self.plan is not None else None)

    def compose(self) -> ComposeResult:
        yield Static("fusion plan: analysing… (runs after the model opens)", id="plan-state")
        yield FusionTable()
        yield Static("", id="decision")

    @property
    def table(self) -> FusionTable:
        return self.query_one(FusionTable)

    def reset(self, what: str) -> None:
        """Forget the plan (the target changed): an empty table, `what` as the state line."""
        self.plan = None
        self.kernel_of = {}
        self.table.set_rows([])
        self.show_decision(None)
        self.query_one("#plan-state", Static).update(what)

    def set_plan(self, plan: PlanState | Unavailable, graph) -> None:
        self.graph = graph
        state = self.query_one("#plan-state", Static)
        if isinstance(plan, Unavailable):
            self.plan = None
            state.update(Text.assemble(("Fusion plan not available: ", "bold red"), plan.reason))
            return
        self.plan = plan
        self.labels = op_labels(graph) if graph is not None else {}
        self.table.set_rows(plan.rows, self.labels)
        self.refresh_state()

    def refresh_state(self, note: str = "") -> None:
        if self.plan is None:
            return
        counts = {s: sum(r.status is s for r in self.plan.rows) for s in DecisionStatus}
        clashing = len(conflicts(self.plan.rows))
        text = Text.assemble(
            (f"{len(self.plan.rows)} decisions", "bold"),
            f": {counts[DecisionStatus.APPROVED]} approved",
            (f" ({clashing} share kernels ⚠: only the first of each overlap is applied)" if clashing else "",
             "bold #ff8f00"),
            f", {counts[DecisionStatus.REJECTED]} rejected, {counts[DecisionStatus.PROPOSED]} undecided   "
            + (f"target {self.plan.target}   " if self.plan.target else "") + f"plan file {self.plan.path}",
            (" (unsaved: ctrl+s)" if self.plan.dirty else "", "yellow"),
            "\na/r approve/reject, A/R all, u undecide   C: compile with the approved decisions")
        for line in (self.plan.note, note):
            if line:
                text.append(f"\n{line}", style="dim")
        self.query_one("#plan-state", Static).update(text)

    def show_decision(self, row: DecisionRow | None) -> None:
        if row is None:
            self.query_one("#decision", Static).update("")
            return
        text = Text.assemble((f"{row.id} {row.kind}", "bold"), f"  [{row.status.value}]  "
                             f"estimated {row.estimated_gain}")
        if row.measured_gain_ms is not None:
            text.append(f", measured {row.measured_gain_ms:+.3f} ms")
        clash = overlaps(row, self.plan.rows) if self.plan is not None else ()
        if clash:
            order = [r.id for r in self.plan.rows]
            first = min((row.id, *clash), key=order.index) if row.status is DecisionStatus.APPROVED else clash[0]
            text.append(f"\n⚠ shares a kernel with approved {', '.join(clash)}: only {first} (first approved in "
                        f"plan order) is applied", style="bold #ff8f00")
        for m in row.members:
            n = self.graph.node(m) if self.graph is not None and m in self.graph.dag else None
            kernel = f"{self.kernel_of[m]} " if m in self.kernel_of else ""
            label = self.labels.get(m, n.label) if n else m
            text.append(f"\n  {kernel}{m}: {n.op}" + (f" {label}" if label != m else "") if n else f"\n  {kernel}{m}")
        if row.evidence:
            text.append(f"\nevidence: {row.evidence}")
        if row.reason:
            text.append(f"\nreason: {row.reason}")
        self.query_one("#decision", Static).update(text)

    def on_fusion_table_decision_highlighted(self, event: FusionTable.DecisionHighlighted) -> None:
        self.show_decision(event.row)  # the event bubbles on to the app (graph highlight)

    def update_rows(self, rows: list[DecisionRow], note: str = "") -> None:
        if self.plan is not None:
            self.plan.rows = rows
            self.table.set_rows(rows)
            self.refresh_state(note)
            self.show_decision(self.table.current)
