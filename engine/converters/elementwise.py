"""Elementwise ops TVM 0.27's ONNX frontend lacks or gets wrong: Celu (opset 12) and Swish
(24), written with the ops their ONNX function bodies use, in the input's dtype; Sign of a
float nan, which TVM's sign makes 0 (onnxruntime and numpy: nan)."""

from __future__ import annotations

from tvm import relax
from tvm.relax import op as R

from engine.converters.dtypes import is_floating


def _celu(inputs, attrs):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    x = inputs[0]
    dtype = x.ty.dtype
    alpha = relax.const(float(attrs.get("alpha", 1.0)), dtype)
    zero, one = relax.const(0.0, dtype), relax.const(1.0, dtype)
    negative = R.multiply(alpha, R.subtract(R.exp(R.divide(x, alpha)), one))
    return R.add(R.maximum(zero, x), R.minimum(zero, negative))


def _swish(inputs, attrs):
    """x * sigmoid(alpha * x)."""
    x = inputs[0]
    alpha = relax.const(float(attrs.get("alpha", 1.0)), x.ty.dtype)
    return R.multiply(x, R.sigmoid(R.multiply(alpha, x)))


def _sign(inputs, attrs):
    del attrs
    x = inputs[0]
    if not is_floating(x):
        return R.sign(x)
    return R.where(R.isnan(x), x, R.sign(x))


ELEMENTWISE = {"Celu": _celu, "Swish": _swish, "Sign": _sign}
