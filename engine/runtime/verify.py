"""Numerical verification against onnxruntime, and finding the first kernel that differs.

What a pass means, per model output (`check_tensor`):
- values: every element within `atol_used + rtol * |expected|`. `atol_used` follows the
  output's scale S = max|expected|: min(atol, rtol * S), so an output far below atol is still
  compared relatively, and never less than the rounding noise of its dtype at that scale
  (8 ulps * S), so a huge output is not failed for rounding. nan must be where onnxruntime
  has nan and an infinity must have the same sign; bool and integer outputs compare exactly.
- informative: the output moves with the input (onnxruntime on a second seeded input changes
  it by more than DEPENDENCE_REL of its scale) and is not all below atol. An output that
  moves with the input must also have its error small against that movement (at most
  10 * rtol of it). An output that is not informative proves nothing: the verify stage then
  compares every kernel with the unscheduled build (`compare_kernels`) instead.
- special values: for models with operators that treat inf, nan or -0.0 specially
  (SPECIAL_VALUE_OPS), a second run with those values mixed into the inputs.

    >>> e = np.full(4, 2e-9, np.float32)
    >>> check_tensor("y", e, e * 2, rtol=1e-3, atol=1e-4).passed   # off by 100%, below atol
    False
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

# An output depends on its input when a second input moves it by more than this share of
# its scale (float32 rounding is ~1e-7 of it; a correct compile's error up to ~2e-6).
DEPENDENCE_REL = 1e-3
# Error allowed against how much the input moves the output, in units of rtol.
SIGNAL_TOL = 10.0
NOISE_ULPS = 8  # rounding noise allowed at an output's scale
# Operators whose result on inf, -inf, nan or -0.0 is specified and that random inputs never
# exercise: a model with one of them is verified a second time with those values mixed in.
SPECIAL_VALUE_OPS = frozenset({"IsInf", "IsNaN", "Where", "Max", "Min", "Abs", "Sign",
                               "Reciprocal", "Div"})


@dataclass(frozen=True)
class OutputCheck:
    """One tensor compared with its reference. `max_rel` is over the `rel_elements` elements
    where rtol governs the tolerance (rtol * |expected| > atol_used) only: 0.0 when none."""

    name: str
    max_abs: float  # max |actual - expected| over elements finite in both
    max_rel: float
    passed: bool  # values within tolerance (and small against the spread, when measured)
    scale: float = 0.0  # max |expected| over finite elements
    atol_used: float = 0.0  # the absolute tolerance applied (follows the scale)
    rel_elements: int = 0  # elements where rtol governs: |expected| > atol_used / rtol
    elements: int = 0
    mismatches: int = 0  # elements outside the tolerance (or non-finite where they should not be)
    nonfinite_mismatches: int = 0  # of those, a nan or an infinity where the reference has another value
    exact: bool = False  # bool or integer: compared for equality
    spread: float | None = None  # max |expected - expected on a second input|; None: not measured
    depends_on_input: bool | None = None  # spread beyond DEPENDENCE_REL of scale; None: not measured
    below_atol: bool = False  # every |expected| <= atol: an absolute comparison says nothing

    @property
    def informative(self) -> bool:
        """Whether matching on this output shows anything: it moves with the input (or that
        was not measured) and is not all below atol."""
        return self.depends_on_input is not False and not self.below_atol

    def problem(self) -> str:
        """Why the output is not informative ('' when it is)."""
        parts = []
        if self.depends_on_input is False:
            parts.append(f"does not depend on the input (a second input moves it by {self.spread:.2e} "
                         f"at scale {self.scale:.2e})")
        if self.below_atol:
            parts.append(f"is all below atol (scale {self.scale:.2e})")
        return f"output '{self.name}' " + " and ".join(parts) if parts else ""

    def figures(self) -> str:
        """The error figures, each saying what it is."""
        if self.exact:
            text = f"compared exactly: {self.mismatches} of {self.elements} elements differ"
        else:
            share = f" = {self.max_abs / self.scale:.1e} of" if self.scale > 0 else ","
            text = f"max abs err {self.max_abs:.2e}{share} output scale {self.scale:.2e} (atol used {self.atol_used:.2e})"
            if self.rel_elements:
                text += (f", max rel err {self.max_rel:.2e} where rtol governs "
                         f"({self.rel_elements} of {self.elements} elements)")
            else:
                text += ", rtol governs no element: none compared relatively"
            if self.mismatches:
                text += f", {self.mismatches} of {self.elements} elements outside tolerance"
            if self.nonfinite_mismatches:
                text += (f" ({self.nonfinite_mismatches} of them a nan or an infinity on one side only, "
                         "which the max errors leave out)")
        if self.spread is not None:
            text += f"; a second input moves it by {self.spread:.2e}"
            if self.spread > 0 and not self.exact:
                text += f" (the error is {self.max_abs / self.spread:.1e} of that)"
        return text


@dataclass(frozen=True)
class KernelComparison:
    """Every kernel call's outputs compared with the unscheduled build's on the same input."""

    compared: int  # kernel calls whose outputs were compared
    total: int  # kernel calls of the compiled model
    first_bad: str | None  # the first call (with its operators) whose output differs


@dataclass(frozen=True)
class Verification:
    passed: bool
    rtol: float
    atol: float
    outputs: tuple[OutputCheck, ...]
    first_bad_kernel: str | None = None
    kernels_compared: int = 0  # kernel calls compared with the unscheduled build (0: not needed)
    kernels_total: int = 0
    kernels_checked: bool = False  # some output proved nothing: kernels compared (or tried)
    special_values: tuple[OutputCheck, ...] = ()  # run with inf/-inf/nan/-0.0 mixed in; () not run
    special_ops: tuple[str, ...] = ()  # the operators that asked for that run
    notes: tuple[str, ...] = ()

    @property
    def max_abs(self) -> float:
        return max((o.max_abs for o in self.outputs), default=0.0)

    @property
    def max_rel(self) -> float:
        """Over elements with |expected| > atol used only; see `rel_elements`."""
        return max((o.max_rel for o in self.outputs), default=0.0)

    @property
    def rel_elements(self) -> int:
        return sum(o.rel_elements for o in self.outputs)

    @property
    def values_match(self) -> bool:
        return all(o.passed for o in self.outputs) and all(o.passed for o in self.special_values)

    @property
    def uninformative(self) -> tuple[OutputCheck, ...]:
        return tuple(o for o in self.outputs if not o.informative)

    def with_kernels(self, comparison: KernelComparison | None) -> Verification:
        """The verdict once every kernel was compared with the unscheduled build's because
        some output proves nothing (`comparison` None: there was no build to compare with)."""
        if comparison is None:
            counted = "no kernel: no unscheduled build to compare with"
            comparison = KernelComparison(0, 0, None)
            enough = False
        elif not comparison.total:
            counted = "no kernel: the compiled model runs none (its outputs are constants, compared above)"
            enough = True
        else:
            counted = ("compared the one kernel" if comparison.total == 1 == comparison.compared else
                       f"compared all {comparison.total} kernels" if comparison.compared == comparison.total else
                       f"compared {comparison.compared} of {comparison.total} kernels (the others have no "
                       "same-shaped output in the unscheduled build)")
            counted += " against the unscheduled build instead"
            enough = comparison.compared > 0
        notes = tuple(f"{o.problem()}: {counted}" for o in self.uninformative)
        passed = self.values_match and comparison.first_bad is None and enough
        return replace(self, passed=passed, first_bad_kernel=comparison.first_bad, kernels_checked=True,
                       kernels_compared=comparison.compared, kernels_total=comparison.total,
                       notes=self.notes + notes)

    def with_special_values(self, special: Verification, ops: tuple[str, ...]) -> Verification:
        """Add the run with inf, -inf, nan and -0.0 in the inputs (asked for by `ops`)."""
        verdict = "match" if special.values_match else "DIFFER"
        note = (f"inputs with inf, -inf, nan and -0.0 mixed in (the model has {', '.join(ops)}): "
                f"outputs {verdict}")
        if not special.values_match:
            note += " on " + "; ".join(f"{o.name} ({o.figures()})" for o in special.outputs if not o.passed)
        return replace(self, passed=self.passed and special.values_match, special_values=special.outputs,
                       special_ops=ops, notes=self.notes + (note,))

    def figures(self) -> str:
        """The worst output's error figures (named when there are several)."""
        if not self.outputs:
            return "no outputs"
        worst = max(self.outputs, key=lambda o: (not o.passed, o.max_abs / max(o.atol_used + o.scale * self.rtol, 1e-300)))
        return (f"{worst.name}: " if len(self.outputs) > 1 else "") + worst.figures()

    def summary(self) -> str:
        if self.passed:
            verdict = "matches onnxruntime"
        elif self.values_match and self.first_bad_kernel is None:
            verdict = "NOT VERIFIED against onnxruntime"
        else:
            verdict = "DIFFERS from onnxruntime"
        text = f"{verdict}: {self.figures()} (rtol {self.rtol:g}, atol {self.atol:g})"
        if self.first_bad_kernel:
            text += f"; first kernel whose output differs: {self.first_bad_kernel}"
        if not self.passed and not self.kernels_checked and self.uninformative:
            text += "; " + "; ".join(o.problem() for o in self.uninformative)
        for note in self.notes:
            text += f"; {note}"
        return text


