"""The llvm target's own legalizations (LegalizeOps' customize map): transcendentals on
TVM's vectorisable approximations. llvm has no vector erf or exp and lowers a vector of them
to one libm call per element: 40x slower in a BERT FFN's GELU epilogue, and with expf per
element mha_block's softmax was 26% of its kernel time (tanh lowers to expf per element
too). erf is topi.fast_erf and tanh topi.fast_tanh (rational approximations, within 4e-7
relative); exp, softmax and sigmoid run on topi.fast_exp (a range reduction and a
polynomial, within 1e-5 relative); on float32 only (the fast versions' dtype).
"""

from __future__ import annotations

import tvm


def _fast_softmax(x, axis: int):
    """topi.nn.softmax's stages (row max, exp, row sum, divide) with topi.fast_exp."""
    from tvm import te, topi

    axis %= len(x.shape)
    rows = [d for i, d in enumerate(x.shape) if i != axis]
    row = lambda i: i[:axis] + i[axis + 1:]
    at = lambda i, k: i[:axis] + (k,) + i[axis:]
    k = te.reduce_axis((0, x.shape[axis]), "k")
    top = te.compute(rows, lambda *i: te.max(x(*at(i, k)), axis=k), "T_softmax_maxelem")
    e = topi.fast_exp(te.compute(x.shape, lambda *i: x(*i) - top(*row(i)), "T_softmax_delta"))
    k2 = te.reduce_axis((0, x.shape[axis]), "k2")
    total = te.compute(rows, lambda *i: te.sum(e(*at(i, k2)), axis=k2), "T_softmax_expsum")
    return te.compute(x.shape, lambda *i: e(*i) / total(*row(i)), "T_softmax_norm")


def _fast_sigmoid(x):
    from tvm import te, tirx, topi

    e = topi.fast_exp(topi.negative(x))
    return te.compute(x.shape, lambda *i: tirx.const(1.0, x.dtype) / (tirx.const(1.0, x.dtype) + e(*i)), "sigmoid")


def _float32_or_default(op: str, fast):
    """Legalize `op` with `fast` on float32 (TVM's fast_exp is float32 only), else as TVM does."""
    default = tvm.ir.Op.get(op).get_attr("FLegalize")

    def legalize(bb, call):
        if str(call.args[0].ty.dtype) != "float32":
            return default(bb, call)
        return fast(bb, call)

    return legalize


def cpu_legalize() -> dict:
    """Relax op name -> its llvm legalization (see the module doc)."""
    from tvm import topi

    return {"relax.erf": lambda bb, call: bb.call_te(topi.fast_erf, call.args[0]),
            "relax.exp": _float32_or_default("relax.exp", lambda bb, call: bb.call_te(topi.fast_exp, call.args[0])),
            "relax.nn.softmax": _float32_or_default(
                "relax.nn.softmax", lambda bb, call: bb.call_te(_fast_softmax, call.args[0], int(call.attrs.axis))),
            "relax.sigmoid": _float32_or_default("relax.sigmoid", lambda bb, call: bb.call_te(_fast_sigmoid,
                                                                                           call.args[0])),
            "relax.tanh": _float32_or_default("relax.tanh", lambda bb, call: bb.call_te(topi.fast_tanh, call.args[0]))}
