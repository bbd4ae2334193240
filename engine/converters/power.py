"""Pow with mixed or integer types.

ONNX lets the exponent's type differ from the base's and the output takes the base's;
TVM's converter emits `power(x, y)` as is, which Relax refuses for mixed types and
cannot lower for integers ("power only applies to float"). A float base raises to the
exponent cast to its type; an integer base is computed in float64 (exact for the
integers it can hold) and cast back, as ONNX's reference `np.power(x, y).astype(x.dtype)`."""

from __future__ import annotations

from tvm import relax
from tvm.relax import op as R
from tvm.relax.frontend.onnx.onnx_frontend import Pow


def _pow(inputs, attrs):
    x, y = inputs
    if not all(isinstance(v.ty, relax.TensorType) for v in (x, y)):  # shape values: TVM's own path
        return Pow.base_impl(relax.BlockBuilder.current(), inputs, attrs, [{}, {}])
    xt, yt = str(x.ty.dtype), str(y.ty.dtype)
    floating = xt.startswith(("float", "bfloat"))
    if floating and xt == yt:  # TVM's converter (it folds constants itself)
        return Pow.base_impl(relax.BlockBuilder.current(), inputs, attrs, [{}, {}])
    if floating:
        return R.power(x, R.astype(y, xt))
    return R.astype(R.power(R.astype(x, "float64"), R.astype(y, "float64")), xt)


POWER = {"Pow": _pow}
