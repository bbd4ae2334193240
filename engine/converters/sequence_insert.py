"""SequenceInsert at a negative position.

ONNX counts a negative position from the back as Python's `list.insert` does (-1: before
the last tensor; onnxruntime and ONNX's reference agree); TVM's converter adds one more
(-1: at the back), the meaning of an absent position only. A constant position, as there."""

from __future__ import annotations

import tvm
from tvm import relax


def _sequence_insert(inputs, attrs):
    del attrs
    tensors = list(inputs[0])
    position = inputs[2] if len(inputs) > 2 else None
    if position is None:
        return relax.Tuple(tensors + [inputs[1]])
    if not isinstance(position, tvm.ir.GenericConst):
        raise NotImplementedError("Position must be a constant.")
    at = int(position.value.numpy())
    if not -len(tensors) <= at <= len(tensors):
        raise ValueError(f"SequenceInsert position out of bounds for length {len(tensors)}, got {at}")
    tensors.insert(at, inputs[1])
    return relax.Tuple(tensors)


SEQUENCE_INSERT = {"SequenceInsert": _sequence_insert}
