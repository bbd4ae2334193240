"""ReduceMax and ReduceMin whose empty or all-infinite reductions give +-inf.

TVM lowers relax max/min with the dtype's finite extreme as the reduction's start value:
the max of a row of -inf comes out -3.4e38, not -inf (numpy, onnxruntime and ONNX's
reference: -inf), and so does a max over an empty axis. ONNX's expanded Attention tests
detect fully masked rows by `ReduceMax(scores) == -inf`: with TVM's value the check
fails and the softmax's nan leaks out. Here the start value is -inf/+inf for floats (the
integers keep TVM's op: their finite extreme is right); axes as TVM's converter takes them (the `axes`
attribute or a constant input), and a runtime axes input is refused the same way."""

from __future__ import annotations

import numpy as np
from tvm import relax, te, tirx
from tvm.ir import Constant

from engine.converters.dtypes import is_floating


def _axes(inputs, attrs, rank: int) -> list[int] | None:
    """The reduced axes, [] for 'no-op', None for 'all'."""
    if len(inputs) > 1 and inputs[1] is not None:
        if not isinstance(inputs[1], Constant):
            raise ValueError("Only constant axes currently supported")
        axes = [int(a) for a in np.asarray(inputs[1].value.numpy()).reshape(-1)]
    else:
        axes = list(attrs.get("axes", ()))
    if not axes:
        return [] if attrs.get("noop_with_empty_axes", 0) else None
    return sorted({a % rank for a in axes})


def _extremum(is_max: bool):
    def convert(inputs, attrs):
        x = inputs[0]
        shape = [int(d) for d in x.ty.shape.values]
        axes = _axes(inputs, attrs, len(shape))
        if axes == []:
            return x
        axes = list(range(len(shape))) if axes is None else axes
        keepdims = bool(attrs.get("keepdims", 1))
        if not is_floating(x):  # integers: TVM's start value is right
            return (relax.op.max if is_max else relax.op.min)(x, axes, keepdims)
        name = "max" if is_max else "min"
        return relax.BlockBuilder.current().emit_te(_reduce, x, axes, keepdims, is_max, primfunc_name_hint=name)

    return convert


def _reduce(x: te.Tensor, axes: list[int], keepdims: bool, is_max: bool) -> te.Tensor:
    start = tirx.const(-np.inf if is_max else np.inf, x.dtype)
    combine = tirx.max if is_max else tirx.min
    reducer = te.comm_reducer(lambda a, b: combine(a, b), lambda t: start, name="max" if is_max else "min")
    shape = list(x.shape)
    kept = [k for k in range(len(shape)) if k not in axes]
    out_shape = [1 if k in axes else shape[k] for k in range(len(shape))] if keepdims else [shape[k] for k in kept]
    red = {k: te.reduce_axis((0, shape[k]), name=f"r{k}") for k in axes}

    def element(*index):
        if keepdims:
            at = [red[k] if k in red else index[k] for k in range(len(shape))]
        else:
            outer = dict(zip(kept, index))
            at = [red[k] if k in red else outer[k] for k in range(len(shape))]
        return reducer(x[tuple(at)], axis=[red[k] for k in axes])

    return te.compute(out_shape, element, name=f"T_{'max' if is_max else 'min'}")


EXTREMA = {"ReduceMax": _extremum(True), "ReduceMin": _extremum(False)}
