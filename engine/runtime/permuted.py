"""Permuted launch order for the GPU emulator (``emulate_func(..., permuted=True)``).

``permute_func(func, seed)`` rewrites one block-level GPU-scheduled PrimFunc so that, once
engine/runtime/emulation.py has made the remaining thread loops serial and the scopes
global, running it on the CPU fails where a GPU could fail:

* blocks: the blockIdx loops of each launch become ONE serial loop ``for i in range(N)``
  (N = number of blocks) whose body uses block ``(a*i + c) % N`` (decomposed back into the
  blockIdx values), gcd(a, N) = 1 and a != 1 when N > 2;
* block-private memory: at the entry of each block, its footprint of every
  shared/local buffer is filled with poison (engine/runtime/poison.py), and at kernel
  entry every output parameter and every global buffer the kernel allocates;
* threads: the statements under the blockIdx loops are cut into segments. A segment is a
  run of consecutive thread loop nests (same threadIdx tags, in the same order, extent-1
  loops between them allowed) that nothing orders on a GPU: it ends at an explicit
  ``tvm_storage_sync``, at any other statement, at a shared buffer one nest writes and a
  later one touches (TVM's ThreadSync pass puts a barrier there), and after a cross-thread
  reduction (an allreduce synchronises). A segment runs as one serial loop per tag, in a
  permuted order as for blocks, each iteration running every nest of the segment for that
  thread (``t < extent`` guards nests narrower than the segment). Thread nests under a
  serial loop or an ``if`` of the block are cut the same way, per iteration or branch;
* a tag a reduction's reduce axis is bound to keeps thread 0 first (c = 0): TIR runs a
  reduction's init when the reduce axes are at 0, so that iteration must come first;
  the other threads still run in a permuted order.

Thread loops inside a nest (dlight's cooperative fetch re-binds the nest's tags) are left
alone: emulation.py makes them serial, whole tile per thread, as in the serial mode. The permutation of each
loop comes from ``seed``, the kernel name and the loop's rank in the kernel: deterministic.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import tvm_ffi
from tvm import ir, sym, tirx
from tvm.s_tir import SBlock, SBlockRealize
from tvm.tirx.buffer import is_buffer_var

from engine.runtime.poison import block_fills, entry_fills

__all__ = ["permute_func", "affine_order"]

_SYNC_CALLS = ("tirx.tvm_storage_sync", "tir.tvm_storage_sync")
_SHARED = ("shared", "shared.dyn")


def affine_order(extent: int, key: str, fix_zero: bool = False) -> tuple[int, int]:
    """(a, c) of the bijection ``i -> (a*i + c) % extent`` drawn from ``key``.

    >>> affine_order(8, "1:k:1"), affine_order(8, "1:k:1", fix_zero=True)
    ((7, 5), (7, 0))
    """
    rng = random.Random(key)
    if extent <= 2:
        return 1, 0 if fix_zero or extent < 2 else rng.randrange(extent)
    a = rng.randrange(2, extent)
    while math.gcd(a, extent) != 1:
        a = rng.randrange(2, extent)
    return a, 0 if fix_zero else rng.randrange(extent)


def permute_func(func: tirx.PrimFunc, seed: int = 1, name: str = "main",
                 n_inputs: int | None = None) -> tirx.PrimFunc:
    """``func`` with blocks and threads in a permuted order and poison fills (module doc).

    ``n_inputs``: how many leading parameters are inputs (from the ``call_tir`` sites), so
    that every output is poisoned at entry (poison.entry_fills).
    """
    orders = _Orders(f"{seed}:{name}")
    fills = entry_fills(func, n_inputs)
    body = _launches(func.body, orders)
    if fills:
        body = _prepend(body, fills)
    return func.with_body(body)


class _Orders:
    """Hands out one affine order per permuted loop of a kernel."""

    def __init__(self, key: str):
        self.key, self.count = key, 0

    def index(self, i: tirx.Var, extent, fix_zero: bool = False) -> tirx.PrimExpr:
        """The permuted index for iteration ``i`` of a loop over ``range(extent)``."""
        self.count += 1
        if not isinstance(extent, tirx.IntImm):  # symbolic: the reverse order is a bijection
            return extent - 1 - i if not fix_zero else i
        a, c = affine_order(int(extent.value), f"{self.key}:{self.count}", fix_zero)
        if a == 1 and c == 0:
            return i
        n = int(extent.value)
        wide = "int64" if n * n >= 2**31 else _dt(i)  # a*i + c < n*n must not overflow
        out = tirx.floormod(_as(i, wide) * a + c, tirx.const(n, wide))
        return _as(out, _dt(i))


def _tag(loop) -> str:
    if loop.kind != tirx.ForKind.THREAD_BINDING or loop.thread_binding is None:
        return ""
    return str(loop.thread_binding.thread_tag)


def _loop(var, extent, body) -> tirx.For:
    return tirx.For(var, tirx.const(0, _dt(var)), extent, tirx.ForKind.SERIAL, body)


def _substitute(stmt, mapping: dict[int, tirx.PrimExpr]):
    return tvm_ffi.structural_map(stmt, (ir.Var, lambda v: mapping.get(v.__chandle__(), v)))


def _seq(stmts: list) -> tirx.Stmt:
    return stmts[0] if len(stmts) == 1 else tirx.SeqStmt(stmts)


def _with_block_body(realize: SBlockRealize, body: tirx.Stmt) -> SBlockRealize:
    b = realize.block
    block = SBlock(b.iter_vars, b.reads, b.writes, b.name_hint, body, b.init, b.alloc_buffers,
                   b.match_buffers, b.annotations)
    return SBlockRealize(realize.iter_values, realize.predicate, block)


def _prepend(body, stmts: list) -> tirx.Stmt:
    if isinstance(body, SBlockRealize):
        return _with_block_body(body, _seq(stmts + [body.block.body]))
    return _seq(stmts + [body])


def _launches(stmt, orders: _Orders):
    """``stmt`` with every launch (outermost blockIdx loop nest) permuted."""
    if isinstance(stmt, tirx.For):
        if _tag(stmt).startswith("blockIdx."):
            return _grid(stmt, orders)
        return tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, _launches(stmt.body, orders),
                        stmt.thread_binding, stmt.annotations, stmt.step, stmt.span)
    if isinstance(stmt, tirx.SeqStmt):
        return tirx.SeqStmt([_launches(s, orders) for s in stmt.seq])
    if isinstance(stmt, SBlockRealize):
        return _with_block_body(stmt, _launches(stmt.block.body, orders))
    return stmt


def _grid(outer: tirx.For, orders: _Orders) -> tirx.Stmt:
    """One serial loop over the blocks of a launch, in a permuted order."""
    chain, inner = [], outer
    while isinstance(inner, tirx.For) and _tag(inner).startswith("blockIdx."):
        chain.append(inner)
        inner = inner.body
    block_vars = [loop.loop_var for loop in chain]
    body = _seq(block_fills(inner, block_vars) + [_threads(inner, orders)])
    dtype = "int64" if any(_dt(v) == "int64" for v in block_vars) else _dt(block_vars[0])
    total = sym.Analyzer().simplify(_product([_as(loop.extent, dtype) for loop in chain]))
    i = tirx.Var("block_i", dtype)
    flat = orders.index(i, total)
    mapping, stride = {}, None
    for loop in reversed(chain):  # innermost blockIdx varies fastest
        ext = _as(loop.extent, dtype)
        value = flat if stride is None else tirx.floordiv(flat, stride)
        value = tirx.floormod(value, ext) if loop is not chain[0] else value
        mapping[loop.loop_var.__chandle__()] = _as(value + _as(loop.min, dtype), _dt(loop.loop_var))
        stride = ext if stride is None else stride * ext
    return _loop(i, total, _substitute(body, mapping))


def _product(exprs):
    out = exprs[0]
    for e in exprs[1:]:
        out = out * e
    return out


def _as(expr, dtype: str):
    return expr if _dt(expr) == dtype else tirx.Cast(dtype, expr)


def _dt(expr) -> str:
    return str(expr.ty.dtype)


@dataclass
class _Nest:
    """A statement that is a nest of thread loops (with extent-1 loops allowed between)."""

    loops: list  # the threadIdx loops, outermost first
    wrappers: list  # extent-1 loops between them, outermost first
    body: tirx.Stmt  # what the innermost thread loop runs
    reduce_tags: set  # tags bound into a reduce axis (a cross-thread reduction)
    reads: set  # shared buffers read (handles)
    writes: set  # shared buffers written (handles)

    @property
    def tags(self) -> tuple[str, ...]:
        return tuple(_tag(loop) for loop in self.loops)


def _nest(stmt) -> _Nest | None:
    loops, wrappers, pending, s = [], [], [], stmt
    while isinstance(s, tirx.For):
        tag = _tag(s)
        if tag.startswith("threadIdx.") and tag not in {_tag(x) for x in loops} \
                and isinstance(s.min, tirx.IntImm) and s.min.value == 0 and isinstance(s.extent, tirx.IntImm):
            loops.append(s)
            wrappers += pending
            pending = []
        elif isinstance(s.extent, tirx.IntImm) and s.extent.value == 1 and not tag.startswith("threadIdx."):
            pending.append(s)
        else:
            break
        s = s.body
    if not loops:
        return None
    nest = _Nest(loops, wrappers, loops[-1].body, set(), set(), set())
    _scan(nest)
    return nest


def _scan(nest: _Nest) -> None:
    """Fill in the nest's shared accesses and the tags it reduces across."""
    by_var = {loop.loop_var.__chandle__(): _tag(loop) for loop in nest.loops}

    def on_store(store):
        if is_buffer_var(store.buffer) and str(store.buffer.scope()) in _SHARED:
            nest.writes.add(store.buffer.__chandle__())

    def on_load(load):
        if is_buffer_var(load.source) and str(load.source.scope()) in _SHARED:
            nest.reads.add(load.source.__chandle__())

    def on_realize(realize):
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            if iv.iter_type == tirx.IterVar.CommReduce:
                tvm_ffi.structural_walk(value, (ir.Var, lambda v: _note(v, by_var, nest.reduce_tags)))

    tvm_ffi.structural_walk(nest.body, [(tirx.BufferStore, on_store), (ir.TensorLoad, on_load),
                                        (SBlockRealize, on_realize)])


