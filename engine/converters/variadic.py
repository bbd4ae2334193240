"""Variadic elementwise ops (Sum, Max, Min, Mean) as a chain of binary ops.

TVM's frontend stacks the inputs and reduces over the new axis: a copy of every input and a
reduction kernel that no conv epilogue can absorb (ResNet's residual `Sum` then costs a
stack, a sum and a separate ReLU kernel per unit). Pairwise `add` broadcasts the same way
(ONNX's multidirectional broadcasting) and fuses into the producer's epilogue.

Float Max and Min propagate nan, as onnxruntime, numpy and torch do: TVM's maximum lowers
to `a > b ? a : b`, which gives max(nan, 1) = 1 but max(1, nan) = nan."""

from __future__ import annotations

import functools

from tvm import relax

from engine.converters.dtypes import is_floating


def _pairwise(op):
    def convert(inputs, attrs):
        del attrs
        return functools.reduce(op, list(inputs))

    return convert


def _extremum(op):
    """Max or Min over the inputs; floats propagate nan (nan + x is nan)."""
    def combine(a, b):
        either = relax.op.logical_or(relax.op.isnan(a), relax.op.isnan(b))
        return relax.op.where(either, relax.op.add(a, b), op(a, b))

    def convert(inputs, attrs):
        del attrs
        floats = is_floating(inputs[0])
        return functools.reduce(combine if floats else op, list(inputs))

    return convert


def _mean(inputs, attrs):
    total = _pairwise(relax.op.add)(inputs, attrs)
    if len(inputs) == 1:
        return total
    return relax.op.divide(total, relax.const(float(len(inputs)), inputs[0].ty.dtype))


VARIADIC = {
    "Sum": _pairwise(relax.op.add),
    "Max": _extremum(relax.op.maximum),
    "Min": _extremum(relax.op.minimum),
    "Mean": _mean,
}