def check_tensor(name: str, expected, actual, rtol: float, atol: float, other=None,
                 noise_ulps: int = NOISE_ULPS) -> OutputCheck:
    """Compare one tensor (see the module docstring). `other`: the reference on a second
    input, to measure whether and how much the tensor moves with the input."""
    exp, act = np.asarray(expected), np.asarray(actual)
    if act.size == exp.size:
        act = act.reshape(exp.shape)
    if act.shape != exp.shape:
        return OutputCheck(name, float("inf"), float("inf"), False, elements=exp.size)
    e, a = exp.astype(np.float64), act.astype(np.float64)
    o = None if other is None else np.asarray(other).astype(np.float64).reshape(exp.shape)
    if not np.issubdtype(exp.dtype, np.floating):  # bool, integers: exact
        diff = np.abs(a - e)
        spread = None if o is None else float(np.abs(e - o).max(initial=0))
        bad = int(np.count_nonzero(a != e))
        return OutputCheck(name, float(diff.max(initial=0)), 0.0, bad == 0, scale=float(np.abs(e).max(initial=0)),
                           elements=exp.size, mismatches=bad, exact=True, spread=spread,
                           depends_on_input=None if spread is None else spread > 0)
    finite = np.isfinite(e)
    both = finite & np.isfinite(a)
    # Outside `both`: nan where onnxruntime has nan, infinities equal (same sign).
    special_ok = both | (a == e) | (np.isnan(a) & np.isnan(e))
    scale = float(np.abs(e[finite]).max(initial=0))
    noise = noise_ulps * float(np.finfo(exp.dtype).eps) * scale
    atol_used = max(min(atol, rtol * scale), noise)
    diff = np.abs(np.where(both, a, 0.0) - np.where(both, e, 0.0))
    within = diff <= atol_used + rtol * np.abs(np.where(both, e, 0.0))
    bad = int(np.count_nonzero(~(within & special_ok)))
    rel = both & (rtol * np.abs(e) > atol_used)
    max_rel = float((diff[rel] / np.abs(e[rel])).max(initial=0))
    max_abs = float(diff.max(initial=0))
    spread = depends = None
    signal_ok = True
    if o is not None:
        moved = finite & np.isfinite(o)
        spread = float(np.abs(np.where(moved, e, 0.0) - np.where(moved, o, 0.0)).max(initial=0))
        threshold = max(DEPENDENCE_REL, 64 * float(np.finfo(exp.dtype).eps)) * scale
        depends = spread > threshold if scale > 0 else spread > 0
        signal_ok = not depends or max_abs <= max(SIGNAL_TOL * rtol * spread, atol_used)  # rtol 0: the noise floor
    return OutputCheck(name, max_abs, max_rel, bad == 0 and signal_ok, scale=scale,
                       atol_used=atol_used, rel_elements=int(rel.sum()), elements=exp.size,
                       mismatches=bad, nonfinite_mismatches=int(np.count_nonzero(~special_ok)), spread=spread,
                       depends_on_input=depends, below_atol=scale <= atol)


