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
compiles to scalar libm calls, as stock TVM's unscheduled build does.
"""

from __future__ import annotations

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


__all__ = ["NO_VECTOR_LOWERING", "unvectorizable_calls", "serialize_unvectorizable"]
