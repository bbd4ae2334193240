"""Execute a plan's approved decisions inside the compile pipeline ("apply plan" stage).

`apply_plan(plan, mod, ctx, layouts)`: given the scheduled module it
1. generates one fused kernel per approved decision and rewrites `main` (a decision whose
   code generation fails is rejected with the reason, the others go on);
2. verifies the whole fused model against onnxruntime (CUDA without a GPU: on the CPU
   through engine.runtime.emulation); on failure it retries the decisions one by one on top
   of those already kept, keeps the passing ones and rolls back the others, with reasons;
3. measures (targets that time fusion, on their device, when timing is on) the unfused
   and the fused builds in the same run: each fused kernel against the sum of its
   members' kernel times, and end to end.
It returns the fused module, its kernel calls and what happened (PlanOutcome).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import tvm
from tvm import relax

from engine.errors import BlockwiseError, one_line
from engine.events import FusionPolicy
from engine.parallel.outcome import DecisionOutcome, DecisionResult, PlanOutcome, group_timings  # noqa: F401
from engine.kernels import KernelCall
from engine.runtime.measure import sample_runs, time_kernels_isolated
from engine.timing import Spread, difference
from engine.parallel.kernel_graph import call_args, is_call_tir, key, main_bindings
from engine.parallel.plan import DecisionKind, FusionDecision, FusionPlan, application_order, validate_plan
from engine.parallel.relax_rewrite import call_of, member_vars, replace_with_fused
from engine.parallel.slices import slice_link


@dataclass(frozen=True, eq=False)
class AppliedPlan:
    module: tvm.IRModule
    kernels: tuple[KernelCall, ...]
    outcome: PlanOutcome


def apply_plan(plan: FusionPlan, mod: tvm.IRModule, ctx, layouts=None,
               policy: FusionPolicy = FusionPolicy.APPROVED) -> AppliedPlan:
    """Fuse `plan`'s approved decisions into the scheduled `mod` (MEASURED_WINNERS: every
    proposed decision, then only those measured faster). `ctx`: the pipeline's
    CompileContext (model, spec, target, kernels, options); `layouts`: decision id ->
    co-tuned layout of its fused kernel (engine.tuning.hook)."""
    validate_plan(plan, ctx.model.name, ctx.spec.name, ctx.kernels)
    if policy is FusionPolicy.APPROVED:
        return _apply(plan, plan.approved(), mod, ctx, layouts or {})
    tried = plan.with_approval("all").approved()
    oracle = _Oracle(ctx) if tried else None  # one onnxruntime reference for the trial and the rebuild
    trial = _apply(plan, tried, mod, ctx, layouts or {}, oracle)
    return _keep_winners(plan, trial, mod, ctx, layouts or {}, oracle)


def _apply(plan: FusionPlan, approved, mod, ctx, layouts, oracle: "_Oracle | None" = None) -> AppliedPlan:
    """Fuse `approved` on `mod`, verify (rolling back failures one by one), measure."""
    base, base_kernels = mod, ctx.kernels
    vars_of = {d.id: member_vars(base, d.kernels) for d in approved}
    results: dict[str, DecisionOutcome] = {
        d.id: DecisionOutcome(d.id, DecisionResult.NOT_APPROVED, d.reason or "not approved")
        for d in plan.decisions if d not in approved}

    partial: dict[str, str] = {}  # decision id -> which members an earlier decision took

    def fuse_or_reject(current, d: FusionDecision):
        """(module, fused kernel name), or None with the decision's result recorded."""
        try:
            # a co-tuned layout is for all of a decision's members, not for the ones left
            return _fuse(current, d, vars_of[d.id], ctx, None if d.id in partial else layouts.get(d.id))
        except BlockwiseError as err:
            results[d.id] = DecisionOutcome(d.id, DecisionResult.CODEGEN_REJECTED, str(err))
        except Exception as err:  # TVM errors: keep the first line
            results[d.id] = DecisionOutcome(d.id, DecisionResult.CODEGEN_REJECTED, _first_line(err))
        return None

    kept: list[FusionDecision] = []
    fused, names = base, {}
    owner: dict[int, str] = {}  # kernel index -> the applied decision that fused it
    for d in application_order(approved):
        taken = sorted({owner[k] for k in d.kernels if k in owner}, key=lambda i: int(i[1:]))
        rest = tuple(m for m in d.members if m.kernel not in owner)
        if taken and not d.kind.vertical and len(rest) >= 2:
            # parallel members stay parallel without the ones taken: fuse the others
            partial[d.id] = (f"{len(d.members) - len(rest)} member(s) fused by {', '.join(taken)}; "
                             f"the other {len(rest)} fused")
            d = replace(d, members=rest)
            vars_of[d.id] = member_vars(base, d.kernels)
            taken = []
        if taken:
            results[d.id] = DecisionOutcome(d.id, DecisionResult.OVERLAPPED,
                                            f"its kernels were already fused by {', '.join(taken)} "
                                            "(the first approved in application order is applied)")
            continue
        made = fuse_or_reject(fused, d)
        if made is not None:
            fused, names[d.id] = made
            kept.append(d)
            owner.update((k, d.id) for k in d.kernels)
    verified = "nothing to verify"
    if kept:
        oracle = oracle or _Oracle(ctx)
        ok, verified = oracle.check(fused)
        if not ok:  # roll back: try the decisions one by one on top of the kept ones
            fused, good = base, []
            for d in kept:
                made = fuse_or_reject(fused, d)  # a failure here costs this decision only
                if made is None:
                    continue
                passed, why = oracle.check(made[0])
                if passed:
                    fused, names[d.id] = made
                    good.append(d)
                else:
                    results[d.id] = DecisionOutcome(d.id, DecisionResult.ROLLED_BACK, why)
            kept = good
            verified = f"{len(good)} decision(s) kept after one-by-one verification"
    kernels = _relist(fused, base, base_kernels, [vars_of[d.id] for d in kept])
    for d in kept:
        results[d.id] = DecisionOutcome(d.id, DecisionResult.APPLIED, partial.get(d.id, ""), names[d.id],
                                        len(d.members), 1)
    outcome = PlanOutcome(tuple(results[d.id] for d in plan.decisions), len(base_kernels), len(kernels),
                          verified)
    if kept:
        outcome = _measure_effect(outcome, base, fused, kept, names, base_kernels, kernels, ctx)
    return AppliedPlan(fused, kernels, outcome)


