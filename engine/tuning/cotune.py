"""Co-tuning of a fused parallel group (Magneto): the members' schedule knobs and the way
they share the fused kernel's parallel loop, searched jointly on the fused kernel's time.

    group = Group(unscheduled_member_funcs, target)
    joint = cotune(group, trials=24)                    # searched on the fused kernel
    alone = tune_separately_then_fuse(group, trials=24) # baseline, same budget
    report = compare_cotuning(group, trials=24)         # both, then re-measured side by side

The fused kernel is engine.parallel's own CPU code generator (`fuse_cpu`), the one the
compile pipeline applies, so a co-tuned configuration is exactly what a compile builds.
A point of the joint space is one knob variant per member (engine.tuning.knobs: the conv
register tile) and a `CpuLayout`: sliced over T tasks, or contiguous with a share of
chunks per member. The baseline tunes each member's knobs on its own time (an equal part
of the budget), then fuses the winners with the pipeline's default layout.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable

import numpy as np
import tvm
from tvm import s_tir, tirx
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

from engine.schedule.cpu.common import has_preproc, num_cores
from engine.ir_module import prepared
from engine.parallel.codegen import CPU_CODEGEN
from engine.parallel.codegen.cpu import CpuLayout, cpu_member, fuse_cpu
from engine.tuning.knobs import member_variants

Measure = Callable[[tirx.PrimFunc], float]
SHARE_STEPS = (1, 2, 4, 8, 16)  # contiguous shares, in units of the core count; plus "natural"


@dataclass(frozen=True)
class GroupConfig:
    """One point of the joint space: a knob variant index per member and the layout."""

    knobs: tuple[int, ...]
    layout: CpuLayout


@dataclass(frozen=True)
class CotuneResult:
    config: GroupConfig
    knobs: tuple[tuple, ...]  # the knob values per member, e.g. (ft, xt) or ("default",)
    seconds: float  # measured time of the fused kernel during the search
    trials: int  # kernels measured
    history: tuple[float, ...] = field(repr=False, default=())


@dataclass(frozen=True)
class CotuneReport:
    cotuned: CotuneResult
    separate: CotuneResult
    cotuned_s: float  # both winners re-measured side by side, interleaved (median)
    separate_s: float
    # the separately tuned members with the co-tuned layout, measured in the same rounds:
    # how much of the gain is the layout (share of the loop) alone
    layout_only_s: float

    @property
    def speedup(self) -> float:
        return self.separate_s / self.cotuned_s

    @property
    def layout_speedup(self) -> float:
        return self.separate_s / self.layout_only_s


def strip_preproc(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """The kernel without its weight repack: it takes the packed weight, as in a build (the
    repack runs once at compile time). TVM's pass empties the repack block; its loop nest,
    a parallel loop doing nothing, is dropped here so it is no stage of a fused kernel."""
    func = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(tvm.IRModule({"main": func}))["main"]
    root = func.body.block
    stmts = list(root.body.seq) if isinstance(root.body, tirx.SeqStmt) else [root.body]
    kept = [st for st in stmts if not has_preproc(st)]
    if len(kept) == len(stmts):
        return func
    body = kept[0] if len(kept) == 1 else tirx.SeqStmt(kept)
    new_root = s_tir.SBlock(root.iter_vars, root.reads, root.writes, root.name_hint, body,
                            root.init, root.alloc_buffers, root.match_buffers, root.annotations)
    return func.with_body(s_tir.SBlockRealize([], True, new_root))



# Below this many FLOPs a fused group may run serially (about 2 us on one core: less than
# waking the thread pool).
SERIAL_FLOPS = 1 << 19


def _flops(func: tirx.PrimFunc) -> float:
    from tvm.s_tir.analysis import estimate_tir_flops

    try:
        return float(estimate_tir_flops(tvm.IRModule({"main": func})))
    except Exception:  # pylint: disable=broad-except  # unknown to the estimate: not tiny
        return float(SERIAL_FLOPS)


class Group:
    """The members' knob spaces, the layout space and the fused kernel of any point.

    `scheduled[m]`, when given, is member m as the pipeline already scheduled it (e.g.
    tuned alone by MetaSchedule): it becomes that member's first variant."""

    def __init__(self, funcs: list[tirx.PrimFunc], target, names: list[str] | None = None,
                 scheduled: list[tirx.PrimFunc | None] | None = None, before_build=None):
        self.target = target
        self.before_build = before_build  # the target's pre-build rewrite: timed as built
        self.names = list(names or [f"m{i}" for i in range(len(funcs))])
        scheduled = scheduled or [None] * len(funcs)
        self.variants = []
        for f, s in zip(funcs, scheduled):
            v = member_variants(f, target)
            self.variants.append(([(("as scheduled",), s)] if s is not None else []) + v)
        if any(not v for v in self.variants):
            raise ValueError("a member has no CPU schedule")
        cores = num_cores(target)
        # 1 task (serial) only for tiny groups: timed alone with hot caches it can beat the
        # pool on a mid-size group (fire_module's expands: 0.111 vs 0.114 ms) and then loses
        # the other cores inside the model (1.43x slower end to end)
        tiny = sum(_flops(f) for f in funcs) < SERIAL_FLOPS
        tasks = sorted(({1} if tiny else set()) | {cores * k for k in (1, 2, 4, 8)})
        self.layouts = [CpuLayout(True, t) for t in tasks] + [CpuLayout(True, 0)]
        self.shares = [cores * k for k in SHARE_STEPS] + [0]  # 0: natural (one chunk per iteration)
        self._member = lru_cache(maxsize=None)(self._member_uncached)

    def _member_uncached(self, m: int, k: int) -> tirx.PrimFunc:
        return strip_preproc(self.variants[m][k][1])

    def member(self, m: int, k: int) -> tirx.PrimFunc:
        """Member m's variant k, ready to fuse or time alone."""
        return self._member(m, k)

    def chunks(self, m: int, k: int) -> int:
        return cpu_member(self.member(m, k), self.names[m]).chunks

    def fused(self, cfg: GroupConfig) -> tirx.PrimFunc:
        funcs = [self.member(m, k) for m, k in enumerate(cfg.knobs)]
        return fuse_cpu(funcs, self.names, cfg.layout)

    def default_layout(self) -> CpuLayout:
        """What the pipeline's code generator uses when nothing was co-tuned."""
        return CPU_CODEGEN.default_layout(self.target)

    def knob_values(self, cfg: GroupConfig) -> tuple[tuple, ...]:
        return tuple(self.variants[m][k][0] for m, k in enumerate(cfg.knobs))

    def time(self, func: tirx.PrimFunc) -> float:
        """Seconds of one call of `func` (a fused point) built for the group's target."""
        return time_kernel(func, self.target, before_build=self.before_build)

    def scheduled_member(self, m: int, k: int) -> tirx.PrimFunc:
        """Member m's variant k with its weight repack, for the pipeline's schedule stage."""
        return self.variants[m][k][1]