def _note(var, by_var: dict, tags: set) -> None:
    tag = by_var.get(var.__chandle__())
    if tag:
        tags.add(tag)


def _is_barrier(stmt) -> bool:
    value = stmt.value if isinstance(stmt, tirx.Evaluate) else None
    op = getattr(value, "op", None)
    return isinstance(value, ir.Call) and str(getattr(op, "name", "")) in _SYNC_CALLS


def _flat(stmt) -> list:
    if isinstance(stmt, tirx.SeqStmt):
        return [x for s in stmt.seq for x in _flat(s)]
    return [stmt]


def _inside(stmt, orders: _Orders):
    """A statement of the block that is no thread nest: its inner thread nests permuted.

    The threads of a block all run a serial loop (or all take the same branch: no thread
    variable is bound here), so permuting each iteration's segments is one of the orders
    a GPU may run them in.
    """
    if isinstance(stmt, tirx.For) and not _tag(stmt):
        return tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, _threads(stmt.body, orders),
                        None, stmt.annotations, stmt.step, stmt.span)
    if isinstance(stmt, tirx.IfThenElse):
        other = _threads(stmt.else_case, orders) if stmt.else_case is not None else None
        return tirx.IfThenElse(stmt.condition, _threads(stmt.then_case, orders), other)
    return stmt


