"""ReverseSequence, which TVM 0.27's ONNX frontend lacks.

Each batch entry b reverses its first sequence_lens[b] time steps and keeps the rest:
one gather along the time axis with index lens[b]-1-t where t < lens[b], else t."""

from __future__ import annotations

from tvm import relax
from tvm.relax import op as R


def _reverse_sequence(inputs, attrs):
    x, lens = inputs
    shape = [int(d) for d in x.ty.shape.values]
    time_axis, batch_axis = int(attrs.get("time_axis", 0)), int(attrs.get("batch_axis", 1))
    rank = len(shape)

    def along(axis: int, values):  # a 1-D tensor laid out along `axis` of a rank-`rank` shape
        return R.reshape(values, [shape[axis] if a == axis else 1 for a in range(rank)])

    t = along(time_axis, R.arange(0, shape[time_axis], 1, dtype="int64"))
    n = along(batch_axis, R.astype(lens, "int64"))
    one = relax.const(1, "int64")
    index = R.where(R.less(t, n), R.subtract(R.subtract(n, one), t), t)
    return R.gather_elements(x, R.broadcast_to(index, shape), axis=time_axis)


SEQUENCE_REVERSE = {"ReverseSequence": _reverse_sequence}
