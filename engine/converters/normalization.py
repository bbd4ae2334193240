"""LpNormalization, which TVM 0.27's ONNX frontend lacks.

x / ||x||_p along `axis` (p 1 or 2); a zero norm gives 0, as ONNX's test data expects
(the plain quotient would be nan)."""

from __future__ import annotations

from tvm import relax
from tvm.relax import op as R


def _lp_normalization(inputs, attrs):
    x = inputs[0]
    axis, p = int(attrs.get("axis", -1)), int(attrs.get("p", 2))
    if p not in (1, 2):
        raise ValueError(f"LpNormalization: p must be 1 or 2, got {p}")
    dtype = x.ty.dtype
    if p == 1:
        norm = R.sum(R.abs(x), axis=[axis], keepdims=True)
    else:
        norm = R.sqrt(R.sum(R.multiply(x, x), axis=[axis], keepdims=True))
    zero = relax.const(0.0, dtype)
    return R.where(R.equal(norm, zero), R.zeros_like(x), R.divide(x, norm))


NORMALIZATION = {"LpNormalization": _lp_normalization}
