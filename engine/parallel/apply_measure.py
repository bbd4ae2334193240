"""Measured CPU effect of applied decisions: unfused and fused builds timed in one run.

Each fused kernel is timed in place (VM instrument hook) during real runs of the fused
model and set beside the sum of its members' times in real runs of the unfused model;
both models' end-to-end medians are measured alternately in the same process.
"""

from __future__ import annotations

from dataclasses import replace

import tvm

from engine.measure import profile_kernels, time_runs


def measure_effect(outcome, base, fused, kept, names, base_kernels, ctx):
    if ctx.spec.name != "llvm" or not ctx.options.timing or not ctx.spec.device_present():
        return replace(outcome, notes=outcome.notes + (
            "fusion effect not timed (no device run: kernels verified in host emulation)",))
    from engine.parallel.apply import host_vm

    inputs = ctx.model.random_inputs(ctx.options.seed)
    runs = max(ctx.options.runs, 3)
    timed = {}
    latency = {"unfused": [], "fused": []}
    vms = {"unfused": host_vm(base, ctx), "fused": host_vm(fused, ctx)}
    for which, vm in vms.items():
        args = [tvm.runtime.tensor(inputs[s.name]) for s in ctx.model.inputs]
        funcs = {f for f in _funcs(vm_mod=base if which == "unfused" else fused)}
        timed[which] = {t.name: t for t in profile_kernels(vm, lambda: vm["main"](*args), runs,
                                                           lambda: None, funcs)}
    for _ in range(2):  # alternate, to share any drift between the two
        for which, vm in vms.items():
            args = [tvm.runtime.tensor(inputs[s.name]) for s in ctx.model.inputs]
            latency[which].append(time_runs(lambda: vm["main"](*args), runs).median_ms)
    by_id = {d.id: d for d in kept}
    decisions = []
    for o in outcome.decisions:
        d = by_id.get(o.id)
        if d is None:
            decisions.append(o)
            continue
        members = tuple(timed["unfused"][base_kernels[k].func].median_ms for k in d.kernels
                        if base_kernels[k].func in timed["unfused"])
        fused_t = timed["fused"].get(names[d.id])
        decisions.append(replace(o, members_ms=members, fused_ms=fused_t.median_ms if fused_t else None))
    return replace(outcome, decisions=tuple(decisions), unfused_ms=min(latency["unfused"]),
                   fused_ms=min(latency["fused"]))


def _funcs(vm_mod) -> set[str]:
    from engine.parallel.kernel_graph import is_call_tir, main_bindings

    return {b.value.args[0].name_hint for b in main_bindings(vm_mod) if is_call_tir(b.value)}