def _keep_winners(plan: FusionPlan, trial: AppliedPlan, mod, ctx, layouts, oracle: "_Oracle | None") -> AppliedPlan:
    """From a trial with every decision applied: keep the decisions whose fused kernel is
    faster than its members beyond the noise (estimated gain without timings), rebuild with
    them, and keep none if that build is slower end to end beyond the noise."""
    applied = [o for o in trial.outcome.decisions if o.result is DecisionResult.APPLIED]
    measured = trial.outcome.kernel_timing != ""
    drops: dict[str, DecisionOutcome] = {}
    for o in applied:
        if measured and o.fused_ms is not None and o.members_sum_ms is not None:
            gain = o.members_sum_ms - o.fused_ms
            if gain <= (o.noise_ms or 0.0):
                drops[o.id] = replace(o, result=DecisionResult.NO_MEASURED_GAIN, reason=(
                    f"fused {o.fused_ms:.4f} ms vs members {o.members_sum_ms:.4f} ms "
                    f"(noise {o.noise_ms or 0:.4f} ms)"))
        elif not measured and plan.decision(o.id).gain.estimated_us <= 0:
            drops[o.id] = replace(o, result=DecisionResult.NO_ESTIMATED_GAIN,
                                  reason=f"estimated {plan.decision(o.id).gain.estimated_us:.1f} us")
    winners = [plan.decision(o.id) for o in applied if o.id not in drops]
    final = trial if not drops else _apply(plan, tuple(winners), mod, ctx, layouts, oracle)
    out = final.outcome
    slower = (out.fused_ms is not None and out.unfused_ms is not None
              and out.fused_ms - out.unfused_ms > (out.e2e_noise_ms or 0.0))
    if slower:  # together they lose end to end: keep none
        why = (f"the kept decisions measured slower end to end: {out.fused_ms:.4f} ms fused vs "
               f"{out.unfused_ms:.4f} ms unfused (noise {out.e2e_noise_ms or 0:.4f} ms)")
        for o in out.decisions:
            if o.result is DecisionResult.APPLIED:
                drops[o.id] = replace(o, result=DecisionResult.NO_MEASURED_GAIN, reason=why)
        final = AppliedPlan(mod, ctx.kernels, replace(out, launches_after=out.launches_before, groups=()))
        out = final.outcome
    tried = {o.id: o for o in trial.outcome.decisions}
    decisions = tuple(drops.get(o.id) or (o if o.result is not DecisionResult.NOT_APPROVED else tried[o.id])
                      for o in out.decisions)
    note = ("kept only decisions measured faster than their members" if measured else
            "kept only decisions estimated faster (estimated: no device to measure on)")
    return replace(final, outcome=replace(out, decisions=decisions, policy=FusionPolicy.MEASURED_WINNERS.value,
                                          notes=out.notes + (f"auto: {note}; {len(drops)} dropped",)))


def _first_line(err: Exception) -> str:
    return one_line(err, 200)


