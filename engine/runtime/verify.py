"""Numerical verification against onnxruntime, and finding the first kernel that differs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class OutputCheck:
    name: str
    max_abs: float
    max_rel: float
    passed: bool


@dataclass(frozen=True)
class Verification:
    passed: bool
    rtol: float
    atol: float
    outputs: tuple[OutputCheck, ...]
    first_bad_kernel: str | None = None

    @property
    def max_abs(self) -> float:
        return max((o.max_abs for o in self.outputs), default=0.0)

    @property
    def max_rel(self) -> float:
        return max((o.max_rel for o in self.outputs), default=0.0)

    def summary(self) -> str:
        verdict = "matches onnxruntime" if self.passed else "DIFFERS from onnxruntime"
        text = (f"{verdict}: max abs err {self.max_abs:.2e}, max rel err {self.max_rel:.2e} "
                f"(rtol {self.rtol:g}, atol {self.atol:g})")
        if self.first_bad_kernel:
            text += f"; first kernel whose output differs: {self.first_bad_kernel}"
        return text


def compare_outputs(names, expected, actual, rtol: float, atol: float) -> Verification:
    checks = []
    for name, exp, act in zip(names, expected, actual):
        exp = np.asarray(exp)
        act = np.asarray(act).reshape(exp.shape) if np.asarray(act).size == exp.size else np.asarray(act)
        if act.shape != exp.shape:
            checks.append(OutputCheck(name, float("inf"), float("inf"), False))
            continue
        diff = np.abs(act.astype(np.float64) - exp.astype(np.float64))
        rel = diff / (np.abs(exp) + 1e-12)
        ok = bool(np.all(np.isfinite(act)) and np.allclose(act, exp, rtol=rtol, atol=atol))
        checks.append(OutputCheck(name, float(diff.max(initial=0)), float(np.where(diff > atol, rel, 0).max(initial=0)), ok))
    if len(actual) != len(expected):
        checks.append(OutputCheck("<output count>", float("inf"), float("inf"), False))
    return Verification(all(c.passed for c in checks), rtol, atol, tuple(checks))


def capture_kernel_outputs(vm, run, kernel_names: set[str]) -> list[tuple[str, np.ndarray]]:
    """Run once, keeping a copy of each kernel call's output (its last argument)."""
    from tvm.runtime.vm import VMInstrumentReturnKind

    captured: list[tuple[str, np.ndarray]] = []

    def instrument(func, func_symbol, before_run, ret_value, *args):
        if not before_run and str(func_symbol) in kernel_names and args:
            captured.append((str(func_symbol), args[-1].numpy().copy()))
        return VMInstrumentReturnKind.NO_OP

    vm.set_instrument(instrument)
    try:
        run()
    finally:
        vm.set_instrument(None)
    return captured


def locate_mismatch(ctx, rtol: float | None = None) -> str | None:
    """Compare every kernel's output with the unscheduled build's, in call order; return the
    first kernel (with its operators) that differs, or None when none can be singled out.
    `ctx`: the pipeline's CompileContext after its verify stage ran the model (ctx.run)."""
    import tvm
    from tvm import relax

    from engine.kernels import list_kernels
    from engine.targets import HOST_TARGET, get_target

    rtol = rtol or ctx.options.rtol
    reference, run = ctx.unscheduled, ctx.run
    if reference is None or run is None:
        return None
    host = get_target(HOST_TARGET).target(None)
    ref_vm = relax.VirtualMachine(tvm.compile(reference, target=host), tvm.cpu())
    ref_names = {k.func for k in list_kernels(reference, [])}
    ref_args = [tvm.runtime.tensor(run.inputs[s.name], tvm.cpu()) for s in ctx.model.inputs]
    ref = capture_kernel_outputs(ref_vm, lambda: ref_vm["main"](*ref_args), ref_names)
    got = capture_kernel_outputs(run.vm, lambda: run.vm["main"](*run.args), {k.func for k in ctx.kernels})
    for k, ((name, a), (_, b)) in enumerate(zip(got, ref)):
        if a.shape == b.shape and not np.allclose(a, b, rtol=rtol, atol=ctx.options.atol * 10):
            ops = ctx.kernels[k].ops if k < len(ctx.kernels) else ()
            labels = ", ".join(ctx.graph.node(o).label for o in ops)
            return f"{name} (call {k}{'; ops ' + labels if labels else ''})"
    return None
