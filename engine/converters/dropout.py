"""Dropout: inference only, with ONNX's boolean mask.

TVM's converter returns its own float32 mask for the optional `mask` output (ONNX: bool,
all true in inference) and ignores `training_mode`, so a training-mode node silently
came out as the identity. Here the mask is a boolean tensor of ones, and a node whose
training_mode is a constant true with a ratio other than 0 is refused (its output is
random). A training_mode given at run time is taken as inference, as TVM does: a
compiled model is for inference (wrong only if it is run with training_mode true and a
ratio above 0)."""

from __future__ import annotations

import numpy as np
from tvm import relax
from tvm.ir import Constant
from tvm.relax import op as R


def _constant(expr) -> np.ndarray | None:
    return np.asarray(expr.value.numpy()) if isinstance(expr, Constant) else None


def _dropout(inputs, attrs):
    x = inputs[0]
    ratio = _constant(inputs[1]) if len(inputs) > 1 and inputs[1] is not None else None
    ratio = float(ratio) if ratio is not None else float(attrs.get("ratio", 0.5))
    training = _constant(inputs[2]) if len(inputs) > 2 and inputs[2] is not None else None
    if training is not None and bool(training) and ratio != 0.0:
        raise ValueError("Dropout in training mode (a random mask) is not supported: inference only")
    # inference: the identity (relax's nn.dropout legalizes to a copy and a float mask of
    # ones that FuseOps made a second output of the producer's kernel: alexnet's fc6 came
    # out as a two-output kernel no matmul rule took, 140 ms instead of ~5)
    if attrs.get("tvm_custom", {}).get("num_outputs", 1) == 1:
        return x
    return relax.Tuple([x, R.ones(x.ty.shape, "bool")])


DROPOUT = {"Dropout": _dropout}
