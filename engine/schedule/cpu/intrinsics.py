"""Math intrinsics the llvm code generator cannot emit on vectors, and the rewrite that keeps
the loops calling them scalar.

TVM's llvm backend lowers a scalar `tirx.cosh` to a libm call, but has no lowering for a
vector of them: a vectorised loop calling one fails the build with "unknown intrinsic
tirx.cosh". Measured on TVM 0.27 (float32 and float64, every unary and binary float
intrinsic of `tvm.tirx` in a loop split by 8 and vectorised): only `sinh`, `cosh` and `fmod`
fail; exp, log*, sqrt, sin/cos/tan, tanh, the inverse (hyperbolic) functions, erf, sigmoid,
pow, atan2, rounding, isnan/isinf build. tests/test_cpu_intrinsics.py re-measures the list.

Run `serialize_unvectorizable(func)` on a scheduled PrimFunc (schedule_func does, after every
rule): each vectorised loop whose body calls one of them becomes a serial loop, which LLVM
compiles to scalar libm calls, as stock TVM's unscheduled build does. `root_powers` (also
run there) writes a pow with an exponent in quarters as square roots, which vectorise.
"""

from __future__ import annotations

import math

import tvm_ffi
from tvm import ir, tirx

# Ops of `tvm.tirx` the llvm codegen lowers only for scalars.
NO_VECTOR_LOWERING = frozenset({"tirx.sinh", "tirx.cosh", "tirx.fmod"})


def unvectorizable_calls(node) -> set[str]:
    """Names of the NO_VECTOR_LOWERING ops that `node` (a statement or PrimFunc) calls.

        >>> unvectorizable_calls(te.create_prim_func([A, te.compute((8,), lambda i: tirx.cosh(A[i]))]))
        {'tirx.cosh'}
    """
    found: set[str] = set()

    def visit(call):
        if isinstance(call.op, ir.Op) and call.op.name in NO_VECTOR_LOWERING:
            found.add(call.op.name)

    tvm_ffi.structural_walk(node, (ir.Call, visit), order="pre")
    return found


def serialize_unvectorizable(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """`func` with every vectorised loop that calls a NO_VECTOR_LOWERING op made serial
    (the same object when there is none)."""
    if not unvectorizable_calls(func):
        return func

    def serial(loop: tirx.For):
        if loop.kind != tirx.ForKind.VECTORIZED or not unvectorizable_calls(loop.body):
            return loop
        return tirx.For(loop.loop_var, loop.min, loop.extent, tirx.ForKind.SERIAL, loop.body,
                        loop.thread_binding, loop.annotations, loop.step, loop.span)

    return tvm_ffi.structural_map(func, (tirx.For, serial))


# LLVM lowers a vector `pow` to one libm powf call per lane: inception_v1's local response
# normalisations (x / pow(k + alpha * window sum, 0.75)) took 1.27 ms of its 8.2 ms, 1.6 ns
# per element (2-core Zen 5, AVX-512). An exponent in quarters is square roots and products,
# which vectorise (vsqrtps): within 2 ulp of powf.
MAX_ROOT_POWER = 2.0


def _quarters(exponent) -> int | None:
    """4 * `exponent` when it is a float constant in quarters, 0 < |exponent| <= MAX_ROOT_POWER."""
    if not isinstance(exponent, tirx.FloatImm):
        return None
    q = exponent.value * 4
    return int(q) if math.isfinite(q) and q == int(q) and 0 < abs(q) <= 4 * MAX_ROOT_POWER else None


def _root_power(call: ir.Call):
    if not (isinstance(call.op, ir.Op) and call.op.name == "tirx.pow" and len(call.args) == 2):
        return call
    q = _quarters(call.args[1])
    if q is None:
        return call
    base = tirx.Var("pow_base", call.args[0].ty)
    whole, quarters = divmod(abs(q), 4)
    factors = [base] * whole
    if quarters in (2, 3):
        factors.append(tirx.sqrt(base))
    if quarters in (1, 3):
        factors.append(tirx.sqrt(tirx.sqrt(base)))
    value = factors[0]
    for f in factors[1:]:
        value = value * f
    if q < 0:
        value = tirx.const(1.0, str(call.ty)) / value
    return tirx.Let(base, call.args[0], value)


def root_powers(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """`func` with every `pow(x, c)`, c a constant in quarters with |c| <= MAX_ROOT_POWER,
    written as products of x, sqrt(x) and sqrt(sqrt(x)) (the same NaN for x < 0 and a
    fractional c, and the same 0 and inf)."""
    return tvm_ffi.structural_map(func, (ir.Call, _root_power))


__all__ = ["NO_VECTOR_LOWERING", "unvectorizable_calls", "serialize_unvectorizable", "root_powers"]
