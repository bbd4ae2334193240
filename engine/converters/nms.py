"""NonMaxSuppression: refused when its limits are runtime inputs.

TVM's converter reads max_output_boxes_per_class, iou_threshold and score_threshold only
when they are constants; given as runtime inputs it silently uses 0, 0.5 and 0.0 (no box
kept at all: a wrong answer, not an error). Those are refused here with one line; with
constants (how detection models export them) TVM's converter runs as before."""

from __future__ import annotations

from tvm import relax
from tvm.ir import Constant
from tvm.relax.frontend.onnx.onnx_frontend import NonMaxSuppression

_LIMITS = ("max_output_boxes_per_class", "iou_threshold", "score_threshold")


def _nms(inputs, attrs):
    runtime = [name for name, value in zip(_LIMITS, list(inputs)[2:5])
               if value is not None and not isinstance(value, Constant)]
    if runtime:
        raise ValueError(f"NonMaxSuppression needs {', '.join(runtime)} as constants (initializers), "
                         "not runtime inputs")
    return NonMaxSuppression._impl_v10(relax.BlockBuilder.current(), inputs, attrs, [{}, {}])


NMS = {"NonMaxSuppression": _nms}
