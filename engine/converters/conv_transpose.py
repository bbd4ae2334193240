"""ConvTranspose with an `output_shape` attribute.

TVM's converter ignores `output_shape` (test_convtranspose_output_shape came out 9x7, not
10x8). ONNX derives the pads from it: total_padding = stride * (in - 1) + output_padding +
(kernel - 1) * dilation + 1 - out, split between the two ends by `auto_pad`; a negative
total (an output longer than the strides reach) is extra output at the end, which is
`output_padding` (TVM takes it when below the stride). Then TVM's converter as usual.

A strided 2-D ConvTranspose by a constant weight is computed by phases: TVM's conv2d_transpose
convolves the input dilated with zeros, s*s times the multiply-adds that contribute (stride 2:
3 in 4 are by a zero). Output row s*q + r takes only the taps r, r + s, ... of the kernel,
so each of the s*s phases (ry, rx) is a plain convolution of the input by that sub-kernel
(flipped, [F, C] order), which the conv rules schedule; the phases are interleaved (stack and
reshape), cropped by the pads and the bias added, one copy kernel."""

from __future__ import annotations

import math

import numpy as np
from tvm import relax
from tvm.ir import Constant
from tvm.relax.frontend.onnx.onnx_frontend import ConvTranspose

ROW_MULTIPLE = 4


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
        auto_pad = _auto_pad(attrs)
        attrs.pop("auto_pad", None)
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
    phased = _by_phases(inputs, attrs)
    if phased is not None:
        return phased
    return ConvTranspose._impl_v1(relax.BlockBuilder.current(), inputs, attrs, None)


def _by_phases(inputs, attrs):
    """The phase form (module docstring), or None where it does not apply: not 2-D, a
    runtime weight, groups, dilation, auto_pad, stride 1, or a kernel shorter than a stride."""
    x, w = inputs[0], inputs[1]
    if len(x.ty.shape.values) != 4 or not isinstance(w, Constant) or attrs.get("group", 1) != 1:
        return None
    if _auto_pad(attrs) != "NOTSET":
        return None
    weight = w.value.numpy()  # [C, F, KH, KW]
    _, n_f, *kernel = weight.shape
    strides = list(attrs.get("strides", [1, 1]))
    if list(attrs.get("dilations", [1, 1])) != [1, 1] or strides == [1, 1] \
            or any(k < s for k, s in zip(kernel, strides)) or list(attrs.get("kernel_shape", kernel)) != kernel:
        return None
    pads = list(attrs.get("pads", [0, 0, 0, 0]))
    extra = list(attrs.get("output_padding", [0, 0]))
    n, _, *size = (int(d) for d in x.ty.shape.values)
    taps = [[math.ceil((k - r) / s) for r in range(s)] for k, s in zip(kernel, strides)]  # per phase
    reach = [h + t[0] - 1 for h, t in zip(size, taps)]  # phase outputs, the longest (phase 0)
    # a row a multiple of 4 long (cropped after): the conv rules' register tiles divide the
    # row, and a prime one (a 28x28 input's 29) left them 1 pixel wide
    reach[1] = -(-reach[1] // ROW_MULTIPLE) * ROW_MULTIPLE
    rows = []
    for ry in range(strides[0]):
        phases = []
        for rx in range(strides[1]):
            sub = weight[:, :, ry::strides[0], rx::strides[1]].transpose(1, 0, 2, 3)[:, :, ::-1, ::-1]
            my, mx = sub.shape[2:]
            # pad the input by taps - 1 before and after, and the shorter phases up to `reach`
            padding = (my - 1, mx - 1, my - 1 + reach[0] - (size[0] + my - 1), mx - 1 + reach[1] - (size[1] + mx - 1))
            phases.append(relax.op.nn.conv2d(x, relax.const(np.ascontiguousarray(sub)), padding=padding))
        row = relax.op.stack(phases, axis=4)  # [N, F, Q, Qx, sx]
        rows.append(relax.op.reshape(row, [n, n_f, reach[0], reach[1] * strides[1]]))
    full = relax.op.reshape(relax.op.stack(rows, axis=3), [n, n_f, reach[0] * strides[0], reach[1] * strides[1]])
    out = [s * (h - 1) + k - pads[i] - pads[i + 2] + extra[i]
           for i, (s, h, k) in enumerate(zip(strides, size, kernel))]
    beyond = [max(0, pads[i] + out[i] - reach[i] * strides[i]) for i in range(2)]  # output_padding past the last tap
    if any(beyond):
        full = relax.op.nn.pad(full, [0, 0, 0, 0, 0, beyond[0], 0, beyond[1]])
    y = relax.op.strided_slice(full, axes=[2, 3], begin=pads[:2], end=[pads[0] + out[0], pads[1] + out[1]])
    if len(inputs) > 2 and inputs[2] is not None:
        y = relax.op.add(y, relax.op.reshape(inputs[2], [1, -1, 1, 1]))
    return y


def _auto_pad(attrs) -> str:
    value = attrs.get("auto_pad", "NOTSET")
    return value.decode() if isinstance(value, bytes) else value


CONV_TRANSPOSE = {"ConvTranspose": _conv_transpose}
