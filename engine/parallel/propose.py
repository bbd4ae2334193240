"""Propose a fusion plan: detected parallel groups -> one decision per stage, then the
concats whose producers can write into its slices (engine.parallel.slices), the
block-level vertical pairs (engine.parallel.vertical) and the row-band ones
(engine.parallel.rows).

Nothing here changes IR. A decision is proposed when its stage is legal and the target's
code generator accepts at least two members; members it cannot fuse (and kernels with
several outputs, such as a Split: the fused call site takes one output per member) are
dropped with their reason (evidence.dropped); with fewer than two left the decision is
listed as rejected, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tvm import relax

from engine.parallel.detection import ParallelGroup, Stage, detect_parallel_groups
from engine.parallel.gain import estimate_gain
from engine.parallel.kernel_graph import KernelGraph, is_call_tir, kernel_graph, main_bindings
from engine.parallel.plan import (DecisionId, DecisionKind, DecisionStatus, Evidence, FusionDecision,
                                  FusionPlan, MemberRef, application_order, kernel_fingerprint)
from engine.parallel.tir_util import FusionUnsupported
from engine.parallel.rows import propose_rows
from engine.parallel.slices import propose_slices
from engine.parallel.vertical import propose_vertical
from engine.targets import get_target


@dataclass(frozen=True, eq=False)
class Proposal:
    """What `propose` found: the facts (groups, kernel graph) and the choices (plan)."""

    groups: tuple[ParallelGroup, ...]
    plan: FusionPlan
    graph: KernelGraph


def _outputs(mod) -> list[int]:
    """Number of outputs of each kernel call of `main` (a Split's call returns a tuple)."""
    return [len(b.var.ty.fields) if isinstance(b.var.ty, relax.TupleType) else 1
            for b in main_bindings(mod) if is_call_tir(b.value)]


def _fit(codegen, mod, func: str, outputs: int = 1) -> tuple[int, int, str]:
    """(chunks, stages, reason) of one member kernel for the target's code generator."""
    if outputs != 1:
        return 0, 1, f"{func} writes {outputs} outputs (a tuple); a fused call takes one per member"
    try:
        member = codegen.member(mod[func], func)
        return member.chunks, len(member.stages), ""
    except FusionUnsupported as err:
        return 0, 1, str(err)


def propose(session, target: str = "llvm", arch: str | None = None) -> Proposal:
    """`session`: an engine.session.Session (its operator graph and scheduled kernels)."""
    scheduled = session.scheduled(target, arch)
    mod, kernels = scheduled.module, scheduled.kernels
    spec = get_target(target)
    codegen = spec.fusion
    outputs = _outputs(mod)
    fits = {}
    vertical_fits: dict[str, bool] = {}

    def vertical_ok(k: int) -> bool:
        """Kernel k can be a block-level vertical member (the code generator's own check)."""
        name = kernels[k].func
        if name not in vertical_fits:
            vertical_fits[name] = outputs[k] == 1 and not codegen.vertical_member(mod[name], name)
        return vertical_fits[name]

    def fit(k: int):
        name = kernels[k].func
        if name not in fits:
            fits[name] = _fit(codegen, mod, name, outputs[k])
        return fits[name]

    tvm_target = spec.target(arch)

    def launch(ks, link=None):
        """The fused kernel's LaunchShape (None: the target reports none); FusionUnsupported
        when the code generator would refuse the members."""
        if codegen.launch_shape is None:
            return None
        names = [kernels[k].func for k in ks]
        return codegen.launch_shape([mod[n] for n in names], names, link, tvm_target)

    kg = kernel_graph(mod, kernels)
    groups = detect_parallel_groups(session.graph, kg, lambda k: fit(k)[0])
    model = spec.cost_model(tvm_target)
    decisions = []
    for group in groups:
        for stage in group.stages:
            decisions.append(_decision(f"d{len(decisions)}", group, stage, fit, model, launch))
    slices = [] if codegen.fuse_slices is None else propose_slices(
        scheduled, session.graph, kg, len(decisions), model, lambda k: fit(k)[0],
        lambda funcs, names, concat, link: codegen.fuse_slices(funcs, names, concat, link, tvm_target),
        launch)
    # A pair both ways fusable is a row-band decision: its intermediate lives in per-task
    # scratch, where the one-to-one fusion still writes it (mobilenet_block's expand ->
    # depthwise pairs measured the same either way on a 2-core AVX-512 EPYC: 0.95-0.97x)
    rows = propose_rows(scheduled, session.graph, kg, codegen, len(decisions), model, tvm_target)
    block = propose_vertical(scheduled, session.graph, kg, codegen,
                             lambda k: fit(k)[0] > 0 and vertical_ok(k), len(decisions), model,
                             tvm_target, launch,
                             {d.kernels for d in rows if d.status is not DecisionStatus.REJECTED})
    # Of overlapping decisions the first approved one applies: row bands first, the most
    # estimated gain first (on a 2-core AVX-512 Xeon mobilenet_block's depthwise -> pointwise
    # pairs, then run by row tiles, ran 0.80x as row bands, its one-to-one pairs within noise)
    # (pairs that would not pay are listed last, rejected with the reason). Slices come first:
    # a concat written in place loses its copy, which a row band through it only shortens.
    rows.sort(key=lambda d: -d.gain.estimated_us)
    open_ = [d for d in [*slices, *rows] if d.status is not DecisionStatus.REJECTED]
    listed = open_ + block + [d for d in [*slices, *rows] if d.status is DecisionStatus.REJECTED]
    decisions += [replace(d, id=DecisionId(f"d{len(decisions) + i}")) for i, d in enumerate(listed)]
    decisions = _note_overlaps(decisions)
    plan = FusionPlan(session.model.name, target, kernel_fingerprint(kernels), tuple(decisions))
    return Proposal(groups, plan, kg)


def _note_overlaps(decisions: list[FusionDecision]) -> list[FusionDecision]:
    """A proposed decision sharing a kernel with one applied before it says so: a kernel is
    fused by one decision only, the first approved one in application order (plan.application_order)."""
    owner: dict[int, str] = {}
    noted: dict[str, FusionDecision] = {}
    for d in application_order(decisions):
        shared = sorted({owner[k] for k in d.kernels if k in owner}, key=lambda i: int(i[1:]))
        if shared and d.status is DecisionStatus.PROPOSED and not d.reason:
            d = replace(d, reason=f"shares a kernel with {', '.join(shared)}; only the first approved "
                                  f"of overlapping decisions is applied (slice decisions first, then plan order)")
        if d.status is not DecisionStatus.REJECTED:
            for k in d.kernels:
                owner.setdefault(k, d.id)
        noted[d.id] = d
    return [noted[d.id] for d in decisions]


def _decision(did: str, group: ParallelGroup, stage: Stage, fit, model, launch) -> FusionDecision:
    kept, dropped = [], []
    for m in stage.members:
        chunks, stages, reason = fit(m.kernel)
        if reason:
            dropped.append(f"{m.labels[0] if m.labels else m.func}: {reason}")
        else:
            kept.append((m, stages))
    # a rejected decision (fewer than two fusable) still lists the whole stage: a plan
    # decision has at least two members
    shown = kept if len(kept) >= 2 else [(m, 1) for m in stage.members]
    members = tuple(MemberRef(m.kernel, m.func, m.ops, m.labels, m.signature, m.out_shape, m.flops,
                              m.chunks) for m, _ in shown)
    def estimate(fused_chunks=None):
        return estimate_gain(model, [m.flops for m in members], [m.chunks for m in members],
                             [s for _, s in shown], fused_chunks)

    gain = estimate()
    leg = stage.legality
    evidence = Evidence(group.fork_label, group.branches, leg.no_path, leg.no_member_reads_another,
                        leg.launch_after, leg.first_consumer, leg.reorder_needed,
                        len({m.signature for m in members}) > 1, tuple(dropped))
    kind = DecisionKind.HORIZONTAL if stage.same_input else DecisionKind.BRANCH_STAGE
    status, reason = DecisionStatus.PROPOSED, ""
    if not leg.legal:
        where = "operator graph" if leg.no_kernel_path else "kernel graph"
        status, reason = DecisionStatus.REJECTED, f"a dependency path joins two members ({where})"
    elif len(kept) < 2:
        status, reason = DecisionStatus.REJECTED, ("fewer than two members the code generator can "
                                                   "fuse: " + "; ".join(dropped))
    else:
        try:
            shape = launch([m.kernel for m in members])
            if shape is not None:  # the generated grid, which may regroup the members' blocks
                gain = estimate(shape.blocks).with_launch(shape)
        except FusionUnsupported as err:
            status, reason = DecisionStatus.REJECTED, f"the code generator refuses the group: {err}"
    return FusionDecision(DecisionId(did), kind, stage.index, members, gain, evidence, status, reason)
