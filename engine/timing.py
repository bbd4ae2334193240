"""Timing facts and the statistics every view of them uses (no TVM: front ends import this).

One model, whatever measured the samples (engine.runtime.measure):
- a measurement is a `Spread`: the median of its samples and their interquartile range
  (IQR, p25–p75; robust to the odd slow run), warm-up runs excluded; its noise is the IQR;
- a kernel's share is its median per inference over the sum of the kernels' medians (that
  sum is not the end-to-end latency, which also holds the gaps between kernels: launches,
  allocation, the VM's own work);
- two measurements compare as a `Change` (b − a) or a `Ratio` (a / b), each with the noise
  of both sides added beside it: a difference within it is noise.

    >>> a, b = Spread.of([1.0, 1.1, 1.2, 1.0, 1.1]), Spread.of([0.9, 1.0, 0.95, 0.9, 1.0])
    >>> a, b
    (Spread(median_ms=1.1, q1_ms=1.0, q3_ms=1.1, samples=5), Spread(median_ms=0.95, q1_ms=0.9, q3_ms=1.0, samples=5))
    >>> round(ratio(a, b).value, 2), round(ratio(a, b).noise, 2), difference(a, b)
    (1.16, 0.23, Change(value_ms=-0.15..., noise_ms=0.2...))   # after − before: within noise
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from engine.costs import estimate_bytes


@dataclass(frozen=True)
class Spread:
    """A median and the interquartile range (q1–q3) of the same samples, in ms."""

    median_ms: float
    q1_ms: float
    q3_ms: float
    samples: int = 0

    @staticmethod
    def of(samples_ms: Sequence[float]) -> "Spread":
        ms = np.asarray(list(samples_ms), dtype=float)
        if ms.size == 0:
            raise ValueError("Spread.of: no samples")
        q1, med, q3 = np.percentile(ms, [25, 50, 75])
        return Spread(float(med), float(q1), float(q3), int(ms.size))

    @staticmethod
    def exact(ms: float) -> "Spread":
        """A figure without samples (noise unknown: 0)."""
        return Spread(ms, ms, ms, 0)

    @staticmethod
    def total(parts: Iterable["Spread"]) -> "Spread":
        """The spread of a sum of measurements (kernels run one after another): medians add,
        and so do the ends of the ranges (as if they varied together: the wider, safe bound)."""
        parts = list(parts)
        return Spread(sum(p.median_ms for p in parts), sum(p.q1_ms for p in parts),
                      sum(p.q3_ms for p in parts), min((p.samples for p in parts), default=0))

    def scaled(self, k: float) -> "Spread":
        return Spread(self.median_ms * k, self.q1_ms * k, self.q3_ms * k, self.samples)

    @property
    def noise_ms(self) -> float:
        """The IQR: how far apart repeats of this measurement land (half of them within it)."""
        return self.q3_ms - self.q1_ms


@dataclass(frozen=True)
class Change:
    """after − before in ms, with the noise of both measurements."""

    value_ms: float
    noise_ms: float

    @property
    def significant(self) -> bool:
        return abs(self.value_ms) > self.noise_ms

    @property
    def verdict(self) -> str:
        """"faster", "slower" (time went down / up beyond the noise) or "within noise"."""
        if not self.significant:
            return "within noise"
        return "faster" if self.value_ms < 0 else "slower"


@dataclass(frozen=True)
class Ratio:
    """numerator / denominator, with the noise of both measurements carried over."""

    value: float
    noise: float

    @property
    def significant(self) -> bool:
        """Away from 1 beyond the noise."""
        return abs(self.value - 1.0) > self.noise


def difference(before: Spread, after: Spread) -> Change:
    """after − before; its noise is the two noises added."""
    return Change(after.median_ms - before.median_ms, before.noise_ms + after.noise_ms)


def ratio(numerator: Spread, denominator: Spread) -> Ratio:
    """numerator / denominator; relative noises add (first order)."""
    if denominator.median_ms <= 0:
        return Ratio(float("inf"), float("inf"))
    value = numerator.median_ms / denominator.median_ms
    rel = (numerator.noise_ms / numerator.median_ms if numerator.median_ms > 0 else 0.0) \
        + denominator.noise_ms / denominator.median_ms
    return Ratio(value, value * rel)


def moved(first: Spread, second: Spread) -> Change | None:
    """The change between two measurements of the same thing (onnxruntime in two compiles)
    when it is larger than their own noise, else None: the machine's state changed between
    them, and figures from the two compiles do not compare."""
    change = difference(first, second)
    return change if change.significant else None


@dataclass(frozen=True)
class Latency:
    """End-to-end wall-clock time of whole runs after warm-up."""

    median_ms: float
    min_ms: float
    max_ms: float
    p90_ms: float
    runs: int
    q1_ms: float | None = None  # None: made without the quartiles (the spread is then min–p90)
    q3_ms: float | None = None

    @staticmethod
    def of(samples_s: Sequence[float]) -> "Latency":
        ms = sorted(x * 1e3 for x in samples_s)
        s = Spread.of(ms)
        return Latency(s.median_ms, ms[0], ms[-1], float(np.percentile(ms, 90)), len(ms), s.q1_ms, s.q3_ms)

    @property
    def spread(self) -> Spread:
        if self.q1_ms is None or self.q3_ms is None:
            return Spread(self.median_ms, self.min_ms, self.p90_ms, self.runs)
        return Spread(self.median_ms, self.q1_ms, self.q3_ms, self.runs)


@dataclass(frozen=True)
class KernelTime:
    """One kernel's calls timed in place during real runs; `calls` is per inference and every
    figure but `total_ms` is per call."""

    name: str
    calls: int
    total_ms: float  # mean time per inference (all calls): nsys's "Total Time" over the runs
    mean_ms: float
    median_ms: float
    min_ms: float
    max_ms: float
    share: float  # of the summed kernel medians per inference (see shares())
    q1_ms: float | None = None  # quartiles per call
    q3_ms: float | None = None

    @property
    def spread(self) -> Spread:
        """Per call; without quartiles (hand-made rows) the spread is min–max."""
        low = self.q1_ms if self.q1_ms is not None else self.min_ms
        high = self.q3_ms if self.q3_ms is not None else self.max_ms
        return Spread(self.median_ms, low, high)

    @property
    def per_inference(self) -> Spread:
        """The median (and spread) of one inference's calls of this kernel."""
        return self.spread.scaled(self.calls)


