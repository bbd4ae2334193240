"""Co-tuning of fused CUDA groups (Magneto): the fused kernel's threads per block (which sets
every regroupable member's block count, its share of the grid) and the order of the
members' block ranges, searched jointly.

    group = GpuGroup.of(scheduled_funcs, names, flops, target, cost_model)
    joint = cotune_gpu(group, trials=32)      # the joint search
    alone = separately_then_fused(group)      # baseline: each member's best alone, then fused

Without a GPU to measure on (this is the only mode built so far) every point is ranked by
engine.tuning.gpu_estimate and every figure is labelled **estimated**. The baseline gives
each member the thread count that is best for it alone, fuses them with the default rule
(the largest of those counts, members in plan order) and is estimated the same way.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import asdict, dataclass

import tvm
from tvm import tirx

from engine.gpu_devices import GpuDevice, device_for_arch
from engine.parallel.codegen.gpu import GpuMember, gpu_member
from engine.parallel.codegen.gpu_horizontal import GpuLayout, plan_phase
from engine.parallel.tir_util import FusionUnsupported, buffer_bytes
from engine.errors import one_line
from engine.tuning.gpu_estimate import MemberLoad, Rates, launch_us

THREAD_STEPS = (64, 128, 256, 512, 1024)
ESTIMATED = "estimated"


@dataclass(frozen=True, eq=False)
class GpuGroup:
    """The members of one fused group and what the estimator needs about them."""

    names: tuple[str, ...]
    members: tuple[GpuMember, ...]
    flops: tuple[float, ...]
    bytes: tuple[float, ...]
    device: GpuDevice
    rates: Rates
    max_threads: int = 1024

    @staticmethod
    def of(funcs: list[tirx.PrimFunc], names: list[str], flops: list[float], target, cost_model) -> "GpuGroup":
        return GpuGroup(tuple(names), tuple(gpu_member(f, n) for f, n in zip(funcs, names)),
                        tuple(float(f) for f in flops), tuple(float(_param_bytes(f)) for f in funcs),
                        device_for_arch(str(target.arch)),
                        Rates(cost_model.flops_per_us_per_core, cost_model.bytes_per_us, cost_model.launch_us),
                        int(target.attrs.get("max_num_threads", 1024)))

    def loads(self, layout: GpuLayout, only: tuple[int, ...] | None = None) -> list[MemberLoad]:
        """The members' block ranges as `fuse_gpu` lays them out (main phase), in launch order."""
        keep = list(only) if only is not None else list(range(len(self.names)))
        members = [self.members[i] for i in keep]
        names = [self.names[i] for i in keep]
        index, stages, order = plan_phase(members, names, layout, self.max_threads)
        shared = max(m.shared_bytes for m in members)  # the fused kernel's: the largest member's
        return [MemberLoad(self.names[keep[index[j]]], self.flops[keep[index[j]]], self.bytes[keep[index[j]]],
                           stages[j].blocks, stages[j].threads, stages[j].busy_threads, shared) for j in order]

    def estimate_us(self, layout: GpuLayout, only: tuple[int, ...] | None = None) -> float:
        return launch_us(self.loads(layout, only), self.device, self.rates)

    def thread_choices(self, only: tuple[int, ...] | None = None) -> list[int]:
        """Thread counts the fused kernel may have: at least the largest of the members whose
        threads share data; any step up to the limit when some member can be regrouped."""
        stages = [self.members[i].stages[-1] for i in (only if only is not None else range(len(self.names)))]
        fixed = max((s.threads for s in stages if not s.independent), default=0)
        if all(not s.independent for s in stages):
            return [fixed]
        steps = [t for t in THREAD_STEPS if fixed <= t <= self.max_threads]
        return sorted(set(steps + ([fixed] if fixed else [])))


@dataclass(frozen=True)
class GpuCotuneResult:
    layout: GpuLayout
    estimated_us: float
    points: int  # configurations ranked


def _orders(n: int, trials: int, rng: random.Random) -> list[tuple[int, ...] | None]:
    if math.factorial(n) <= max(trials, 1):
        return [None, *itertools.permutations(range(n))]
    picks = {tuple(rng.sample(range(n), n)) for _ in range(trials)}
    return [None, *sorted(picks)]


