"""Co-tuning of a fused parallel group: the members' schedule knobs and their chunk counts,
searched jointly on the measured time of the fused kernel.

    report = compare_cotuning([f_expand1x1, f_expand3x3], target, trials=48)
    report.cotuned.seconds, report.separate.seconds  # same total trial budget

`cotune` searches (knobs of every member, chunks of every member) with a small
evolutionary search (random points, then one-knob mutations of the best) and measures the
fused kernel (engine.tuning.hfuse) for every point. `tune_separately_then_fuse` is the
baseline: each member tunes its knobs alone on its own time with an equal share of the
budget, then the winners are fused keeping their own parallel loops (one chunk per
iteration), as a horizontal fusion of separately tuned kernels would.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import tvm
from tvm import tirx
from tvm.s_tir import meta_schedule as ms

from engine.tuning.hfuse import fuse_parallel, parallel_extent, strip_preproc
from engine.tuning.knobs import member_variants


@dataclass(frozen=True)
class GroupConfig:
    """One point of the joint space: per member, a knob index and a chunk count."""

    knobs: tuple[int, ...]
    chunks: tuple[int, ...]


@dataclass(frozen=True)
class CotuneResult:
    config: GroupConfig
    knobs: tuple[tuple, ...]  # the knob values per member (e.g. (ft, xt))
    seconds: float  # measured time of the fused kernel
    trials: int  # kernels measured by the search
    history: tuple[float, ...] = field(repr=False, default=())


@dataclass(frozen=True)
class CotuneReport:
    cotuned: CotuneResult
    separate: CotuneResult
    cotuned_s: float  # both re-measured side by side, interleaved
    separate_s: float

    @property
    def speedup(self) -> float:
        return self.separate_s / self.cotuned_s


class Group:
    """The members' knob spaces and the fused kernel of any configuration."""

    def __init__(self, funcs: list[tirx.PrimFunc], target):
        self.target = target
        self.variants = [member_variants(f, target) for f in funcs]
        if any(not v for v in self.variants):
            raise ValueError("a member has no CPU schedule")
        self.extents = [[parallel_extent(f) for _, f in v] for v in self.variants]

    def chunk_options(self, member: int, knob: int) -> list[int]:
        e = self.extents[member][knob]
        return [d for d in range(1, e + 1) if e % d == 0]

    def fused(self, cfg: GroupConfig) -> tirx.PrimFunc:
        return fuse_parallel([(self.variants[m][k][1], c) for m, (k, c) in enumerate(zip(cfg.knobs, cfg.chunks))])

    def natural(self, knobs: tuple[int, ...]) -> GroupConfig:
        """Each member keeps its own parallel loop: one chunk per iteration."""
        return GroupConfig(knobs, tuple(self.extents[m][k] for m, k in enumerate(knobs)))

    def default_knobs(self) -> tuple[int, ...]:
        return tuple(0 for _ in self.variants)


def time_kernel(func: tirx.PrimFunc, target, repeat: int = 5, min_repeat_ms: int = 20,
                seed: int = 0) -> float:
    """Median seconds of one call of `func` (built for `target`) on random inputs."""
    ex = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}), target=target)
    dev = tvm.cpu()
    rng = np.random.default_rng(seed)
    args = [tvm.runtime.tensor(rng.standard_normal([int(s) for s in a.shape]).astype(a.dtype), dev)
            for a in ms.arg_info.ArgInfo.from_prim_func(func)]
    timer = ex.mod.time_evaluator("main", dev, number=1, repeat=repeat, min_repeat_ms=min_repeat_ms)
    return statistics.median(timer(*args).results)


Measure = Callable[[tirx.PrimFunc], float]


