"""ConvTranspose with an `output_shape` attribute.

TVM's converter ignores `output_shape` (test_convtranspose_output_shape came out 9x7, not
10x8). ONNX derives the pads from it: total_padding = stride * (in - 1) + output_padding +
(kernel - 1) * dilation + 1 - out, split between the two ends by `auto_pad`; a negative
total (an output longer than the strides reach) is extra output at the end, which is
`output_padding` (TVM takes it when below the stride). Then TVM's converter as usual."""

from __future__ import annotations

from tvm import relax
from tvm.relax.frontend.onnx.onnx_frontend import ConvTranspose


def _conv_transpose(inputs, attrs):
    attrs = dict(attrs)
    wanted = attrs.pop("output_shape", None)
    if wanted is not None:
        x_shape = [int(d) for d in inputs[0].ty.shape.values]
        spatial = len(x_shape) - 2
        wanted = list(wanted)[-spatial:]
        strides = list(attrs.get("strides", [1] * spatial))
        dilations = list(attrs.get("dilations", [1] * spatial))
        extra = list(attrs.get("output_padding", [0] * spatial))
        kernel = list(attrs.get("kernel_shape", [int(d) for d in inputs[1].ty.shape.values[2:]]))
        auto_pad = attrs.pop("auto_pad", "NOTSET")
        auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
        begin, end = [], []
        for i in range(spatial):
            total = strides[i] * (x_shape[2 + i] - 1) + extra[i] + (kernel[i] - 1) * dilations[i] + 1 - wanted[i]
            if total < 0:
                extra[i] -= total
                total = 0
            first = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
            begin.append(first)
            end.append(total - first)
        attrs["pads"], attrs["output_padding"] = begin + end, extra
    return ConvTranspose._impl_v1(relax.BlockBuilder.current(), inputs, attrs, None)


CONV_TRANSPOSE = {"ConvTranspose": _conv_transpose}
