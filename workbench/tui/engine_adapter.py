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
from engine.parallel.plan import DecisionStatus, FusionDecision, FusionPlan, load_plan
from engine.session import target_info, target_names
from workbench.present.blockdeps import edge_figures, model_figures
from workbench.present.fusion import decision_result, outcome_summary, saved_ms
from workbench.present.opgraph import op_labels
from workbench.present.plan import decision_cells
from workbench.tui.facts import BlockDepsReport, BlockGrid, DecisionRow, EdgeDeps, PlanState, Unavailable

if TYPE_CHECKING:
    from engine.pipeline import CompileResult
    from engine.session import Session


class EngineAnalyses:
    """Block dependencies, the fusion plan and the compile options of one TUI session's
    model, for one target at a time (`switch_target` moves to another).

    `plan_path` (--plan) and `arch` (--arch) belong to the target they were given with: another
    target has its own plan file (out/MODEL-TARGET/plan.json) and its default arch, so a plan
    of one target is never saved over another's."""

    def __init__(self, plan_path: str | None = None, target: str | None = None, arch: str | None = None) -> None:
        self.target = target or CompileOptions().target  # default: this machine's CPU
        self.plan_files: dict[str, str] = {self.target: plan_path} if plan_path else {}
        self.archs: dict[str, str] = {self.target: arch} if arch else {}

    # --- the target ----------------------------------------------------------------------

    @property
    def arch(self) -> str | None:
        return self.archs.get(self.target)

    @property
    def block_axis(self) -> str:
        """What a block is on this target (cuda: blockIdx; llvm: a chunk of the parallel loop)."""
        return target_info(self.target).block_axis

    def describe_target(self) -> str:
        """`cuda` or `cuda --arch sm_80`: for the header."""
        return self.target + (f" --arch {self.arch}" if self.arch else "")

    def next_target(self) -> str:
        """The target after this one in the engine's table (llvm -> cuda -> llvm)."""
        names = target_names()
        return names[(names.index(self.target) + 1) % len(names)] if self.target in names else names[0]

    def switch_target(self, name: str) -> None:
        if name not in target_names():
            raise ValueError(f"unknown target '{name}'; known: {', '.join(target_names())}")
        self.target = name

    def compile_options(self, **kwargs) -> CompileOptions:
        """CompileOptions for this target and arch (kwargs: runs, plan, fusion_policy, ...)."""
        return CompileOptions(target=self.target, arch=self.arch, **kwargs)

    def ran_on_device(self, result: CompileResult) -> bool:
        """True when the compile verified (and timed) on the target's device, not in host emulation."""
        return result.ran_on == target_info(result.target).device_kind

    # --- block dependencies ------------------------------------------------------------

    def block_deps(self, session: Session, progress: Callable[[int, int], None] | None = None
                   ) -> BlockDepsReport | Unavailable:
        try:
            deps = session.block_deps(self.target, self.arch, progress=progress)
        except BlockwiseError as err:
            return Unavailable(str(err))
        return BlockDepsReport(tuple(_edge_deps(e) for e in deps.edges), model_figures(deps),
                               "; ".join(deps.notes), handle=deps, target=self.target,
                               block_axis=self.block_axis)

    def block_graph_dot(self, session: Session, report: BlockDepsReport, edge_key: str | None) -> str:
        edge = next((e.handle for e in report.edges if e.key == edge_key), None)
        return session.block_graph_dot(report.handle, edge=edge)

    # --- fusion plan ---------------------------------------------------------------------

    def plan_path(self, session: Session) -> str:
        """The plan JSON of this target: --plan (given with this target), else
        out/MODEL-TARGET/plan.json (next to the compile report)."""
        return self.plan_files.get(self.target) or self.default_plan_path(session)

    def default_plan_path(self, session: Session) -> str:
        return str(Path("out") / f"{session.model.name}-{self.target}" / "plan.json")

    def load_or_propose(self, session: Session, path: str | None = None) -> PlanState | Unavailable:
        """The saved plan when it fits the model's kernels, else a fresh proposal. A file holding
        another target's plan is left alone: this target's default file is used instead (loaded
        when it fits), so ctrl+s never writes this target's plan over it. A proposal replacing a
        file that did not fit is saved over it only after a question (PlanState.owns_file)."""
        path = path or self.plan_path(session)
        note = ""
        if Path(path).is_file():
            try:
                return _plan_state(session.load_plan(path, self.target, self.arch), path, f"loaded {path}",
                                   self.target, op_labels(session.graph))
            except PlanError as err:
                note = f"{err}; proposed a new plan instead"
                default = self.default_plan_path(session)
                if _plan_target(path) not in (None, self.target) and Path(path) != Path(default):
                    state = self.load_or_propose(session, default)
                    if isinstance(state, PlanState):
                        state.note = (f"{path} is for target '{_plan_target(path)}', not '{self.target}': left "
                                      f"alone; {'loaded' if state.note.startswith('loaded') else 'proposed'} "
                                      f"the {self.target} plan of {default} instead")
                    return state
        try:
            proposal = session.propose(self.target, self.arch)
        except BlockwiseError as err:
            return Unavailable(str(err))
        state = _plan_state(proposal.plan, path, note or "proposed (not saved yet)", self.target,
                            op_labels(session.graph))
        state.owns_file = not Path(path).exists()
        return state

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
        plan.rows = [_row(d, plan.measured.get(d.id), plan.results.get(d.id, ""), plan.labels) for d in decisions]
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
        plan.rows = [_row(d, plan.measured.get(d.id), plan.results.get(d.id, ""), plan.labels)
                     for d in plan.handle.decisions]
        return outcome_summary(outcome)


def _plan_target(path: str) -> str | None:
    """The target a plan file names (None: not a plan file)."""
    try:
        return load_plan(path).target
    except (PlanError, OSError):
        return None


def _plan_state(engine_plan: FusionPlan, path: str, note: str, target: str, labels: dict) -> PlanState:
    return PlanState([_row(d, labels=labels) for d in engine_plan.decisions], path, handle=engine_plan, note=note,
                     target=target, labels=labels)


def _row(d: FusionDecision, measured_ms: float | None = None, result: str = "", labels=None) -> DecisionRow:
    cells = decision_cells(d, result, labels)
    return DecisionRow(str(d.id), d.kind.value, cells.ops, cells.evidence, cells.estimate, d.status,
                       cells.reason, measured_ms, cells.title)


def _grid(ref: KernelRef, grid: KernelGrid) -> BlockGrid:
    """Named `k27 label`: kernels are kN in every tab (the plan numbers its members so too)."""
    name = f"k{ref.index} {ref.labels[0] if ref.labels else ref.func}"
    return BlockGrid(name, grid.shape, ref.ops, tuple(d.name for d in grid.dims) or (grid.axis.value,))


def _edge_deps(e: EdgeBlockMap) -> EdgeDeps:
    return EdgeDeps(key=f"{e.producer.index}->{e.consumer.index}", producer=_grid(e.producer, e.producer_grid),
                    consumer=_grid(e.consumer, e.consumer_grid), edge_class=e.edge_class.value,
                    needs=e.producers_of, figures=edge_figures(e), handle=e)