def _search(space: list[list[int]], trials: int, measure_point: Callable[[tuple], float],
            start: tuple, rng: random.Random, neighbours: Callable[[tuple], list[tuple]]):
    """Random points, then one-knob mutations of the best; returns (best, seconds, history)."""
    seen: dict[tuple, float] = {}

    def visit(p):
        if p not in seen and len(seen) < trials:
            seen[p] = measure_point(p)

    visit(start)
    for _ in range(trials * 20):
        if len(seen) >= min(trials // 2, _size(space)) or len(seen) >= trials:
            break
        visit(tuple(rng.choice(opts) for opts in space))
    stall = 0
    while len(seen) < trials and stall < 50:
        top = sorted(seen, key=seen.get)[:3]
        cands = [n for p in top for n in neighbours(p) if n not in seen]
        if not cands:
            stall += 1
            visit(tuple(rng.choice(opts) for opts in space))
            continue
        visit(rng.choice(cands))
    best = min(seen, key=seen.get)
    return best, seen[best], tuple(seen.values())


def _size(space) -> int:
    n = 1
    for opts in space:
        n *= len(opts)
    return n


def cotune(group: Group, trials: int, seed: int = 1, measure: Measure | None = None) -> CotuneResult:
    """Jointly search knobs and chunk counts on the fused kernel's measured time."""
    measure = measure or (lambda f: time_kernel(f, group.target))
    rng = random.Random(seed)
    n = len(group.variants)
    # A point is (knob_0..knob_n-1, chunk-choice_0..) with chunk choices as indices into
    # the divisors of the chosen variant's extent (clamped), so every point is valid.
    def config(p) -> GroupConfig:
        knobs = p[:n]
        chunks = []
        for m, k in enumerate(knobs):
            opts = group.chunk_options(m, k)
            chunks.append(opts[min(p[n + m], len(opts) - 1)])
        return GroupConfig(tuple(knobs), tuple(chunks))

    max_div = max(len(group.chunk_options(m, k)) for m in range(n) for k in range(len(group.variants[m])))
    space = [list(range(len(v))) for v in group.variants] + [list(range(max_div))] * n
    natural = group.natural(group.default_knobs())
    start = tuple(natural.knobs) + tuple(group.chunk_options(m, k).index(c)
                                         for m, (k, c) in enumerate(zip(natural.knobs, natural.chunks)))

    def neighbours(p):
        out = []
        for i, opts in enumerate(space):
            for d in (-1, 1):
                if 0 <= p[i] + d < len(opts):
                    out.append(p[:i] + (p[i] + d,) + p[i + 1:])
        return out

    cache: dict[GroupConfig, float] = {}

    def measure_point(p):
        cfg = config(p)
        if cfg not in cache:
            cache[cfg] = measure(group.fused(cfg))
        return cache[cfg]

    best, seconds, history = _search(space, trials, measure_point, start, rng, neighbours)
    cfg = config(best)
    return CotuneResult(cfg, _knob_values(group, cfg), seconds, len(cache), history)


def tune_separately_then_fuse(group: Group, trials: int, seed: int = 1,
                              measure: Measure | None = None) -> CotuneResult:
    """Baseline: each member tunes its knobs alone (trials / members each), then fuse."""
    measure = measure or (lambda f: time_kernel(f, group.target))
    rng = random.Random(seed)
    n = len(group.variants)
    share = max(1, trials // n)
    knobs, history = [], []
    for m, variants in enumerate(group.variants):
        space = [list(range(len(variants)))]

        def measure_point(p, variants=variants):
            return measure(strip_preproc(variants[p[0]][1]))

        def neighbours(p, size=len(variants)):
            return [(p[0] + d,) for d in (-1, 1) if 0 <= p[0] + d < size]

        best, _, hist = _search(space, share, measure_point, (0,), rng, neighbours)
        knobs.append(best[0])
        history += hist
    cfg = group.natural(tuple(knobs))
    seconds = measure(group.fused(cfg))
    return CotuneResult(cfg, _knob_values(group, cfg), seconds, len(history) + 1, tuple(history))


def compare_cotuning(funcs: list[tirx.PrimFunc], target, trials: int, seed: int = 1,
                     rounds: int = 5) -> CotuneReport:
    """Co-tune vs tune-separately-then-fuse with the same budget; the two winners are then
    re-measured side by side, alternating, `rounds` times (median)."""
    group = Group(funcs, target)
    joint = cotune(group, trials, seed)
    alone = tune_separately_then_fuse(group, trials, seed)
    a, b = group.fused(joint.config), group.fused(alone.config)
    ta, tb = [], []
    for _ in range(rounds):
        ta.append(time_kernel(a, target))
        tb.append(time_kernel(b, target))
    return CotuneReport(joint, alone, statistics.median(ta), statistics.median(tb))


def _knob_values(group: Group, cfg: GroupConfig) -> tuple[tuple, ...]:
    return tuple(group.variants[m][k][0] for m, k in enumerate(cfg.knobs))
