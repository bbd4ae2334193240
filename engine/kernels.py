"""Kernels of a fused module: each `call_tir` site in `main`, traced back to the operators it runs.

FuseOps renames the bindings of `main` but keeps, inside each fused function, the names of
the original bindings (except its output, renamed `gv`) and names tensor parameters after
their producers. That is enough to recover every kernel's operators.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
from tvm import relax

from engine.opgraph import OpId


@dataclass(frozen=True)
class KernelCall:
    """One kernel launch site in `main`, in execution order."""

    index: int
    var: str  # binding name in `main`
    func: str  # PrimFunc name (several calls may share one)
    ops: tuple[OpId, ...]  # operators computed, in graph order
    reads: tuple[str, ...]  # `main` vars it reads (kernel outputs or model inputs)
    out_shape: tuple[int, ...]
    dtype: str


def _arg_key(arg):
    """Vars by name; constants by identity (FuseOps passes the very same objects)."""
    if isinstance(arg, relax.Var):
        return arg.name
    if isinstance(arg, tvm.ir.expr.Constant):
        return ("const", arg.__hash__())
    return None


def _call_signature(value) -> tuple[str, tuple] | None:
    """(callee, argument keys) of a call_tir or a call to a fused function."""
    if not isinstance(value, relax.Call):
        return None
    if isinstance(value.op, tvm.ir.Op) and value.op.name == "relax.call_tir":
        args = value.args[1].fields if isinstance(value.args[1], relax.Tuple) else [value.args[1]]
    elif isinstance(value.op, relax.GlobalVar):
        args = value.args
    else:
        return None
    return value.args[0].name_hint if isinstance(value.op, tvm.ir.Op) else value.op.name_hint, \
        tuple(k for k in (_arg_key(a) for a in args) if k is not None)


def _bindings(func):
    return [b for block in func.body.blocks for b in block.bindings]


def trace_fusion(unfused: tvm.IRModule, fused: tvm.IRModule, owner: dict[str, OpId]) -> list[tuple[OpId, ...]]:
    """The operators computed by each binding of the fused `main`, by binding position
    (FuseTIR keeps positions but may rename).

    `unfused` is the module right before FuseOps, `fused` right after; `owner` maps the
    unfused bindings to operators (engine.relax_import). Every call is matched to the
    unfused binding with the same callee and the same arguments, after translating the
    fused names back to unfused ones."""
    by_signature: dict[tuple, str] = {}
    for b in _bindings(unfused["main"]):
        sig = _call_signature(b.value)
        if sig is not None:
            by_signature.setdefault(sig, b.var.name)
    unfused_name: dict[str, str] = {}  # fused `main` var -> unfused var holding the same value
    result: list[tuple[OpId, ...]] = []
    for b in _bindings(fused["main"]):
        value = b.value
        names: list[str] = []
        if isinstance(value, relax.Call) and isinstance(value.op, relax.GlobalVar) \
                and isinstance(fused[value.op], relax.Function):
            func = fused[value.op]
            local = {p.name: (unfused_name.get(a.name, a.name) if isinstance(a, relax.Var) else _arg_key(a))
                     for p, a in zip(func.params, value.args)}
            for x in _bindings(func):
                sig = _call_signature(x.value)
                if sig is None:
                    continue
                args = tuple(local.get(n, n) if isinstance(n, str) else n for n in sig[1])
                match = by_signature.get((sig[0], args))
                if match is not None:
                    names.append(match)
                    local[x.var.name] = match
        else:
            sig = _call_signature(value)
            if sig is not None:
                args = tuple(unfused_name.get(n, n) if isinstance(n, str) else n for n in sig[1])
                match = by_signature.get((sig[0], args))
                names = [match] if match is not None else []
        if names:
            unfused_name[b.var.name] = names[-1]
        ops: list[OpId] = []
        for n in names:
            if n in owner and owner[n] not in ops:
                ops.append(owner[n])
        result.append(tuple(ops))
    return result


def list_kernels(mod: tvm.IRModule, ops_of: list[tuple[OpId, ...]]) -> tuple[KernelCall, ...]:
    """Kernel call sites of a module after FuseTIR, in execution order."""
    calls = []
    for position, b in enumerate(_bindings(mod["main"])):
        sig = _call_signature(b.value)
        if sig is None or not (isinstance(b.value.op, tvm.ir.Op) and b.value.op.name == "relax.call_tir"):
            continue
        ty = b.var.ty
        shape = tuple(int(v) for v in ty.shape.values) if hasattr(ty, "shape") and ty.shape is not None \
            and hasattr(ty.shape, "values") else ()
        dtype = str(getattr(ty, "dtype", ""))
        ops = ops_of[position] if position < len(ops_of) else ()
        reads = tuple(k for k in sig[1] if isinstance(k, str))
        calls.append(KernelCall(len(calls), b.var.name, sig[0], ops, reads, shape, dtype))
    return tuple(calls)
