"""FLOP and byte estimates per ONNX operator (a multiply-add counts as 2 FLOPs)."""

from __future__ import annotations

import math
from typing import Mapping, Sequence

_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8,
                "int32": 4, "int8": 1, "uint8": 1, "bool": 1}
# Ops that move data without arithmetic.
_DATA_MOVEMENT = {"Concat", "Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Slice",
                  "Gather", "Split", "Identity", "Dropout", "Pad", "Expand", "Shape", "Cast",
                  "Tile", "DepthToSpace", "SpaceToDepth"}
# Per-output-element cost of elementwise ops that do more than one FLOP.
_ELEMENTWISE_COST = {"Sigmoid": 4, "Tanh": 6, "Exp": 4, "Erf": 8, "Gelu": 10, "HardSigmoid": 3,
                     "BatchNormalization": 2, "LeakyRelu": 2, "Clip": 2}


def _numel(shape: Sequence[int]) -> int:
    return math.prod(shape) if shape else 1


def estimate_flops(op: str, inputs, outputs, attrs: Mapping[str, object]) -> int:
    out = _numel(outputs[0].shape) if outputs else 0
    if op in ("Conv", "ConvTranspose") and len(inputs) >= 2:
        w = inputs[1].shape  # [Cout, Cin/group, kh, kw]
        per_out = _numel(w[1:]) if op == "Conv" else _numel(w[2:]) * w[0] // int(attrs.get("group", 1) or 1)
        return 2 * out * per_out + (out if len(inputs) > 2 else 0)
    if op in ("MatMul", "Gemm") and len(inputs) >= 2:
        a = inputs[0].shape
        k = a[0] if op == "Gemm" and attrs.get("transA") else (a[-1] if a else 1)
        return 2 * out * k + (out if op == "Gemm" and len(inputs) > 2 else 0)
    if op in ("LSTM", "GRU", "RNN") and len(inputs) >= 3:
        x, w, r = (t.shape for t in inputs[:3])  # X [seq, batch, in]; W, R [dirs, gates*H, in / H]
        seq, batch = (x[0], x[1]) if int(attrs.get("layout", 0) or 0) == 0 else (x[1], x[0])
        gates = _numel(w[:2])  # every direction's gates
        return 2 * seq * batch * (_numel(w) + _numel(r)) + seq * batch * gates * _ELEMENTWISE_COST["Sigmoid"]
    if op in ("MaxPool", "AveragePool", "LpPool"):
        return out * _numel(attrs.get("kernel_shape", (1,)))
    if op in ("GlobalAveragePool", "GlobalMaxPool", "ReduceMean", "ReduceSum", "ReduceMax"):
        return _numel(inputs[0].shape)
    if op in ("Softmax", "LogSoftmax"):
        return 5 * out
    if op == "LRN":
        return out * (2 * int(attrs.get("size", 1)) + 4)
    if op in _DATA_MOVEMENT:
        return 0
    return out * _ELEMENTWISE_COST.get(op, 1)


def estimate_bytes(inputs, outputs) -> int:
    """Bytes read plus written, each tensor once (no cache model)."""
    return sum(_numel(t.shape) * _DTYPE_BYTES.get(t.dtype, 4) for t in (*inputs, *outputs))
