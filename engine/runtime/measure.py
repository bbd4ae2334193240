"""Timing: per-kernel times measured in place during real runs, end-to-end latency, onnxruntime.

Kernel calls are timed through the Relax VM's instrument hook (TVM 0.27 has no VM
profiler), synchronising the device around each call, and aggregated like nsys's kernel
summary, with medians and interquartile spreads (engine.timing: the facts and their statistics).
Warm-up runs are never recorded.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from engine.timing import KernelTime, Latency, Spread, shares  # noqa: F401 (the facts: re-exported)


def time_runs(fn: Callable[[], object], runs: int, warmup: int = 3) -> Latency:
    """Median-of-N wall-clock latency after warm-up."""
    return Latency.of(sample_runs(fn, runs, warmup))


def sample_runs(fn: Callable[[], object], runs: int, warmup: int = 3) -> list[float]:
    """Wall-clock seconds of `runs` calls of `fn`, after `warmup` calls not recorded."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(max(runs, 1)):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def on_kernel_calls(vm, run: Callable[[], object], names: set[str], before: bool,
                    record: Callable[[str, tuple], None]) -> None:
    """Run `run` once, calling `record(kernel, args)` at each call of a kernel in `names`,
    before it runs (its inputs) or after (its outputs written)."""
    from tvm.runtime.vm import VMInstrumentReturnKind

    def instrument(func, func_symbol, before_run, ret_value, *args):
        name = str(func_symbol)
        if bool(before_run) == before and name in names:
            record(name, args)
        return VMInstrumentReturnKind.NO_OP

    vm.set_instrument(instrument)
    try:
        run()
    finally:
        vm.set_instrument(None)


def profile_kernels(vm, run: Callable[[], object], runs: int, sync: Callable[[], None],
                    names: set[str]) -> tuple[KernelTime, ...]:
    """Time every call of the kernels `names` in place during `runs` real runs of `run`."""
    from tvm.runtime.vm import VMInstrumentReturnKind

    samples: dict[str, list[float]] = {}
    state = {"start": 0.0}

    def instrument(func, func_symbol, before_run, ret_value, *args):
        if str(func_symbol) not in names:  # VM builtins (allocation, views)
            return VMInstrumentReturnKind.NO_OP
        sync()
        if before_run:
            state["start"] = time.perf_counter()
        else:
            samples.setdefault(str(func_symbol), []).append(time.perf_counter() - state["start"])
        return VMInstrumentReturnKind.NO_OP

    vm.set_instrument(instrument)
    try:
        run()  # warm-up, not recorded
        samples.clear()
        for _ in range(max(runs, 1)):
            run()
    finally:
        vm.set_instrument(None)
    return aggregate(samples, runs=max(runs, 1))


def aggregate(samples: dict[str, list[float]], runs: int) -> tuple[KernelTime, ...]:
    """nsys-style rows (samples in seconds), largest median per inference first; `calls` is
    per inference, `share` of the summed medians per inference (engine.timing.shares)."""
    rows = []
    for name, ts in samples.items():
        ms = np.asarray(ts) * 1e3
        s = Spread.of(ms)
        rows.append(KernelTime(name, max(len(ts) // runs, 1), float(ms.sum()) / runs, float(ms.mean()),
                               s.median_ms, float(ms.min()), float(ms.max()), 0.0, s.q1_ms, s.q3_ms))
    share = shares(rows)
    rows = [replace(r, share=share[r.name]) for r in rows]
    return tuple(sorted(rows, key=lambda r: -r.per_inference.median_ms))


def onnxruntime_session(proto_bytes: bytes, threads: int):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(proto_bytes, opts, providers=["CPUExecutionProvider"])


@dataclass(frozen=True)
class IsolatedTime:
    """One kernel call timed alone, repeated: its median and interquartile range per call."""

    kernel: str
    time: Spread

    @property
    def median_ms(self) -> float:
        return self.time.median_ms

    @property
    def spread_ms(self) -> float:
        """The measurement's noise (its interquartile range)."""
        return self.time.noise_ms


def time_kernels_isolated(executable, vm, run: Callable[[], object], names: set[str], dev,
                          repeat: int = 25) -> dict[str, IsolatedTime]:
    """Time per call of each kernel in `names`, each timed alone by the runtime's
    `time_evaluator` (its timer in C++, the first call discarded) on the arguments of its
    first call in one real run of `run`. Unlike `profile_kernels`, no per-call hook cost is
    counted, so a fused kernel and its members compare fairly however small they are.

    Each sample is one call (number=1), as in a real run: back-to-back calls for a few ms
    (min_repeat_ms) measured 2-3x slower than single calls on a loaded 2-core machine (the
    pool's threads preempted mid-barrier), which no real run of the model sees."""
    import tvm

    captured: dict[str, list] = {}

    def record(name: str, args: tuple) -> None:
        if name not in captured:
            captured[name] = [tvm.runtime.tensor(a.numpy(), dev) if hasattr(a, "numpy") else a for a in args]

    on_kernel_calls(vm, run, names, before=True, record=record)
    libs = _modules(executable.mod)
    out: dict[str, IsolatedTime] = {}
    for name, args in captured.items():
        lib = next((m for m in libs if m.implements_function(name)), None)
        if lib is None:
            continue
        timer = lib.time_evaluator(name, dev, number=1, repeat=repeat)
        out[name] = IsolatedTime(name, Spread.of(np.asarray(timer(*args).results) * 1e3))
    return out


def _modules(root) -> list:
    todo, out = [root], []
    while todo:
        mod = todo.pop()
        out.append(mod)
        todo.extend(mod.imports)
    return out
