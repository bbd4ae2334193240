"""A tuned PrimFunc put back in place of a kernel."""

from __future__ import annotations

from tvm import tirx


def as_kernel(scheduled: tirx.PrimFunc, original: tirx.PrimFunc) -> tirx.PrimFunc:
    """The tuned function under the original's name, marked scheduled."""
    symbol = original.attrs.get("global_symbol", None) if original.attrs is not None else None
    func = scheduled.with_attr("global_symbol", symbol) if symbol else scheduled.without_attr("global_symbol")
    return func.with_attr("tirx.is_scheduled", True)