def compare_outputs(names, expected, actual, rtol: float, atol: float, other=None) -> Verification:
    """Compare the model's outputs. `other`: onnxruntime's outputs on a second input (without
    it, whether an output depends on the input is not known). Passes only when every output
    matches and is informative: the verify stage turns an uninformative output into a
    kernel-by-kernel comparison (`Verification.with_kernels`)."""
    others = list(other) if other is not None else [None] * len(expected)
    checks = [check_tensor(name, exp, act, rtol, atol, oth)
              for name, exp, act, oth in zip(names, expected, actual, others)]
    if len(actual) != len(expected):
        checks.append(OutputCheck("<output count>", float("inf"), float("inf"), False))
    return Verification(all(c.passed and c.informative for c in checks), rtol, atol, tuple(checks))


def special_value_ops(model) -> tuple[str, ...]:
    """The operators of `model` (engine.model.Model) that ask for a special-values run."""
    return tuple(sorted({n.op_type for n in model.proto.graph.node} & SPECIAL_VALUE_OPS))


# --- kernel by kernel ---------------------------------------------------------------------

def output_counts(mod) -> dict[str, int]:
    """Kernel (PrimFunc) name -> how many outputs its calls in `main` write: its last
    arguments, in destination-passing style."""
    from tvm import relax

    counts = {}
    for block in mod["main"].body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call) and getattr(v.op, "name", "") == "relax.call_tir":
                counts[v.args[0].name_hint] = len(b.var.ty.fields) if hasattr(b.var.ty, "fields") else 1
    return counts