def _threads(inner: tirx.Stmt, orders: _Orders) -> tirx.Stmt:
    """The statement a block runs, with its thread loop nests cut into permuted segments."""
    items = _flat(inner)
    out: list = []
    segment: list[_Nest] = []

    def flush():
        if segment:
            out.append(_segment(list(segment), orders))
            segment.clear()

    for item in items:
        if isinstance(item, tirx.Evaluate) and isinstance(item.value, tirx.IntImm):
            continue  # a no-op orders nothing
        nest = None if _is_barrier(item) else _nest(item)
        if nest is None:
            flush()
            out.append(item if _is_barrier(item) else _inside(item, orders))
            continue
        if segment and (nest.tags != segment[0].tags or _conflict(segment, nest)):
            flush()
        segment.append(nest)
        if nest.reduce_tags:  # an allreduce: its result is read after a synchronisation
            flush()
    flush()
    return _seq(out)


def _conflict(segment: list[_Nest], nest: _Nest) -> bool:
    reads = set().union(*(n.reads for n in segment))
    writes = set().union(*(n.writes for n in segment))
    return bool(nest.writes & (reads | writes) or nest.reads & writes)


def _segment(nests: list[_Nest], orders: _Orders) -> tirx.Stmt:
    """One serial loop per thread tag, permuted; every nest runs for each thread."""
    first = nests[0]
    extents = [max(int(n.loops[k].extent.value) for n in nests) for k in range(len(first.loops))]
    new_vars = [tirx.Var(f"{loop.loop_var.name}_p", _dt(loop.loop_var)) for loop in first.loops]
    fix = set().union(*(n.reduce_tags for n in nests))
    index = [orders.index(v, tirx.const(e, _dt(v)), _tag(loop) in fix)
             for v, e, loop in zip(new_vars, extents, first.loops)]
    stmts = []
    for nest in nests:
        mapping = {loop.loop_var.__chandle__(): _as(t, _dt(loop.loop_var)) for loop, t in zip(nest.loops, index)}
        body = nest.body
        for w in reversed(nest.wrappers):
            body = tirx.For(w.loop_var, w.min, w.extent, w.kind, body, w.thread_binding, w.annotations, w.step)
        body = _substitute(body, mapping)
        guards = [t < int(loop.extent.value) for loop, t, e in zip(nest.loops, index, extents)
                  if int(loop.extent.value) < e]
        if guards:
            cond = guards[0]
            for g in guards[1:]:
                cond = tirx.And(cond, g)
            body = tirx.IfThenElse(cond, body, None)
        stmts.append(body)
    body = _seq(stmts)
    for v, e in reversed(list(zip(new_vars, extents))):
        body = _loop(v, tirx.const(e, _dt(v)), body)
    return body
