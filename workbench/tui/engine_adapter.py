"""The one module that touches the engine's block-dependency and parallel-fusion APIs
(engine.blockdeps, engine.parallel) and turns their results into workbench.tui.facts shapes.

Everything here runs in worker threads. When a package or entry point is missing the
methods return `Unavailable(reason)`; the views then say so instead of showing anything.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

from workbench.tui.facts import (BlockDepsReport, BlockGrid, DecisionRow, EdgeDeps, PlanState,
                                 Status, Unavailable)


def _entry(module: str, name: str):
    """`module.name`, or an Unavailable saying what is missing."""
    try:
        mod = importlib.import_module(module)
    except ImportError as err:
        return Unavailable(f"{module} is not importable ({err})")
    fn = getattr(mod, name, None)
    if fn is None:
        return Unavailable(f"{module} has no {name}() yet")
    return fn


def _call(fn, *args, **maybe):
    """Call `fn` with the keyword arguments it accepts among `maybe`."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return fn(*args)
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    return fn(*args, **{k: v for k, v in maybe.items() if takes_any or k in params})


class EngineAnalyses:
    """Adapter over engine.blockdeps and engine.parallel for one TUI session."""

    target = "llvm"

    # --- block dependencies ------------------------------------------------------------

    def block_deps(self, session, progress=None) -> BlockDepsReport | Unavailable:
        analyze = _entry("engine.blockdeps", "analyze_model")
        if isinstance(analyze, Unavailable):
            return analyze
        scheduled = session.scheduled(self.target)
        labels = {n.id: n.label for n in session.graph.nodes}
        deps = _call(analyze, scheduled, labels=labels, progress=progress)
        edges = tuple(_edge_deps(e) for e in deps.edges)
        return BlockDepsReport(edges, _report_figures(deps), "; ".join(getattr(deps, "notes", ())),
                               handle=deps)

    def block_graph_dot(self, session, report: BlockDepsReport, edge_key: str | None) -> str | Unavailable:
        dot_fn = _entry("engine.blockdeps", "block_graph_dot")
        if isinstance(dot_fn, Unavailable):
            return dot_fn
        deps = report.handle
        edge = next((e.handle for e in report.edges if e.key == edge_key), None)
        return _call(dot_fn, deps, edge=edge)

    # --- fusion plan ---------------------------------------------------------------------

    def __init__(self, plan_path: str | None = None) -> None:
        self.plan_file = plan_path
        self._appliers: list = []

    def plan_path(self, session) -> str:
        """The plan JSON: --plan, else out/MODEL-TARGET/plan.json (next to the compile report)."""
        return self.plan_file or str(Path("out") / f"{session.model.name}-{self.target}" / "plan.json")

    def load_or_propose(self, session, path: str | None = None) -> PlanState | Unavailable:
        """The saved plan when it fits the model's kernels, else a fresh proposal."""
        parallel = _module("engine.parallel")
        if isinstance(parallel, Unavailable):
            return parallel
        from engine.errors import PlanError

        path = path or self.plan_path(session)
        note = ""
        if Path(path).is_file():
            try:
                scheduled = session.scheduled(self.target)
                plan = parallel.validate_plan(parallel.load_plan(path), session.model.name, self.target,
                                              scheduled.kernels, source=path)
                return _plan_state(plan, path, f"loaded {path}")
            except PlanError as err:
                note = f"{err}; proposed a new plan instead"
        proposal = parallel.propose(session, self.target)
        return _plan_state(proposal.plan, path, note or "proposed (not saved yet)")

    def set_status(self, plan: PlanState, ids, status: Status) -> list[str]:
        """Record choices; returns why some could not be approved (the engine rejected them)."""
        from dataclasses import replace

        engine_plan = plan.handle
        refused = []
        by_id = {d.id: d for d in engine_plan.decisions}
        decisions = []
        for d in engine_plan.decisions:
            if d.id in ids:
                if status is Status.APPROVED and d.reason and d.status.value == "rejected":
                    refused.append(f"{d.id}: {d.reason}")
                else:
                    d = replace(d, status=type(d.status)(status.value))
            decisions.append(d)
        plan.handle = replace(engine_plan, decisions=tuple(decisions))
        plan.rows = [_row(d, _measured(plan, d.id)) for d in plan.handle.decisions]
        plan.dirty = plan.dirty or any(by_id[d.id].status != d.status for d in plan.handle.decisions)
        return refused

    def save_plan(self, plan: PlanState) -> Path | Unavailable:
        from engine.files import write_atomic

        return write_atomic(Path(plan.path), plan.handle.dumps())

    def apply_fn(self, session, plan: PlanState):
        """A CompileOptions.apply_plan executing the approved decisions (kept for its outcome)."""
        from engine.parallel.apply import PlanApplier

        applier = PlanApplier(plan.handle)
        self._appliers.append(applier)
        return applier

    def plan_outcome(self, plan: PlanState, apply_plan) -> str:
        """After a compile with `apply_plan`: put measured gains and results into the rows."""
        outcome = getattr(apply_plan, "outcome", None)
        if outcome is None:
            return ""
        plan.measured = {d.id: (d.members_sum_ms - d.fused_ms) if d.members_sum_ms is not None
                         and d.fused_ms is not None else None for d in outcome.decisions}
        plan.results = {d.id: f"{d.result.value}" + (f": {d.reason}" if d.reason else "")
                        for d in outcome.decisions}
        plan.rows = [_row(d, _measured(plan, d.id), plan.results.get(d.id, "")) for d in plan.handle.decisions]
        return (f"launches {outcome.launches_before} -> {outcome.launches_after}, {outcome.verified}"
                + (f", end to end {outcome.unfused_ms:.3f} -> {outcome.fused_ms:.3f} ms (same run)"
                   if outcome.unfused_ms and outcome.fused_ms else ""))