def _fuse(mod, d: FusionDecision, members, ctx, layout):
    calls = [call_of(mod, v) for v in members]
    if any(c is None for c in calls):
        raise BlockwiseError(f"{d.id}: a member was already fused by another decision")
    funcs = [c.args[0].name_hint for c in calls]
    codegen = ctx.spec.fusion
    written = None
    if d.kind is DecisionKind.VERTICAL_BLOCK:
        prim = codegen.vertical(mod[funcs[0]], mod[funcs[1]], funcs, d.evidence.link, ctx.target)
        name = f"vfused_{d.id}"
    elif d.kind is DecisionKind.VERTICAL_ROWS:
        if codegen.rows is None:
            raise BlockwiseError(f"{d.id}: row-band fusion is not implemented for {codegen.target}")
        link = d.evidence.rows  # tuned: (bands, whole_band)
        if layout is not None:
            link = replace(link, tasks=layout[0], whole_band=layout[1])
        prim = codegen.rows.fuse(mod[funcs[0]], mod[funcs[1]], funcs, link, ctx.target)
        name, written = f"rfused_{d.id}", (1,)  # the intermediate lives in the kernel's scratch
    elif d.kind is DecisionKind.VERTICAL_SLICES:
        if codegen.fuse_slices is None:
            raise BlockwiseError(f"{d.id}: writing into a concat's slices is not implemented for {codegen.target}")
        link = slice_link(mod, members[:-1], members[-1])  # on the module as it is now
        prim = codegen.fuse_slices([mod[f] for f in funcs[:-1]], funcs[:-1], mod[funcs[-1]], link, ctx.target)
        name, written = f"sfused_{d.id}", (len(members) - 1,)  # only the concat's output exists
    else:
        prim = codegen.fuse([mod[f] for f in funcs], funcs, ctx.target, layout)
        name = f"hfused_{d.id}"
    return replace_with_fused(mod, members, prim, name, written)


class _Oracle:
    """Runs candidate modules on the host and compares with onnxruntime; when an output
    proves nothing (it does not depend on the input, or is all below atol), compares every
    kernel with the unscheduled build's instead (engine.runtime.verify)."""

    def __init__(self, ctx):
        from engine.runtime.measure import onnxruntime_session

        self.ctx = ctx
        self.inputs = ctx.model.sample_inputs(ctx.options.seed)
        sess = onnxruntime_session(ctx.model.reference.SerializeToString(), threads=1)
        self.expected = sess.run(None, self.inputs)
        self.other = sess.run(None, ctx.model.sample_inputs(ctx.options.seed, second=True))
        self._reference: list[np.ndarray] | None = None  # unscheduled kernel outputs, on first need

    def check(self, mod) -> tuple[bool, str]:
        from engine.runtime.verify import compare_outputs, output_arrays

        opts = self.ctx.options
        try:
            vm = host_vm(mod, self.ctx)
            args = [tvm.runtime.tensor(self.inputs[s.name]) for s in self.ctx.model.inputs]
            actual = output_arrays(vm["main"](*args))
        except Exception as err:
            return False, f"build/run failed: {_first_line(err)}"
        v = compare_outputs(self.ctx.model.outputs, self.expected, actual, opts.rtol, opts.atol, other=self.other)
        if v.values_match and v.uninformative:
            v = v.with_kernels(self._kernels(vm, args, mod))
        return v.passed, v.summary()

    def _kernels(self, vm, args, mod):
        from engine.kernels import list_kernels
        from engine.runtime.verify import first_unmatched, kernel_call_outputs, reference_kernel_outputs

        if self._reference is None:
            self._reference = reference_kernel_outputs(self.ctx.unscheduled,
                                                       [self.inputs[s.name] for s in self.ctx.model.inputs])
        names = {k.func for k in list_kernels(mod, []) if not k.func.startswith("layout_rewrite")
                 and "preproc" not in k.func}
        got = kernel_call_outputs(vm, args, mod, names)
        return first_unmatched(got, self._reference, self.ctx.options.rtol, self.ctx.options.atol * 10)


def host_vm(mod, ctx):
    """A VM for `mod` on the CPU (GPU-scheduled modules through CPU emulation)."""
    return relax.VirtualMachine(ctx.spec.host_compile(mod, ctx.target), tvm.cpu())


