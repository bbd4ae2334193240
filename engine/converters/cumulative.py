"""CumSum and CumProd whose axis is a runtime input.

TVM's frontend takes the axis only as a constant ("CumSum with non-constant axis input is
not supported yet") and has no CumProd. The output shape does not depend on the axis, so
a runtime axis is computed exactly: the scan along every axis, the one the axis names
selected with `where` (rank scans instead of one; a constant axis gives one scan)."""

from __future__ import annotations

import numpy as np
from tvm import relax
from tvm.ir import Constant
from tvm.relax import op as R


def _scan(scan):
    def convert(inputs, attrs):
        x, axis = inputs[0], inputs[1]
        rank = len(x.ty.shape.values)
        exclusive, reverse = bool(attrs.get("exclusive", 0)), bool(attrs.get("reverse", 0))

        def along(k: int):
            data = R.flip(x, k) if reverse else x
            out = scan(data, k, exclusive=exclusive)
            return R.flip(out, k) if reverse else out

        if isinstance(axis, Constant):
            return along(int(np.asarray(axis.value.numpy()).reshape(-1)[0]) % rank)
        # axis in [-rank, rank): normalise, then pick the scan along it
        k = R.reshape(axis, ())
        k = R.where(R.less(k, relax.const(0, axis.ty.dtype)), R.add(k, relax.const(rank, axis.ty.dtype)), k)
        out = along(rank - 1)
        for a in range(rank - 2, -1, -1):
            out = R.where(R.equal(k, relax.const(a, axis.ty.dtype)), along(a), out)
        return out

    return convert


CUMULATIVE = {"CumSum": _scan(R.cumsum), "CumProd": _scan(R.cumprod)}
