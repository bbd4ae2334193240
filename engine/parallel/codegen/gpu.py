"""Horizontal fusion for CUDA: several dlight-scheduled PrimFuncs -> one kernel per phase.

Grid: member i's blockIdx loops (a perfect nest at the top of a stage, blockIdx.y/x...)
are flattened into the range [o_i, o_i + B_i) of one `blockIdx.x` loop of extent sum B_i,
dispatched by `if tvm_thread_invariant(b < o_{i+1})` (thread-invariant, so barriers
inside a member stay legal). Threads: when members differ, every chain of thread-bound
loops (threadIdx.y -> threadIdx.x ...) becomes one `threadIdx.x` loop of extent
T = max member threads, the old indices are recovered by div/mod and every block under
it gets the predicate `t < n_chain` (blocks are leaves: barriers, inserted between loops,
stay outside the predicates and every thread reaches them). Shared memory: members'
allocations are summed (checked against the target's limit). A member with a
cross-thread reduction keeps its thread loops, so it must already have T threads.
Members with several top-level kernels (stages) take the last phases, as on the CPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tvm import tirx
from tvm.s_tir import SBlockRealize

from engine.parallel.tir_util import (FusionUnsupported, RootParts, dispatch, fresh_copy,
                                      fused_func, root_parts, substitute, walk)
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
    return GpuStage(tuple(loops), stmt, math.prod(e for _, e in config), config,
                    _has_cross_thread_reduction(stmt), tuple(tags))


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
                total[0] += math.prod(_const(d) for d in buf.ty.shape) * buf.dtype.itemsize

    walk(mod["main"], SBlock, on_block)
    return total[0]


def gpu_member(func: tirx.PrimFunc, name: str) -> GpuMember:
    parts = root_parts(func, name)
    stmts = list(parts.body.seq) if isinstance(parts.body, tirx.SeqStmt) else [parts.body]
    return GpuMember(parts, tuple(_stage(s, name) for s in stmts), shared_bytes(func))


def _and_predicate(stmt, cond):
    def on_realize(r):
        pred = cond if (isinstance(r.predicate, tirx.IntImm) and r.predicate.value) \
            else tirx.And(r.predicate, cond)
        return SBlockRealize(r.iter_values, pred, r.block)

    return tvm_ffi.structural_map(stmt, (SBlockRealize, on_realize))


def _flatten_threads(stmt, total: int):
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
        mapping, stride = {}, 1
        for l, e in reversed(list(zip(chain, extents))):
            idx = t // tirx.const(stride, t.ty) if stride > 1 else t
            mapping[l.loop_var.__chandle__()] = idx % tirx.const(e, t.ty) if l is not chain[0] else idx
            stride *= e
        body = substitute(chain[-1].body, mapping)
        if stride < total:
            body = _and_predicate(body, t < tirx.const(stride, t.ty))
        iv = tirx.IterVar(None, t, tirx.IterVar.ThreadIndex, "threadIdx.x")
        return tirx.For(t, tirx.const(0, t.ty), tirx.const(total, t.ty), tirx.ForKind.THREAD_BINDING,
                        body, iv, chain[-1].annotations)

    return tvm_ffi.structural_map(stmt, (tirx.For, on_for), order="pre")


def _phase(active: list[GpuStage], names: list[str], bv: tirx.Var) -> tirx.Stmt:
    configs = {s.thread_config for s in active}
    total = max(s.threads for s in active)
    ranges, bodies, start = [], [], 0
    for st, name in zip(active, names):
        body = st.inner
        if len(configs) > 1:
            if st.cross_thread_reduction and (st.threads != total or len(st.thread_config) > 1):
                raise FusionUnsupported(
                    f"{name}: cross-thread reduction over {st.threads} threads cannot be re-threaded "
                    f"to the fused kernel's {total}")
            body = _flatten_threads(body, total)
        local = bv - tirx.const(start, "int64")
        mapping, stride = {}, 1
        for var, ext in reversed(st.block_loops):
            idx = local // tirx.const(stride, "int64") if stride > 1 else local
            if var is not st.block_loops[0][0]:
                idx = idx % tirx.const(ext, "int64")
            mapping[var.__chandle__()] = idx if str(var.ty) == "int64" else tirx.Cast(str(var.ty), idx)
            stride *= ext
        bodies.append(substitute(body, mapping))
        ranges.append((start, start + st.blocks))
        start += st.blocks
    iv = tirx.IterVar(None, bv, tirx.IterVar.ThreadIndex, "blockIdx.x")
    return tirx.For(bv, tirx.const(0, "int64"), tirx.const(start, "int64"), tirx.ForKind.THREAD_BINDING,
                    dispatch(bv, ranges, bodies, wrap=tirx.op.tvm_thread_invariant), iv)


def fuse_gpu(funcs: list[tirx.PrimFunc], names: list[str], max_shared_bytes: int = 48 * 1024,
             max_threads: int = 1024) -> tirx.PrimFunc:
    members = [gpu_member(fresh_copy(f), n) for f, n in zip(funcs, names)]
    shared = sum(m.shared_bytes for m in members)
    if shared > max_shared_bytes:
        raise FusionUnsupported(f"shared memory of the members adds up to {shared} bytes, over the "
                                f"{max_shared_bytes}-byte limit per block")
    n_phases = max(len(m.stages) for m in members)
    phases = []
    for p in range(n_phases):
        active = [(m.stages[p - (n_phases - len(m.stages))], n) for m, n in zip(members, names)
                  if p >= n_phases - len(m.stages)]
        if max(s.threads for s, _ in active) > max_threads:
            raise FusionUnsupported(f"more than {max_threads} threads per block")
        phases.append(_phase([s for s, _ in active], [n for _, n in active],
                             tirx.Var(f"fused_b{p}", "int64")))
    body = phases[0] if len(phases) == 1 else tirx.SeqStmt(phases)
    return fused_func([m.parts for m in members], body, funcs[0])
