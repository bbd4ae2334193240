"""Constant with any of its value attributes.

TVM's converter reads only `value` ("no value in Constant"); ONNX function bodies, and the
models they are expanded into (Celu, Swish, MeanVarianceNormalization, ...), write scalars
and lists as value_float(s) / value_int(s): float32 and int64 tensors, scalars 0-d."""

from __future__ import annotations

import numpy as np
from tvm import relax
from tvm.relax.frontend.onnx.onnx_frontend import get_numpy

_TYPED = {"value_float": np.float32, "value_floats": np.float32, "value_int": np.int64, "value_ints": np.int64}


def _constant(inputs, attrs):
    del inputs
    if "value" in attrs:
        value = attrs["value"]
        # a string tensor: TVM's converter substitutes int64 [0] (strings never reach a kernel)
        array = np.asarray([0], dtype=np.int64) if isinstance(value, bytes) else get_numpy(value)
    else:
        name = next((k for k in _TYPED if k in attrs), None)
        if name is None:
            raise ValueError(f"Constant without a supported value attribute (has: {', '.join(sorted(attrs)) or 'none'})")
        array = np.asarray(attrs[name], dtype=_TYPED[name])
    return relax.const(array, array.dtype.name)


CONSTANT = {"Constant": _constant}
