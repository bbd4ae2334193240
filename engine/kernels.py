"""Kernels of a fused module: each `call_tir` site in `main`, traced back to the operators it runs.

FuseOps renames the bindings of `main` but keeps, inside each fused function, the names of
the original bindings (except its output, renamed `gv`) and names tensor parameters after
their producers. That is enough to recover every kernel's operators.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import tvm
from tvm import relax

from engine.opgraph import OpId


# One dimension of a kernel's output: its extent, or, for a shape known only when the model
# runs (Range, Compress, NonMaxSuppression, Slice with tensor bounds...), the symbolic
# expression that stands for it ("range_len_0", "n * 2").
Dim = Union[int, str]


def shape_dims(ty) -> tuple[Dim, ...]:
    """The dimensions of a Relax tensor type; () for a tensor of unknown rank (or no tensor).

        >>> shape_dims(R.Tensor((range_len_0, 4), "int32"))
        ('range_len_0', 4)
    """
    shape = getattr(ty, "shape", None)
    values = getattr(shape, "values", None)
    if values is None:
        return ()
    return tuple(int(v) if isinstance(v, tvm.tirx.IntImm) else str(v) for v in values)


def is_static(shape: tuple[Dim, ...]) -> bool:
    return all(isinstance(d, int) for d in shape)


@dataclass(frozen=True)
class KernelCall:
    """One kernel launch site in `main`, in execution order."""

    index: int
    var: str  # binding name in `main`
    func: str  # PrimFunc name (several calls may share one)
    ops: tuple[OpId, ...]  # operators computed, in graph order
    reads: tuple[str, ...]  # `main` vars it reads (kernel outputs or model inputs)
    out_shape: tuple[Dim, ...]  # symbolic dimensions as their expression (see Dim)
    dtype: str

    @property
    def static(self) -> bool:
        """Whether every output dimension is known before the model runs."""
        return is_static(self.out_shape)


def _call_args(value) -> tuple[str, list] | None:
    """(callee name, argument exprs) of a call_tir or a call to a fused function; tuples and
    tuple projections (batch norm returns a tuple) get pseudo-callees so they match too."""
    if isinstance(value, relax.Tuple):
        return "(tuple)", list(value.fields)
    if isinstance(value, relax.TupleGetItem):
        return f"(item {value.index})", [value.tuple_value]
    if not isinstance(value, relax.Call):
        return None
    if isinstance(value.op, tvm.ir.Op) and value.op.name == "relax.call_tir":
        args = value.args[1].fields if isinstance(value.args[1], relax.Tuple) else [value.args[1]]
        return value.args[0].name_hint, list(args)
    if isinstance(value.op, relax.GlobalVar):
        return value.op.name_hint, list(value.args)
    return None


def _bindings(func):
    return [b for block in func.body.blocks for b in block.bindings]


def trace_fusion(unfused: tvm.IRModule, fused: tvm.IRModule, owner: dict) -> list[tuple[OpId, ...]]:
    """The operators computed by each binding of the fused `main`, by binding position
    (FuseTIR keeps positions but may rename).

    `unfused` is the module right before FuseOps, `fused` right after; `owner` maps the
    unfused bindings (Vars, by identity) to operators. Every call is matched to the unfused
    binding with the same callee and the same argument objects (Vars and constants are
    passed through FuseOps unchanged), after translating fused Vars back to unfused ones."""
    by_signature: dict[tuple, relax.Var] = {}
    for b in _bindings(unfused["main"]):
        call = _call_args(b.value)
        if call is not None:
            by_signature.setdefault((call[0], tuple(call[1])), b.var)
    unfused_of: dict = {}  # fused `main` Var -> unfused Var holding the same value
    result: list[tuple[OpId, ...]] = []
    for b in _bindings(fused["main"]):
        call = _call_args(b.value)
        matched: list = []
        if isinstance(b.value, relax.Call) and isinstance(b.value.op, relax.GlobalVar) \
                and isinstance(fused[b.value.op], relax.Function):
            func = fused[b.value.op]
            local = {p: unfused_of.get(a, a) for p, a in zip(func.params, b.value.args)}
            for x in _bindings(func):
                inner = _call_args(x.value)
                if inner is None:
                    continue
                key = (inner[0], tuple(local.get(a, a) for a in inner[1]))
                if key in by_signature:
                    local[x.var] = by_signature[key]
                    matched.append(by_signature[key])
        elif call is not None:
            key = (call[0], tuple(unfused_of.get(a, a) for a in call[1]))
            if key in by_signature:
                matched.append(by_signature[key])
        if matched:
            unfused_of[b.var] = matched[-1]
        ops: list[OpId] = []
        for v in matched:
            if v in owner and owner[v] not in ops:
                ops.append(owner[v])
        result.append(tuple(ops))
    return result


def list_kernels(mod: tvm.IRModule, ops_of: list[tuple[OpId, ...]]) -> tuple[KernelCall, ...]:
    """Kernel call sites of a module after FuseTIR, in execution order.

    `var` and `reads` name `main`'s Vars; Relax names repeat after fusion, so a repeated
    name gets its binding position appended (`lv4@12`) to stay unambiguous."""
    calls = []
    bindings = _bindings(mod["main"])
    counts: dict[str, int] = {}
    for v in [*mod["main"].params, *(b.var for b in bindings)]:
        counts[v.name] = counts.get(v.name, 0) + 1
    label = {b.var: (b.var.name if counts[b.var.name] == 1 else f"{b.var.name}@{k}")
             for k, b in enumerate(bindings)}
    for position, b in enumerate(bindings):
        call = _call_args(b.value)
        if not (isinstance(b.value, relax.Call) and isinstance(b.value.op, tvm.ir.Op)
                and b.value.op.name == "relax.call_tir"):
            continue
        ty = b.var.ty
        shape = shape_dims(ty)
        dtype = str(getattr(ty, "dtype", ""))
        ops = ops_of[position] if position < len(ops_of) else ()
        reads = tuple(label.get(a, a.name) for a in call[1] if isinstance(a, relax.Var))
        calls.append(KernelCall(len(calls), label[b.var], call[0], ops, reads, shape, dtype))
    return tuple(calls)
