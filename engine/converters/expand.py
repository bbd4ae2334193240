"""Expand whose target shape is a runtime tensor.

TVM's converter broadcasts to the runtime shape as given, so a target dimension of 1 where
the input's is 3 yields 1 (ONNX: the input's 3; `expand_dim_changed` came out (2, 1, 6)
instead of (2, 3, 6)). An input dimension that is static and not 1 is the output's
dimension whatever the target says; the others take the runtime value. Constant and
shape-expression targets go to TVM's converter, which already applies the rule."""

from __future__ import annotations

from tvm import relax, tirx
from tvm.relax.frontend.onnx.onnx_frontend import Expand


def _expand(inputs, attrs):
    data, shape = inputs
    bb = relax.BlockBuilder.current()
    if not isinstance(shape, relax.Var) or not isinstance(shape.ty, relax.TensorType):
        return Expand._impl_v13(bb, inputs, attrs, None)
    ndim = int(shape.ty.shape.values[0])
    runtime = bb.emit(relax.Call(relax.ExternFunc("vm.builtin.tensor_to_shape"), [shape],
                                 ty_args=[relax.ShapeType(ndim=ndim)]))
    dims = [tirx.Var(f"expand_{k}", "int64") for k in range(ndim)]
    bb.match_cast(runtime, relax.ShapeType(dims))
    data_dims = list(data.ty.shape.values)
    rank = max(ndim, len(data_dims))  # both right-aligned, the shorter padded with ones
    one = tirx.IntImm("int64", 1)
    padded = [one] * (rank - len(data_dims)) + data_dims
    if len(padded) != len(data_dims):
        data = bb.normalize(relax.op.reshape(data, relax.ShapeExpr(padded)))
    wanted = [one] * (rank - ndim) + dims
    target = [d if isinstance(d, tirx.IntImm) and d.value != 1 else v for d, v in zip(padded, wanted)]
    return bb.normalize(relax.op.broadcast_to(data, relax.ShapeExpr(target)))


EXPAND = {"Expand": _expand}
