"""The dtype test the converters share."""

from __future__ import annotations


def is_floating(expr) -> bool:
    """Whether a Relax tensor expression holds floats (float16/32/64, bfloat16)."""
    return str(expr.ty.dtype).startswith(("float", "bfloat"))