def _module(name: str):
    try:
        return importlib.import_module(name)
    except ImportError as err:
        return Unavailable(f"{name} is not importable ({err})")


def _measured(plan: PlanState, decision_id: str):
    return getattr(plan, "measured", {}).get(decision_id)


def _plan_state(engine_plan, path: str, note: str) -> PlanState:
    state = PlanState([_row(d) for d in engine_plan.decisions], path, handle=engine_plan)
    state.note = note
    return state


def _row(d, measured_ms: float | None = None, result: str = "") -> DecisionRow:
    ops = tuple(op for m in d.members for op in m.ops)
    ev = d.evidence
    if ev.link is not None:  # block-level vertical: the block map is the evidence
        facts = [ev.fork, ev.link.describe()]
    else:
        facts = [f"fork {ev.fork}", f"{len(ev.branches)} branches"]
        if ev.heterogeneous:
            facts.append("different ops")
        facts.append("no path" if ev.no_path else "PATH between members")
        if ev.reorder_needed:
            facts.append("reorder needed")
        facts.extend(f"dropped {x}" for x in ev.dropped)
    members = ", ".join(f"{m.signature}×{m.chunks}" if m.chunks else m.signature for m in d.members)
    g = d.gain
    est = f"{g.estimated_us:.1f} µs, -{g.launches_saved} launch{'es' if g.launches_saved != 1 else ''}"
    util = f"; cores busy {g.utilisation_before:.0%} -> {g.utilisation_after:.0%}"
    reason = "; ".join(x for x in (d.reason, result) if x)
    return DecisionRow(str(d.id), d.kind.value, ops, f"{members}; " + ", ".join(facts) + util, est,
                       Status(d.status.value), reason, measured_ms, d.title())


def _with_status(row: DecisionRow, status: Status) -> DecisionRow:
    from dataclasses import replace

    return replace(row, status=status)


def _value(x) -> str:
    return str(getattr(x, "value", x))


def _grid(ref, grid) -> BlockGrid:
    name = ref.labels[0] if getattr(ref, "labels", ()) else ref.func
    return BlockGrid(f"#{ref.index} {name}", tuple(int(d) for d in grid.shape), tuple(ref.ops))


def _edge_deps(e) -> EdgeDeps:
    p, c = e.producer_grid.blocks, e.consumer_grid.blocks
    figures = [
        ("method", _value(e.method) + (" (boxes exact)" if getattr(e, "boxes_exact", False) else "")),
        ("grids", f"producer {e.producer_grid.describe()}, consumer {e.consumer_grid.describe()}"),
        ("fan-in (producer blocks per consumer block)", f"mean {e.fan_in_mean:.2f}, max {e.fan_in_max}"),
        ("fan-out max (consumer blocks per producer block)", str(e.fan_out_max)),
        ("block pairs needed / ordered by the kernel barrier", f"{e.block_pairs} / {p * c}"),
        ("consumer blocks that could start early", f"{e.early_blocks} ({e.early_fraction:.0%})"),
        ("element dependencies", str(e.element_deps)),
    ]
    if getattr(e, "via_view", False):
        figures.append(("reads", "a reshape view of the producer's output"))
    figures.extend(("note", n) for n in getattr(e, "notes", ()))
    return EdgeDeps(key=f"{e.producer.index}->{e.consumer.index}", producer=_grid(e.producer, e.producer_grid),
                    consumer=_grid(e.consumer, e.consumer_grid), edge_class=_value(e.edge_class),
                    needs=e.producers_of, figures=tuple(figures), handle=e)


def _report_figures(deps) -> tuple[tuple[str, str], ...]:
    s = getattr(deps, "simplification", None)
    out = [("edges", str(len(deps.edges)))]
    counts = deps.class_counts() if hasattr(deps, "class_counts") else {}
    if counts:
        out.append(("classes", ", ".join(f"{_value(k)} {v}" for k, v in counts.items() if v)))
    if s is not None:
        out += [("block pairs needed / implied", f"{s.needed_block_pairs} / {s.implied_block_pairs}"),
                ("barriers relaxed", f"{s.barriers_relaxed} of {s.kernel_edges}"),
                ("block-local chains", f"{s.chains} ({s.kernels_in_chains} kernels)")]
    return tuple(out)