def time_kernel(func: tirx.PrimFunc, target, repeat: int = 5, min_repeat_ms: int = 20,
                seed: int = 0, before_build=None) -> float:
    """Median seconds of one call of `func` (built for `target`, after the target's
    `before_build` as the compile's builds) on random inputs."""
    mod = prepared(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}), before_build)
    ex = tvm.compile(mod, target=target)
    dev = tvm.cpu()
    rng = np.random.default_rng(seed)
    args = [tvm.runtime.tensor(rng.standard_normal([int(s) for s in a.shape]).astype(a.dtype), dev)
            for a in ms.arg_info.ArgInfo.from_prim_func(func)]
    timer = ex.mod.time_evaluator("main", dev, number=1, repeat=repeat, min_repeat_ms=min_repeat_ms)
    return statistics.median(timer(*args).results)


def _search(space: list[list[int]], trials: int, measure_point: Callable[[tuple], float],
            start: tuple, rng: random.Random) -> tuple[tuple, float, tuple[float, ...]]:
    """The start point, random points for half the budget, then one-knob mutations of the
    three best; returns (best point, its seconds, all measured seconds)."""
    seen: dict[tuple, float] = {}
    size = math.prod(len(opts) for opts in space)

    def visit(p):
        if p not in seen and len(seen) < trials:
            seen[p] = measure_point(p)

    visit(start)
    for _ in range(trials * 20):
        if len(seen) >= min(trials // 2, size):
            break
        visit(tuple(rng.choice(opts) for opts in space))
    _refine(seen, space, trials, measure_point, rng)
    best = min(seen, key=seen.get)
    return best, seen[best], tuple(seen.values())


def _refine(seen: dict[tuple, float], space: list[list[int]], trials: int,
            measure_point: Callable[[tuple], float], rng: random.Random,
            canon: Callable[[tuple], tuple] = lambda p: p) -> None:
    """One-knob mutations of the three best points of `seen` until it holds `trials`;
    `canon` maps points that are the same configuration to one."""
    size = math.prod(len(opts) for opts in space)
    stall = 0
    while len(seen) < min(trials, size) and stall < 50:
        top = sorted(seen, key=seen.get)[:3]
        cands = [canon(p[:i] + (p[i] + d,) + p[i + 1:]) for p in top for i, opts in enumerate(space)
                 for d in (-1, 1) if 0 <= p[i] + d < len(opts)]
        cands = [c for c in cands if c not in seen]
        if not cands:
            stall += 1
            cands = [canon(tuple(rng.choice(opts) for opts in space))]
            if cands[0] in seen:
                continue
        p = rng.choice(cands)
        seen[p] = measure_point(p)


def cotune(group: Group, trials: int, seed: int = 1, measure: Measure | None = None) -> CotuneResult:
    """Search every member's knobs and the layout jointly on the fused kernel's time.

    Coordinate descent in context, then a joint refinement: the layout options first (few),
    then each member's knob with the others at the best point so far (the baseline's
    per-member search, but timed inside the fused kernel, where members share the cores
    and caches), then one-knob mutations of every dimension around the best points."""
    measure = measure or group.time
    n = len(group.variants)
    n_sliced = len(group.layouts)
    # point = (knob_0..knob_n-1, layout, share_0..share_n-1); layout index n_sliced means
    # contiguous with the shares, the shares are ignored for sliced layouts.
    space = ([list(range(len(v))) for v in group.variants] + [list(range(n_sliced + 1))]
             + [list(range(len(group.shares)))] * n)

    def config(p) -> GroupConfig:
        knobs = tuple(p[:n])
        if p[n] < n_sliced:
            return GroupConfig(knobs, group.layouts[p[n]])
        shares = tuple(group.shares[s] or group.chunks(m, knobs[m]) for m, s in enumerate(p[n + 1:]))
        return GroupConfig(knobs, CpuLayout(False, 0, shares))

    default = group.default_layout()
    start = (0,) * n + (group.layouts.index(default),) + (0,) * n
    cache: dict[GroupConfig, float] = {}

    seen: dict[tuple, float] = {}

    def measure_point(p):
        cfg = config(p)
        if cfg not in cache:
            cache[cfg] = measure(group.fused(cfg))
        return cache[cfg]

    def visit(p):
        if p not in seen and len(seen) < trials:
            seen[p] = measure_point(p)

    def best():
        return min(seen, key=seen.get)

    rng = random.Random(seed)
    visit(start)
    # 1. the share of the cores: serial, one slice per core, one per chunk, contiguous
    cores = group.layouts.index(default)
    for li in dict.fromkeys([0, cores, n_sliced - 1, n_sliced]):
        visit(start[:n] + (li,) + start[n + 1:])
    # 2. each member's knob with the others at the best point so far: the baseline's
    # per-member search, but timed inside the fused kernel (shared cores and caches)
    for m in range(n):
        budget = max(1, (trials - len(seen)) // (n - m + 1))  # the last part is kept for step 3
        base = best()

        def in_context(q, m=m, base=base):
            point = base[:m] + q + base[m + 1:]
            if point not in seen and len(seen) >= trials:
                return math.inf
            seen[point] = measure_point(point)
            return seen[point]

        _search([space[m]], budget + 1, in_context, (base[m],), rng)  # +1: base, measured
    # 3. one-knob mutations (layout and shares included) around the best points
    _refine(seen, space, trials, measure_point, rng,
            canon=lambda p: p if p[n] == n_sliced else p[:n + 1] + (0,) * n)
    point = best()
    cfg = config(point)
    return CotuneResult(cfg, group.knob_values(cfg), seen[point], len(cache), tuple(seen.values()))


def tune_separately_then_fuse(group: Group, trials: int, seed: int = 1,
                              measure: Measure | None = None) -> CotuneResult:
    """Baseline: each member tunes its knobs on its own time (trials / members each), then
    the winners are fused with the pipeline's default layout."""
    measure = measure or group.time
    rng = random.Random(seed)
    share = max(1, trials // len(group.variants))
    knobs, history = [], []
    for m, variants in enumerate(group.variants):
        best, _, hist = _search([list(range(len(variants)))], share,
                                lambda p, m=m: measure(group.member(m, p[0])), (0,), rng)
        knobs.append(best[0])
        history += hist
    cfg = GroupConfig(tuple(knobs), group.default_layout())
    seconds = measure(group.fused(cfg))
    return CotuneResult(cfg, group.knob_values(cfg), seconds, len(history) + 1, tuple(history))


def compare_cotuning(group: Group, trials: int, seed: int = 1, rounds: int = 5,
                     measure: Measure | None = None) -> CotuneReport:
    """Co-tune and the baseline with the same budget; the two winners, and the baseline's
    tiles with the co-tuned layout, are then re-measured side by side, alternating,
    `rounds` times (median): the search's own figures are single noisy samples."""
    measure = measure or group.time
    joint = cotune(group, trials, seed, measure)
    alone = tune_separately_then_fuse(group, trials, seed, measure)
    layout_only = GroupConfig(alone.config.knobs, joint.config.layout)
    configs = list(dict.fromkeys([joint.config, alone.config, layout_only]))
    kernels = [group.fused(c) for c in configs]
    times: list[list[float]] = [[] for _ in configs]
    for _ in range(rounds):
        for t, k in zip(times, kernels):
            t.append(measure(k))
    median = {c: statistics.median(t) for c, t in zip(configs, times)}
    return CotuneReport(joint, alone, median[joint.config], median[alone.config], median[layout_only])
