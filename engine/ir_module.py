"""A copy of an IRModule with some of its functions replaced."""

from __future__ import annotations

import tvm


def with_functions(mod: tvm.IRModule, updates: dict) -> tvm.IRModule:
    """`mod` with `updates` (GlobalVar -> function) in place of its functions; `mod` itself
    when there are none (a module is shared, never changed in place)."""
    if not updates:
        return mod
    out = tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs)
    for gv, func in updates.items():
        out[gv] = func
    return out
