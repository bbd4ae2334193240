"""The TUI's one door to the engine's analyses: block dependencies and the fusion plan,
asked of the Session and turned into workbench.tui.facts shapes by workbench.present.

Everything here runs in worker threads. An analysis the engine refuses with a
BlockwiseError (an unsupported kernel, a plan that does not fit) comes back as
`Unavailable(reason)`, which the views show; any other error is a bug and propagates.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from engine.blockdeps.facts import EdgeBlockMap, KernelGrid, KernelRef
from engine.errors import BlockwiseError, PlanError
from engine.events import CompileOptions, FusionPolicy
from engine.files import write_atomic
from engine.parallel.outcome import DecisionResult
from engine.parallel.plan import DecisionStatus, FusionDecision, FusionPlan
from workbench.present.blockdeps import edge_figures, model_figures
from workbench.present.fusion import decision_result, outcome_summary, saved_ms
from workbench.present.plan import decision_cells
from workbench.tui.facts import BlockDepsReport, BlockGrid, DecisionRow, EdgeDeps, PlanState, Unavailable

if TYPE_CHECKING:
    from engine.pipeline import CompileResult
    from engine.session import Session


class EngineAnalyses:
    """Block dependencies and the fusion plan of one TUI session's model."""

    target = CompileOptions().target  # the TUI analyses and compiles for this machine's CPU

    def __init__(self, plan_path: str | None = None) -> None:
        self.plan_file = plan_path

    # --- block dependencies ------------------------------------------------------------

    def block_deps(self, session: Session, progress: Callable[[int, int], None] | None = None
                   ) -> BlockDepsReport | Unavailable:
        try:
            deps = session.block_deps(self.target, progress=progress)
        except BlockwiseError as err:
            return Unavailable(str(err))
        return BlockDepsReport(tuple(_edge_deps(e) for e in deps.edges), model_figures(deps),
                               "; ".join(deps.notes), handle=deps)

    def block_graph_dot(self, session: Session, report: BlockDepsReport, edge_key: str | None) -> str:
        edge = next((e.handle for e in report.edges if e.key == edge_key), None)
        return session.block_graph_dot(report.handle, edge=edge)

    # --- fusion plan ---------------------------------------------------------------------

    def plan_path(self, session: Session) -> str:
        """The plan JSON: --plan, else out/MODEL-TARGET/plan.json (next to the compile report)."""
        return self.plan_file or str(Path("out") / f"{session.model.name}-{self.target}" / "plan.json")

    def load_or_propose(self, session: Session, path: str | None = None) -> PlanState | Unavailable:
        """The saved plan when it fits the model's kernels, else a fresh proposal."""
        path = path or self.plan_path(session)
        note = ""
        if Path(path).is_file():
            try:
                return _plan_state(session.load_plan(path, self.target), path, f"loaded {path}")
            except PlanError as err:
                note = f"{err}; proposed a new plan instead"
        try:
            proposal = session.propose(self.target)
        except BlockwiseError as err:
            return Unavailable(str(err))
        return _plan_state(proposal.plan, path, note or "proposed (not saved yet)")

    def set_status(self, plan: PlanState, ids, status: DecisionStatus) -> list[str]:
        """Record choices; returns why some could not be approved (the engine rejected them)."""
        before: FusionPlan = plan.handle
        refused = []
        decisions = []
        for d in before.decisions:
            if d.id in ids:
                if status is DecisionStatus.APPROVED and d.reason and d.status is DecisionStatus.REJECTED:
                    refused.append(f"{d.id}: {d.reason}")
                else:
                    d = replace(d, status=status)
            decisions.append(d)
        plan.handle = replace(before, decisions=tuple(decisions))
        plan.rows = [_row(d, plan.measured.get(d.id), plan.results.get(d.id, "")) for d in decisions]
        plan.dirty = plan.dirty or any(a.status is not b.status for a, b in zip(before.decisions, decisions))
        return refused

    def save_plan(self, plan: PlanState) -> Path:
        return write_atomic(Path(plan.path), plan.handle.dumps())

    def compile_plan(self, plan: PlanState) -> FusionPlan:
        """The engine's plan for CompileOptions.plan: its approved decisions are applied."""
        return plan.handle

    def plan_outcome(self, plan: PlanState, result: CompileResult) -> str:
        """After a compile with the plan: measured gains and results into the rows; the
        outcome in one line ("" when the compile applied no plan)."""
        outcome = result.fusion
        if outcome is None:
            return ""
        if outcome.policy == FusionPolicy.MEASURED_WINNERS.value:  # the plan now approves the winners
            applied = {d.id for d in outcome.decisions if d.result is DecisionResult.APPLIED}
            tried = [d.id for d in plan.handle.decisions if d.status is not DecisionStatus.REJECTED]
            self.set_status(plan, [i for i in tried if i not in applied], DecisionStatus.PROPOSED)
            self.set_status(plan, sorted(applied), DecisionStatus.APPROVED)
        plan.measured = {d.id: saved_ms(d) for d in outcome.decisions}
        plan.results = {d.id: decision_result(d) for d in outcome.decisions}
        plan.rows = [_row(d, plan.measured.get(d.id), plan.results.get(d.id, "")) for d in plan.handle.decisions]
        return outcome_summary(outcome)


def _plan_state(engine_plan: FusionPlan, path: str, note: str) -> PlanState:
    return PlanState([_row(d) for d in engine_plan.decisions], path, handle=engine_plan, note=note)


def _row(d: FusionDecision, measured_ms: float | None = None, result: str = "") -> DecisionRow:
    cells = decision_cells(d, result)
    return DecisionRow(str(d.id), d.kind.value, cells.ops, cells.evidence, cells.estimate, d.status,
                       cells.reason, measured_ms, cells.title)


def _grid(ref: KernelRef, grid: KernelGrid) -> BlockGrid:
    return BlockGrid(ref.describe(), grid.shape, ref.ops)


def _edge_deps(e: EdgeBlockMap) -> EdgeDeps:
    return EdgeDeps(key=f"{e.producer.index}->{e.consumer.index}", producer=_grid(e.producer, e.producer_grid),
                    consumer=_grid(e.consumer, e.consumer_grid), edge_class=e.edge_class.value,
                    needs=e.producers_of, figures=edge_figures(e), handle=e)