def shares(times: Sequence[KernelTime]) -> dict[str, float]:
    """Kernel name -> its median per inference over the sum of those medians."""
    total = sum(t.per_inference.median_ms for t in times) or 1.0
    return {t.name: t.per_inference.median_ms / total for t in times}


def kernel_sum(times: Sequence[KernelTime]) -> Spread:
    """The kernels' medians per inference added up (not the end-to-end latency)."""
    return Spread.total(t.per_inference for t in times)


@dataclass(frozen=True)
class Work:
    """What a kernel computes and moves, from the operator graph's estimates (engine.costs)."""

    flops: int
    bytes: int

    def gflops(self, ms: float) -> float | None:
        return self.flops / (ms * 1e6) if ms > 0 and self.flops else None

    def gbytes(self, ms: float) -> float | None:
        return self.bytes / (ms * 1e6) if ms > 0 and self.bytes else None


def kernel_work(graph, ops: Iterable[str]) -> Work:
    """FLOPs of a kernel's operators, and the bytes it reads from outside and writes for
    outside (tensors passed between its own operators stay in the kernel: not counted).

        >>> kernel_work(graph, ["conv", "relu"])   # conv 1x3x8x8 -> 1x4x8x8 (3x3), relu fused
        Work(flops=..., bytes=<input + weights + bias + relu output>)
    """
    ops = set(ops)
    nodes = [graph.node(o) for o in ops if o in graph.dag]
    produced = {t.name for n in nodes for t in n.outputs}
    consumers: dict[str, set[str]] = {}
    for e in graph.edges:
        consumers.setdefault(e.tensor, set()).add(e.dst)
    reads = {t.name: t for n in nodes for t in n.inputs if t.name not in produced}
    writes = {t.name: t for n in nodes for t in n.outputs
              if not consumers.get(t.name) or consumers[t.name] - ops}
    return Work(sum(n.flops for n in nodes), estimate_bytes(list(reads.values()), list(writes.values())))
