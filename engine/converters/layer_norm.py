"""LayerNormalization's optional Mean and InvStdDev outputs.

TVM's converter computes Y and returns the scalar 0 for the other two outputs, so a model
that reads them gets a wrong answer. When the node names them, they are computed over
the normalised axes [axis, rank) in the stash type (float32 by default), kept as
dimensions of 1; Y stays TVM's `layer_norm` (the op our schedules know)."""

from __future__ import annotations

from tvm import relax
from tvm.relax import op as R
from tvm.relax.frontend.onnx.onnx_frontend import LayerNormalization

_STASH = {1: "float32", 10: "float16", 11: "float64", 16: "bfloat16"}


def _layer_norm(inputs, attrs):
    bb = relax.BlockBuilder.current()
    y = LayerNormalization._impl_v17(bb, inputs, attrs, [{}, {}]).fields[0]
    if attrs.get("tvm_custom", {}).get("num_outputs", 1) == 1:
        return y
    x = inputs[0]
    rank = len(x.ty.shape.values)
    axes = list(range(int(attrs.get("axis", -1)) % rank, rank))
    stash = _STASH[int(attrs.get("stash_type", 1))]
    xs = x if str(x.ty.dtype) == stash else R.astype(x, stash)
    mean = bb.emit(R.mean(xs, axes, keepdims=True))
    centred = R.subtract(xs, mean)
    variance = R.mean(R.multiply(centred, centred), axes, keepdims=True)
    eps = relax.const(float(attrs.get("epsilon", 1e-5)), stash)
    inv_std = R.rsqrt(R.add(variance, eps))
    return relax.Tuple([y, mean, inv_std])


LAYER_NORM = {"LayerNormalization": _layer_norm}