def _relist(mod, base, base_kernels: tuple[KernelCall, ...], groups) -> tuple[KernelCall, ...]:
    """Kernel calls of the fused `main`: unfused ones keep their KernelCall, a fused call
    gets all its members' operators. `groups`: the member Vars of each applied decision (a
    vertical or slice fusion's call is bound to one member's Var and hides the others)."""
    by_var = {key(v): kc for v, kc in zip(member_vars(base, range(len(base_kernels))), base_kernels)}
    group_of = {key(v): i for i, vs in enumerate(groups) for v in vs}
    parts: dict[int, list] = {}
    for b in main_bindings(mod):
        if isinstance(b.value, relax.TupleGetItem):
            parts.setdefault(key(b.value.tuple_value), []).append(key(b.var))
    out = []
    for b in main_bindings(mod):
        if not is_call_tir(b.value):
            continue
        func = b.value.args[0].name_hint
        bound = [key(b.var)] + parts.get(key(b.var), [])
        fused = {group_of[k] for k in bound if k in group_of}
        if not fused and key(b.var) in by_var:
            kc = by_var[key(b.var)]
        else:
            keys = [key(v) for g in fused for v in groups[g]] if fused else bound
            members = sorted((by_var[k] for k in set(keys) if k in by_var), key=lambda m: m.index)
            own = by_var.get(key(b.var))
            shaped = own or (members[0] if members else None)
            reads = tuple(a.name for a in call_args(b.value) if isinstance(a, relax.Var))
            kc = KernelCall(0, own.var if own else b.var.name, func, tuple(o for m in members for o in m.ops),
                            reads, shaped.out_shape if shaped else (), shaped.dtype if shaped else "")
        out.append(replace(kc, index=len(out), func=func))
    return tuple(out)


KERNEL_TIMING = "each kernel timed alone (time_evaluator) on the arguments of a real run"


def _measure_effect(outcome, base, fused, kept, names, base_kernels, fused_kernels, ctx):
    """Unfused and fused builds measured in one run: each kernel of both builds timed alone
    on the inputs it gets in a real run (no per-call hook cost, which would favour fusion by
    one hook per saved launch), and both models end to end, alternately. Fills each kept
    decision's times, the groups (the before/after of every kernel) and the end-to-end
    spreads; noise throughout is engine.timing's (the interquartile range, both sides added)."""
    if not ctx.spec.times_fusion or not ctx.options.timing or not ctx.spec.device_present():
        return replace(outcome, notes=outcome.notes + (
            "fusion effect not timed (no device run: kernels verified in host emulation)",))
    inputs = ctx.model.sample_inputs(ctx.options.seed)
    runs = max(ctx.options.runs, 3)
    dev = tvm.cpu()
    builds = {"unfused": (base, ctx.spec.host_compile(base, ctx.target)),
              "fused": (fused, ctx.spec.host_compile(fused, ctx.target))}
    vms = {which: relax.VirtualMachine(ex, dev) for which, (_, ex) in builds.items()}
    args = [tvm.runtime.tensor(inputs[s.name], dev) for s in ctx.model.inputs]
    timed = {which: time_kernels_isolated(builds[which][1], vm, lambda vm=vm: vm["main"](*args),
                                          _funcs(builds[which][0]), dev)
             for which, vm in vms.items()}
    samples: dict[str, list[float]] = {"unfused": [], "fused": []}
    for _ in range(3):  # alternate, to share any drift between the two
        for which, vm in vms.items():
            samples[which] += sample_runs(lambda vm=vm: vm["main"](*args), runs)
    by_id = {d.id: d for d in kept}
    decisions = []
    for o in outcome.decisions:
        d = by_id.get(o.id)
        if d is None:
            decisions.append(o)
            continue
        members = [timed["unfused"].get(base_kernels[k].func) for k in d.kernels]
        fused_t = timed["fused"].get(names[d.id])
        if fused_t is None or any(m is None for m in members):
            decisions.append(o)
            continue
        decisions.append(replace(o, members_ms=tuple(m.median_ms for m in members), fused_ms=fused_t.median_ms,
                                 noise_ms=fused_t.spread_ms + sum(m.spread_ms for m in members)))
    labels = {n.id: n.label for n in ctx.graph.nodes}
    made: dict[str, list] = {}  # kernel -> the decisions it stands for, in execution order
    for d in sorted(kept, key=lambda d: min(d.kernels)):
        made.setdefault(names[d.id], []).append((d.id, d.kernels))
    groups = group_timings(base_kernels, fused_kernels, made,
                           {k: t.time for k, t in timed["unfused"].items()},
                           {k: t.time for k, t in timed["fused"].items()}, labels)
    unfused, fused_e2e = (Spread.of([x * 1e3 for x in samples[w]]) for w in ("unfused", "fused"))
    return replace(outcome, decisions=tuple(decisions), unfused_ms=unfused.median_ms, fused_ms=fused_e2e.median_ms,
                   kernel_timing=KERNEL_TIMING, e2e_noise_ms=difference(unfused, fused_e2e).noise_ms,
                   groups=groups, unfused=unfused, fused=fused_e2e)


def _funcs(vm_mod) -> set[str]:
    return {b.value.args[0].name_hint for b in main_bindings(vm_mod) if is_call_tir(b.value)}
