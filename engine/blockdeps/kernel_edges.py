"""Kernel launches of `main` and the producer -> consumer edges between them, with
reshape views and aliases followed through to the kernel that wrote the data.

Relax `Var.name` is not unique, so vars are matched by identity, never by name.

>>> # launches, inputs = kernel_inputs(result.module)
>>> # inputs[3]  -> KernelInput(consumer=3, param=0, producer=2, output=0, view_shape=None)
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
from tvm import relax


@dataclass(frozen=True)
class Launch:
    index: int  # position among call_tir bindings of main
    var: str
    func: str
    n_inputs: int


@dataclass(frozen=True)
class KernelInput:
    """Argument `param` of kernel `consumer` is output `output` of kernel `producer`."""

    consumer: int
    param: int
    producer: int
    output: int
    view_shape: tuple[int, ...] | None  # the shape the consumer sees, when a reshape view


@dataclass(frozen=True)
class _Source:
    kernel: int
    output: int | None  # None: the whole (possibly tuple) result
    view_shape: tuple[int, ...] | None = None


def _shape(expr) -> tuple[int, ...] | None:
    ty = getattr(expr, "ty", None)
    shape = getattr(ty, "shape", None)
    values = getattr(shape, "values", None)
    if values is None:
        return None
    try:
        return tuple(int(v) for v in values)
    except (TypeError, ValueError):
        return None


def kernel_inputs(mod: tvm.IRModule) -> tuple[tuple[Launch, ...], tuple[KernelInput, ...], tuple[str, ...]]:
    """Launches of `main` in order, every argument that a kernel produced, and notes about
    bindings that could not be followed."""
    launches: list[Launch] = []
    inputs: list[KernelInput] = []
    notes: list[str] = []
    source: dict[int, _Source] = {}

    def lookup(expr) -> _Source | None:
        return source.get(expr.__chandle__()) if isinstance(expr, relax.Var) else None

    for block in mod["main"].body.blocks:
        for b in block.bindings:
            v, key = b.value, b.var.__chandle__()
            if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op) and v.op.name == "relax.call_tir":
                args = list(v.args[1].fields) if isinstance(v.args[1], relax.Tuple) else [v.args[1]]
                k = len(launches)
                launches.append(Launch(k, b.var.name, v.args[0].name_hint, len(args)))
                for i, arg in enumerate(args):
                    src = lookup(arg)
                    if src is None:
                        continue
                    inputs.append(KernelInput(k, i, src.kernel, src.output or 0, src.view_shape))
                tuple_out = isinstance(getattr(b.var, "ty", None), relax.TupleType) if hasattr(relax, "TupleType") else False
                source[key] = _Source(k, None if tuple_out else 0)
            elif isinstance(v, relax.Var):
                if (src := lookup(v)) is not None:
                    source[key] = src
            elif isinstance(v, relax.TupleGetItem):
                src = lookup(v.tuple_value)
                if src is not None:
                    source[key] = _Source(src.kernel, v.index if src.output is None else src.output,
                                          src.view_shape)
            elif isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op) and v.op.name == "relax.reshape":
                src = lookup(v.args[0])
                if src is not None:
                    source[key] = _Source(src.kernel, src.output, _shape(b.var))
            else:
                what = v.op.name if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op) else type(v).__name__
                if any(lookup(a) for a in getattr(v, "args", ())):
                    notes.append(f"binding {b.var.name} ({what}) of kernel outputs not followed")
    return tuple(launches), tuple(inputs), tuple(notes)
