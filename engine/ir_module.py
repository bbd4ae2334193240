"""Copies of an IRModule: some of its functions replaced; rewritten for a build."""

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


def prepared(mod: tvm.IRModule, before_build=None) -> tvm.IRModule:
    """`mod` after a target's pre-build rewrite (engine.targets.TargetSpec.before_build),
    if it has one: what the compile's builds and tuning's candidate builds compile."""
    return before_build(mod) if before_build is not None else mod