def output_arrays(value) -> list[np.ndarray]:
    """A VM's `main` result (one tensor, or a tuple of them) as numpy arrays."""
    if isinstance(value, (list, tuple)) or type(value).__name__ in ("Array", "Tuple"):
        return [v.numpy() for v in value]
    return [value.numpy()]


def capture_kernel_outputs(vm, run, kernel_names: set[str],
                           outputs: dict[str, int] | None = None) -> list[tuple[str, np.ndarray]]:
    """Run once, keeping a copy of each kernel call's outputs (its last `outputs[name]`
    arguments, 1 by default), one (kernel, array) entry per output in call order."""
    from engine.runtime.measure import on_kernel_calls

    captured: list[tuple[str, np.ndarray]] = []

    def record(name: str, args: tuple) -> None:
        n = (outputs or {}).get(name, 1)
        captured.extend((name, a.numpy().copy()) for a in args[len(args) - n:] if hasattr(a, "numpy"))

    on_kernel_calls(vm, run, kernel_names, before=False, record=record)
    return captured


def kernel_call_outputs(vm, args, mod, names: set[str]) -> list[tuple[str, list[np.ndarray]]]:
    """Run `vm` (built from `mod`) on `args` once: each call of a kernel in `names`, in call
    order, with copies of its outputs."""
    counts = output_counts(mod)
    flat = capture_kernel_outputs(vm, lambda: vm["main"](*args), names, counts)
    calls, k = [], 0
    while k < len(flat):
        n = counts.get(flat[k][0], 1)
        calls.append((flat[k][0], [x for _, x in flat[k:k + n]]))
        k += n
    return calls


def reference_kernel_outputs(reference, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Every kernel output of the unscheduled module `reference`, built for the host CPU and
    run on `inputs` (the model's inputs in order), in call order."""
    import tvm
    from tvm import relax

    from engine.kernels import list_kernels
    from engine.targets import HOST_TARGET, get_target

    vm = relax.VirtualMachine(tvm.compile(reference, target=get_target(HOST_TARGET).target(None)), tvm.cpu())
    args = [tvm.runtime.tensor(x, tvm.cpu()) for x in inputs]
    calls = kernel_call_outputs(vm, args, reference, {k.func for k in list_kernels(reference, [])})
    return [x for _, outs in calls for x in outs]


def first_unmatched(got: list[tuple[str, list[np.ndarray]]], ref: list[np.ndarray], rtol: float,
                    atol: float, label=lambda call, name: name) -> KernelComparison:
    """Match each compiled call's outputs with a same-shaped reference output that agrees
    (tried nearest its position first: fusion and scheduling keep order only roughly). The
    first call with an output that agrees with none differs; a call whose output has no
    same-shaped reference output at all (a changed layout) is not compared."""
    compared, used = 0, set()
    position = 0
    for call, (name, outs) in enumerate(got):
        comparable = True
        for out in outs:
            same = [j for j, r in enumerate(ref) if r.shape == out.shape and r.dtype == out.dtype and j not in used]
            if not same:
                comparable = False
                continue
            same.sort(key=lambda j: abs(j - position))
            match = next((j for j in same if check_tensor(name, ref[j], out, rtol, atol, noise_ulps=64).passed), None)
            if match is None:
                return KernelComparison(compared, len(got), label(call, name))
            used.add(match)
            position = match + 1
        compared += comparable
    return KernelComparison(compared, len(got), None)


def compare_kernels(ctx, rtol: float | None = None) -> KernelComparison | None:
    """Every kernel call of the compiled model (ctx.run) against the unscheduled build's
    kernels on the same input; None when the context has no reference or no run.
    `ctx`: the pipeline's CompileContext after its verify stage ran the model."""
    reference, run = ctx.unscheduled, ctx.run
    if reference is None or run is None:
        return None
    ref = reference_kernel_outputs(reference, [run.inputs[s.name] for s in ctx.model.inputs])
    got = kernel_call_outputs(run.vm, run.args, ctx.mod, {k.func for k in ctx.kernels})

    def label(call: int, name: str) -> str:
        kernel = ctx.kernels[call] if call < len(ctx.kernels) and ctx.kernels[call].func == name else None
        labels = ", ".join(ctx.graph.node(o).label for o in kernel.ops) if kernel else ""
        return f"{name} (call {call}{'; ops ' + labels if labels else ''})"

    return first_unmatched(got, ref, rtol or ctx.options.rtol, ctx.options.atol * 10, label)


def locate_mismatch(ctx, rtol: float | None = None) -> str | None:
    """The first kernel (with its operators) whose output differs from the unscheduled
    build's, or None when none can be singled out."""
    comparison = compare_kernels(ctx, rtol)
    return comparison.first_bad if comparison is not None else None
