"""LRN (local response normalization across channels) as one injective kernel.

TVM's converter squares, expands to 5-D, window-sums over channels with `avg_pool3d`,
squeezes and divides: three kernels, the pool a scalar reduction behind bounds checks
(inception_v1's two LRNs took 0.4 ms of its 8 ms on a 2-core Zen 5). Here the window sum
is `size` channel slices of the zero-padded square, added: every op injective, so FuseOps
makes one kernel that reads x once and vectorises along the row. The window is ONNX's,
channels [c - floor((size-1)/2), c + ceil((size-1)/2)], which for an even size TVM's
symmetric padding gets wrong (its output has one channel too many)."""

from __future__ import annotations

from tvm import relax, tirx
from tvm.relax import op as R
from tvm.relax.frontend.onnx.onnx_frontend import LocalResponseNormalization


def _lrn(inputs, attrs):
    x = inputs[0]
    size = int(attrs["size"])
    if size < 1:
        raise ValueError(f"LRN: size must be at least 1, got {size}")
    shape = getattr(x.ty, "shape", None)
    shape = list(shape.values) if isinstance(shape, relax.ShapeExpr) else None
    if shape is None or len(shape) < 3 or not isinstance(shape[1], tirx.IntImm):
        # a symbolic channel count: TVM's converter (the slices need static ends)
        return LocalResponseNormalization._impl_v13(relax.BlockBuilder.current(), inputs, attrs, [{}, {}])
    channels, dtype = int(shape[1]), str(x.ty.dtype)
    before = (size - 1) // 2
    square = R.multiply(x, x)
    pads = [0, 0, before, size - 1 - before] + [0, 0] * (len(shape) - 2)
    padded = R.nn.pad(square, pads)
    total = None
    for k in range(size):
        tap = R.strided_slice(padded, axes=[1], begin=[k], end=[k + channels])
        total = tap if total is None else R.add(total, tap)
    scale = R.add(R.multiply(total, relax.const(float(attrs.get("alpha", 1e-4)) / size, dtype)),
                  relax.const(float(attrs.get("bias", 1.0)), dtype))
    return R.divide(x, R.power(scale, relax.const(float(attrs.get("beta", 0.75)), dtype)))


LRN = {"LRN": _lrn}