def cotune_gpu(group: GpuGroup, trials: int, seed: int = 1) -> GpuCotuneResult:
    """The (threads, order) point of lowest estimated time. All thread choices are ranked with
    every order when the orders fit in `trials`, else with `trials` random orders."""
    rng = random.Random(seed)
    best, points = None, 0
    for threads in group.thread_choices():
        for order in _orders(len(group.names), trials, rng):
            layout = GpuLayout(threads, order)
            try:
                t = group.estimate_us(layout)
            except FusionUnsupported:
                continue
            points += 1
            if best is None or t < best[0]:
                best = (t, layout)
    if best is None:
        raise FusionUnsupported("no thread count fits every member")
    return GpuCotuneResult(best[1], round(best[0], 3), points)


def separately_then_fused(group: GpuGroup) -> GpuCotuneResult:
    """Baseline: each member's thread count chosen on its own estimate, fused by the default
    rule (the largest chosen count; members in plan order)."""
    chosen = []
    for i in range(len(group.names)):
        alone = [(group.estimate_us(GpuLayout(t), only=(i,)), t) for t in group.thread_choices(only=(i,))]
        chosen.append(min(alone)[1])
    fixed = group.thread_choices()[0]
    layout = GpuLayout(max(max(chosen), fixed))
    return GpuCotuneResult(layout, round(group.estimate_us(layout), 3), len(group.names))


@dataclass(frozen=True)
class GpuCotuneRecord:
    """One decision's co-tuning on cuda, as reported (figures in microseconds, estimated)."""

    decision: str
    members: tuple[str, ...]
    layout: GpuLayout  # the kept layout (the better estimate of the two)
    cotuned_us: float
    separate_us: float
    separate_layout: GpuLayout
    points: int
    kept: str  # "co-tuned" or "separately tuned": whichever estimate is lower
    basis: str = ESTIMATED  # "estimated": ranked by engine.tuning.gpu_estimate, nothing measured

    @property
    def speedup(self) -> float:
        return self.separate_us / self.cotuned_us if self.cotuned_us else 1.0

    def to_json(self) -> dict:
        data = asdict(self)
        data["speedup_vs_separate"] = round(self.speedup, 4)
        return data

    def note(self) -> str:
        return (f"co-tuning {self.decision} ({self.basis}, no GPU measurement): co-tuned "
                f"{self.cotuned_us:.1f} us vs separately tuned then fused {self.separate_us:.1f} us "
                f"({self.speedup:.2f}x, {self.points} points); kept {self.kept}: {self.layout.describe()}")


def cotune_plan_gpu(mod: tvm.IRModule, unscheduled: tvm.IRModule, ctx, plan, trials: int, store,
                    emit) -> tuple[tvm.IRModule, list[GpuCotuneRecord]]:
    """Co-tune the plan's approved horizontal decisions (the TargetSpec cotuner of cuda).
    The module is returned as it is: a layout changes only the fused kernel, which the plan
    applier builds with the record's layout."""
    model = ctx.spec.cost_model(ctx.target)
    records = []
    for d in plan.approved():
        if d.kind.vertical:
            continue
        names = [ctx.kernels[k].func for k in d.kernels]
        try:
            funcs = [ctx.spec.schedule_one(tvm.IRModule({"main": unscheduled[n]}), ctx.target)["main"]
                     for n in names]
            group = GpuGroup.of(funcs, names, [m.flops for m in d.members], ctx.target, model)
            joint, alone = cotune_gpu(group, trials), separately_then_fused(group)
        except FusionUnsupported as err:
            emit(f"co-tuning {d.id}: skipped ({one_line(err, 120)})")
            continue
        joint_wins = joint.estimated_us <= alone.estimated_us
        rec = GpuCotuneRecord(d.id, tuple(names), (joint if joint_wins else alone).layout, joint.estimated_us,
                              alone.estimated_us, alone.layout, joint.points,
                              "co-tuned" if joint_wins else "separately tuned")
        emit(rec.note())
        records.append(rec)
    return mod, records


def _param_bytes(func: tirx.PrimFunc) -> int:
    """Bytes of every buffer the kernel takes (inputs read once, output written once)."""
    return sum(buffer_bytes(p) for p in func.params)
