"""Conv output channels padded to whole vectors, before fusion (llvm).

The conv rule's register tile holds whole output-channel vectors: with a channel count that
is no multiple of the vector lanes (squeezenet's 1000-class conv10, shufflenet's 136) it
falls back to half- or quarter-vector tiles, at that fraction of the FMA throughput, and a
predicated tail tile does not vectorise at all. Padding a constant weight with zero filters
to the next multiple and slicing the output back costs a few percent more FLOPs; the slice
fuses into the conv's epilogue (measured: squeezenet's conv10 3.9 -> 2.7 ms, AVX-512).
A 1x1 stride-1 unpadded conv is left as it is: engine.schedule.cpu.conv_pixels vectorises
its pixels instead, whole vectors at any channel count (squeezenet's conv10 in the model,
2-core AVX-512 EPYC: 0.46-0.51 ms padded, 0.38-0.45 ms pixel-vectorised).
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator

# Pad only when the extra filters are at most this share of the real ones.
MAX_EXTRA_SHARE = 1 / 8

_CONV2D = tvm.ir.Op.get("relax.nn.conv2d")


def padded_channels(n_out: int, lanes: int) -> int | None:
    """The padded output channel count, or None when padding does not pay."""
    if n_out % lanes == 0 or n_out < lanes:
        return None
    padded = -(-n_out // lanes) * lanes
    return padded if padded - n_out <= MAX_EXTRA_SHARE * n_out else None


@mutator
class _PadConvChannels(PyExprMutator):
    def __init__(self, lanes: int, mod=None):
        super().__init__(mod)
        self.lanes = lanes

    def visit_var_binding_(self, binding: relax.VarBinding) -> None:
        call = binding.value
        padded = self._padded_weight(call)
        if padded is None:
            super().visit_var_binding_(binding)
            return
        a = call.attrs
        conv = self.builder_.emit(relax.op.nn.conv2d(
            self.visit_expr(call.args[0]), relax.const(padded), strides=a.strides, padding=a.padding,
            dilation=a.dilation, groups=a.groups, data_layout=a.data_layout, kernel_layout=a.kernel_layout,
            out_layout=a.out_layout, out_dtype=a.out_dtype))
        n_out = int(call.args[1].value.shape[0])
        sliced = self.builder_.normalize(relax.op.strided_slice(conv, axes=[1], begin=[0], end=[n_out]))
        # The original Var keeps the result: every user, and the binding -> operator map, stay valid.
        self.builder_.emit_normalized(relax.VarBinding(binding.var, sliced))

    def _padded_weight(self, call) -> np.ndarray | None:
        if not isinstance(call, relax.Call) or not call.op.same_as(_CONV2D):
            return None
        a, weight = call.attrs, call.args[1]
        if (not isinstance(weight, tvm.ir.GenericConst) or int(a.groups) != 1 or a.data_layout != "NCHW"
                or a.kernel_layout != "OIHW" or a.out_layout != "NCHW"):
            return None
        w = weight.value.numpy()
        if w.shape[2:] == (1, 1) and all(int(v) == 1 for v in (*a.strides, *a.dilation)) and \
                not any(int(v) for v in a.padding):
            return None  # a 1x1 conv: the pixel-vector rule (conv_pixels) fills vectors unpadded
        n_padded = padded_channels(w.shape[0], self.lanes)
        if n_padded is None:
            return None
        out = np.zeros((n_padded, *w.shape[1:]), w.dtype)
        out[: w.shape[0]] = w
        return out


def pad_conv_channels(lanes: int) -> tvm.transform.Pass:
    """A module pass padding every eligible conv2d of `main` (see the module docstring)."""

    @tvm.transform.module_pass(opt_level=0, name="PadConvChannels")
    def transform(mod, _ctx):
        out = tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs)
        out["main"] = _PadConvChannels(lanes, mod).visit_expr(mod["main"])
        return out

    return transform
