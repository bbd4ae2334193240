"""Reshape to a shape computed at run time.

TVM's converter takes constants and shape expressions only ("Reshape requires the input
new shape to be Shape"). A runtime shape tensor is resolved with tensor ops first (0
copies the input's dimension unless allowzero, -1 takes what the others leave of the
element count, which is static here), then becomes the reshape's symbolic shape."""

from __future__ import annotations

import math

import numpy as np
from tvm import relax, tirx
from tvm.relax import op as R
from tvm.relax.frontend.onnx.onnx_frontend import Reshape


def _reshape(inputs, attrs):
    data, shape = inputs
    bb = relax.BlockBuilder.current()
    if not (isinstance(shape, relax.Var) and isinstance(shape.ty, relax.TensorType)
            and isinstance(data.ty, relax.TensorType)
            and all(isinstance(d, tirx.IntImm) for d in data.ty.shape.values)):
        return Reshape._impl_v13(bb, inputs, attrs, [{}, {}])
    dims = [int(d) for d in data.ty.shape.values]
    n = int(shape.ty.shape.values[0])
    target = R.astype(shape, "int64")

    def const(values):
        return relax.const(np.asarray(values, dtype=np.int64), "int64")

    if not attrs.get("allowzero", 0):  # 0: the input's dimension at that position
        same = const([dims[k] if k < len(dims) else 0 for k in range(n)])
        target = R.where(R.equal(target, const(0)), same, target)
    known = R.prod(R.where(R.equal(target, const(-1)), const(1), target))
    target = R.where(R.equal(target, const(-1)), R.floor_divide(const(math.prod(dims)), known), target)
    runtime = bb.emit(relax.Call(relax.ExternFunc("vm.builtin.tensor_to_shape"), [bb.normalize(target)],
                                 ty_args=[relax.ShapeType(ndim=n)]))
    out_dims = [tirx.Var(f"reshape_{k}", "int64") for k in range(n)]
    bb.match_cast(runtime, relax.ShapeType(out_dims))
    return R.reshape(data, relax.ShapeExpr(out_dims))


RESHAPE = {"Reshape": _reshape}
