"""Poison fills for the permuted GPU emulator (engine/runtime/permuted.py).

A GPU gives a kernel no promise about memory it has not written: an output buffer holds
leftovers, and a block's shared memory holds whatever another block left there. The
permuted emulator makes such reads visible by filling that memory with poison (NaN for
floats, the dtype's minimum for signed ints, its maximum for unsigned ints, True for bool):

* ``entry_fills(func, n_inputs)``: at kernel entry, every output parameter (those after
  the ``n_inputs`` inputs of a ``call_tir``; without a call site, every parameter the kernel
  writes but never reads) and every ``global`` buffer the kernel allocates;
* ``block_fills(body, buffers)``: at the entry of each thread block, the block's own
  footprint of each ``shared``/``shared.dyn``/``local`` buffer (block-level TIR allocates
  them grid-wide; the footprint is the box every access of the block can touch, with the
  loops inside the block relaxed, so a block that reads another block's part reads poison).

>>> # entry_fills(f) for f(A: in, B: out) -> [for i0 in range(n): B[i0] = nan]
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import ir, sym, tirx
from tvm.s_tir import SBlockRealize
from tvm.tirx.buffer import is_buffer_var

__all__ = ["poison_value", "fill", "entry_fills", "block_fills", "BLOCK_PRIVATE_SCOPES"]

# Scopes whose contents belong to one thread block on a GPU.
BLOCK_PRIVATE_SCOPES = {"shared", "shared.dyn", "local"}
_GLOBAL_SCOPES = {"", "global"}


def poison_value(dtype) -> tirx.PrimExpr:
    """The value a never-written element of ``dtype`` reads as in the permuted emulator."""
    dt = tvm.DataType(str(dtype))
    if dt.is_float:
        return tirx.const(float("nan"), str(dtype))
    if dt.is_bool:
        return tirx.const(True, str(dtype))
    if dt.type_code == 1:  # unsigned int
        return tirx.const((1 << dt.bits) - 1, str(dtype))
    return tirx.const(-(1 << (dt.bits - 1)), str(dtype))


def fill(buf, lo: list | None = None, extents: list | None = None) -> tirx.Stmt:
    """A loop nest storing poison into ``buf[lo[k] : lo[k] + extents[k]]`` (whole buffer by default)."""
    shape = list(buf.ty.shape)
    lo = lo if lo is not None else [tirx.const(0, _dtype(s)) for s in shape]
    extents = extents if extents is not None else shape
    loop_vars = [tirx.Var(f"poison_{k}", _dtype(e)) for k, e in enumerate(extents)]
    indices = [l + v if not _is_zero(l) else v for l, v in zip(lo, loop_vars)]
    body: tirx.Stmt = tirx.BufferStore(buf, poison_value(buf.ty.dtype), indices)
    for var, ext in reversed(list(zip(loop_vars, extents))):
        body = tirx.For(var, tirx.const(0, _dtype(var)), ext, tirx.ForKind.SERIAL, body)
    return body


def entry_fills(func: tirx.PrimFunc, n_inputs: int | None = None) -> list[tirx.Stmt]:
    """Fills for kernel entry: the outputs and the kernel-allocated global buffers.

    ``n_inputs``: the number of leading parameters that are inputs (a ``call_tir`` passes
    them; the others are its freshly allocated outputs, poisoned even where the kernel
    also reads them). Unknown (None): the parameters the kernel writes and never reads.
    """
    written: dict[int, ir.Var] = {}
    read: set[int] = set()

    def on_store(store):
        written[store.buffer.__chandle__()] = store.buffer

    def on_load(load):
        if is_buffer_var(load.source):
            read.add(load.source.__chandle__())

    tvm_ffi.structural_walk(func.body, [(tirx.BufferStore, on_store), (ir.TensorLoad, on_load)])
    if n_inputs is not None:
        targets = [p for p in list(func.params)[n_inputs:] if is_buffer_var(p)]
    else:
        targets = [p for p in func.params if is_buffer_var(p)
                   and p.__chandle__() in written and p.__chandle__() not in read]
    if isinstance(func.body, SBlockRealize):
        targets += [b for b in func.body.block.alloc_buffers if str(b.scope()) in _GLOBAL_SCOPES]
    return [fill(b) for b in targets]


def block_fills(body: tirx.Stmt, block_vars: list[ir.Var]) -> list[tirx.Stmt]:
    """Fills of the footprint of each block-private buffer ``body`` accesses.

    ``body`` is the statement one thread block runs (what lies inside its blockIdx loops);
    the footprints are expressions of ``block_vars``. A dimension whose bound cannot be
    stated in terms of ``block_vars`` alone is filled whole.
    """
    accesses = _accesses(body)
    keep = {v.__chandle__() for v in block_vars}
    analyzer = sym.Analyzer()
    fills = []
    for handle, (buf, boxes) in accesses.items():
        shape = list(buf.ty.shape)
        lo, extents = [], []
        for k, dim in enumerate(shape):
            zero = tirx.const(0, _dtype(dim))
            mins = [b[k][0] for b in boxes]
            maxs = [b[k][1] for b in boxes]
            if not all(_only_vars(e, keep) for e in mins + maxs):
                lo.append(zero)
                extents.append(dim)
                continue
            first = tirx.max(_cast(_min_all(mins), dim), zero)
            last = tirx.min(_cast(_max_all(maxs), dim), dim - 1)
            lo.append(analyzer.simplify(first))
            extents.append(analyzer.simplify(tirx.max(last - first + 1, zero)))
        fills.append(fill(buf, lo, extents))
    return fills


def _accesses(body: tirx.Stmt) -> dict[int, tuple[ir.Var, list]]:
    """For each block-private buffer: (buffer, [per-access list of (min, max) per dim])."""
    found: dict[int, tuple[ir.Var, list]] = {}
    doms: dict[int, tuple[ir.Var, sym.IntervalSet]] = {}  # loop var handle -> (var, range)
    binds: list[dict] = [{}]  # stack of {iter var handle: bound value} for nested sblocks
    analyzer = sym.Analyzer()

    def record(buf, indices):
        if not is_buffer_var(buf) or str(buf.scope()) not in BLOCK_PRIVATE_SCOPES:
            return
        box = []
        for idx in indices:
            idx = _substitute(idx, binds[-1])
            s = analyzer.int_set(idx, dict(doms.values()))
            box.append((s.min_value, s.max_value))
        found.setdefault(buf.__chandle__(), (buf, []))[1].append(box)

    def on_for(loop, visitor):
        key = loop.loop_var.__chandle__()
        doms[key] = (loop.loop_var, sym.IntervalSet(loop.min, loop.min + loop.extent - 1))
        try:
            return visitor.default_visit(loop)
        finally:
            doms.pop(key)

    def on_realize(realize, visitor):
        outer = binds[-1]
        inner = dict(outer)
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            inner[iv.var.__chandle__()] = _substitute(value, outer)
        binds.append(inner)
        try:
            return visitor.default_visit(realize)
        finally:
            binds.pop()

    def on_store(store, visitor):
        record(store.buffer, store.indices)
        return visitor.default_visit(store)

    def on_load(load, visitor):
        record(load.source, load.indices)
        return visitor.default_visit(load)

    tvm_ffi.structural_visit(body, [(tirx.For, on_for), (SBlockRealize, on_realize),
                                    (tirx.BufferStore, on_store), (ir.TensorLoad, on_load)])
    return found


def _substitute(expr, mapping: dict):
    if not mapping:
        return expr
    return tvm_ffi.structural_map(expr, (ir.Var, lambda v: mapping.get(v.__chandle__(), v)))


def _only_vars(expr, keep: set[int]) -> bool:
    """Whether ``expr`` depends on no variable outside ``keep`` (and loads no buffer)."""
    ok = [True]

    def on_var(v):
        if v.__chandle__() not in keep:
            ok[0] = False

    def on_load(_):
        ok[0] = False

    tvm_ffi.structural_walk(expr, [(ir.TensorLoad, on_load), (ir.Var, on_var)])
    return ok[0]


def _min_all(exprs):
    out = exprs[0]
    for e in exprs[1:]:
        out = tirx.min(out, e)
    return out


def _max_all(exprs):
    out = exprs[0]
    for e in exprs[1:]:
        out = tirx.max(out, e)
    return out


def _cast(expr, like):
    return expr if _dtype(expr) == _dtype(like) else tirx.Cast(_dtype(like), expr)


def _dtype(expr) -> str:
    return str(expr.ty.dtype)


def _is_zero(expr) -> bool:
    return isinstance(expr, tirx.IntImm) and expr.value == 0
