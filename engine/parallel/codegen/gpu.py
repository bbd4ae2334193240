"""CUDA kernels taken apart for fusion: a dlight-scheduled PrimFunc as stages of blockIdx
grids (`gpu_member`), its threads per block, shared memory per block and whether its
threads are independent (`GpuStage.reblockable`), plus the thread re-mapping both fusions
use (`flatten_threads`). Horizontal fusion: gpu_horizontal.py; block-level vertical:
gpu_vertical.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from tvm import ir, tirx
from tvm.tirx.buffer import is_buffer_var
from tvm.s_tir import SBlockRealize

from engine.parallel.tir_util import (FusionUnsupported, RootParts, buffer_bytes, root_parts, substitute,
                                      unravel, walk)
import tvm_ffi


def _tag(loop) -> str:
    iv = loop.thread_binding
    return str(iv.thread_tag) if loop.kind == tirx.ForKind.THREAD_BINDING and iv is not None else ""


def _const(x) -> int:
    if not isinstance(x, tirx.IntImm):
        raise FusionUnsupported("a thread-bound loop with a non-constant extent")
    return int(x.value)


@dataclass(frozen=True, eq=False)
class GpuStage:
    block_loops: tuple[tuple[tirx.Var, int], ...]  # outer -> inner
    inner: tirx.Stmt
    threads: int  # threads per block (product of the outermost thread chain)
    thread_config: tuple[tuple[str, int], ...]  # the outermost chain's (tag, extent)
    cross_thread_reduction: bool
    block_tags: tuple[str, ...] = ()  # the blockIdx tag of each of block_loops
    # every thread works alone (one thread chain right under the grid, no shared memory, no
    # cross-thread reduction): its (block, thread) pairs can be regrouped into blocks of any size
    independent: bool = False
    busy: int = 0  # threads that have work, when fewer than `threads` (a predicated member)

    @property
    def busy_threads(self) -> int:
        return self.busy or self.threads

    @property
    def blocks(self) -> int:
        return math.prod(e for _, e in self.block_loops)


@dataclass(frozen=True, eq=False)
class GpuMember:
    parts: RootParts
    stages: tuple[GpuStage, ...]
    shared_bytes: int

    @property
    def chunks(self) -> int:
        return max(s.blocks for s in self.stages)


def _chains(stmt) -> list[list]:
    """Maximal perfect chains of threadIdx-bound loops, outermost loops first (pre-order)."""
    chains: list[list] = []
    inside: set[int] = set()

    def on_for(loop):
        if not _tag(loop).startswith("threadIdx.") or loop.__chandle__() in inside:
            return
        chain = [loop]
        while isinstance(chain[-1].body, tirx.For) and _tag(chain[-1].body).startswith("threadIdx."):
            chain.append(chain[-1].body)
        inside.update(l.__chandle__() for l in chain)
        chains.append(chain)

    walk(stmt, tirx.For, on_for)
    return chains


def _has_cross_thread_reduction(stmt) -> bool:
    thread_vars: set[int] = set()
    walk(stmt, tirx.For, lambda l: thread_vars.add(l.loop_var.__chandle__())
         if _tag(l).startswith("threadIdx.") else None)
    found = [False]

    def on_realize(r):
        for iv, value in zip(r.block.iter_vars, r.iter_values):
            if iv.iter_type == tirx.IterVar.CommReduce and any(
                    v.__chandle__() in thread_vars for v in tirx.analysis.undefined_vars(value, [])):
                found[0] = True

    walk(stmt, SBlockRealize, on_realize)
    return found[0]


def _stage(stmt, name: str) -> GpuStage:
    loops, tags = [], []
    while isinstance(stmt, tirx.For) and _tag(stmt).startswith("blockIdx."):
        loops.append((stmt.loop_var, _const(stmt.extent)))
        tags.append(_tag(stmt))
        stmt = stmt.body
    if not loops:
        raise FusionUnsupported(f"{name}: a top-level statement without blockIdx loops")
    leftover = []
    walk(stmt, tirx.For, lambda l: leftover.append(l) if _tag(l).startswith("blockIdx.") else None)
    if leftover:
        raise FusionUnsupported(f"{name}: blockIdx loops below other loops")
    chains = _chains(stmt)
    if not chains:
        raise FusionUnsupported(f"{name}: no threadIdx loops")
    config = tuple((_tag(l), _const(l.extent)) for l in chains[0])
    reduction = _has_cross_thread_reduction(stmt)
    independent = (len(chains) == 1 and stmt.same_as(chains[0][0]) and not reduction
                   and not _uses_shared(stmt))
    return GpuStage(tuple(loops), stmt, math.prod(e for _, e in config), config, reduction, tuple(tags),
                    independent)


def _uses_shared(stmt) -> bool:
    found = [False]

    def on_var(var):
        if is_buffer_var(var) and str(var.scope()).startswith("shared"):
            found[0] = True

    walk(stmt, ir.Var, on_var)
    return found[0]


def shared_bytes(func: tirx.PrimFunc) -> int:
    """Shared memory per thread block, after buffer compaction (the root allocations of a
    block-level PrimFunc span the whole grid; each block only holds its tile)."""
    import tvm
    from tvm.s_tir import SBlock, transform as st

    mod = tvm.IRModule({"main": func})
    # the order of TVM's own lowering: CompactBufferAllocation refuses blocks with init
    mod = st.PlanAndUpdateBufferAllocationLocation()(st.LowerInitBlock()(mod))
    mod = st.CompactBufferAllocation()(st.ConvertBlocksToOpaque()(mod))
    total = [0]

    def on_block(block):
        for buf in block.alloc_buffers:
            if str(buf.scope()).startswith("shared"):
                total[0] += buffer_bytes(buf)

    walk(mod["main"], SBlock, on_block)
    return total[0]


def gpu_member(func: tirx.PrimFunc, name: str) -> GpuMember:
    parts = root_parts(func, name)
    stmts = list(parts.body.seq) if isinstance(parts.body, tirx.SeqStmt) else [parts.body]
    return GpuMember(parts, tuple(_stage(s, name) for s in stmts), shared_bytes(func))


def and_predicate(stmt, cond):
    def on_realize(r):
        pred = cond if (isinstance(r.predicate, tirx.IntImm) and r.predicate.value) \
            else tirx.And(r.predicate, cond)
        return SBlockRealize(r.iter_values, pred, r.block)

    return tvm_ffi.structural_map(stmt, (SBlockRealize, on_realize))


def chain_dims(chain) -> list[tuple[tirx.Var, int]]:
    """(loop var, extent) of a chain of thread loops, outermost first (for `unravel`)."""
    return [(l.loop_var, _const(l.extent)) for l in chain]


def flatten_threads(stmt, total: int):
    """Every threadIdx chain -> one threadIdx.x loop of `total` threads (see module doc)."""

    def on_for(loop):
        if not _tag(loop).startswith("threadIdx."):
            return loop
        chain = [loop]
        while isinstance(chain[-1].body, tirx.For) and _tag(chain[-1].body).startswith("threadIdx."):
            chain.append(chain[-1].body)
        extents = [_const(l.extent) for l in chain]
        if len(chain) == 1 and _tag(loop) == "threadIdx.x" and extents[0] == total:
            return loop
        t = tirx.Var("t", chain[-1].loop_var.ty)
        body = substitute(chain[-1].body, unravel(t, chain_dims(chain), str(t.ty)))
        if math.prod(extents) < total:
            body = and_predicate(body, t < tirx.const(math.prod(extents), t.ty))
        iv = tirx.IterVar(None, t, tirx.IterVar.ThreadIndex, "threadIdx.x")
        return tirx.For(t, tirx.const(0, t.ty), tirx.const(total, t.ty), tirx.ForKind.THREAD_BINDING,
                        body, iv, chain[-1].annotations)

    return tvm_ffi.structural_map(stmt, (tirx.For, on_for), order="pre")


def coarsen_threads(st: GpuStage, total: int) -> GpuStage:
    """An independent stage (`GpuStage.independent`) run by `total` threads per block, fewer than
    its own: thread t does the work of threads t, t + total, t + 2 total ... (a serial loop, the
    last round predicated). The block count is unchanged, so a block map still holds."""
    (chain,) = _chains(st.inner)
    own = st.threads
    t = tirx.Var("ct", chain[-1].loop_var.ty)
    r = tirx.Var("cr", t.ty)
    c = lambda v: tirx.const(v, t.ty)
    g = r * c(total) + t
    body = substitute(chain[-1].body, unravel(g, chain_dims(chain), str(t.ty)))
    rounds = -(-own // total)
    if rounds * total != own:
        body = and_predicate(body, g < c(own))
    inner = tirx.For(r, c(0), c(rounds), tirx.ForKind.SERIAL, body)
    iv = tirx.IterVar(None, t, tirx.IterVar.ThreadIndex, "threadIdx.x")
    loop = tirx.For(t, c(0), c(total), tirx.ForKind.THREAD_BINDING, inner, iv, chain[-1].annotations)
    return replace(st, inner=loop, threads=total, thread_config=(("threadIdx.x", total),))
