"""Block-level vertical fusion for CUDA (BlockDepend): a producer and a consumer kernel whose
block map is one-to-one run as one launch.

Grid: one `blockIdx.x` loop over the producer's blocks. Block b runs producer block b, a
block barrier (`__syncthreads`, which also makes the block's global writes visible to its
own threads), then the consumer blocks that read only producer block b (`link`, a
plan.BlockLink: b*r + k or b + k*P), with a barrier after each when there are several
(their shared-memory tiles are reused). A member's block index is linearised as the block
map numbers blocks (engine.blockdeps: blockIdx.z slowest, blockIdx.x fastest).

Threads: T = the larger thread count of the members whose threads share data. A member
whose threads work alone and has more is coarsened (each thread does several of its
threads' work); a member with fewer has its thread chains flattened to threadIdx.x and
predicated (as in horizontal fusion), so barriers stay outside predicates. A member with a
cross-thread reduction must already have T threads.

The intermediate stays in global memory: another reader may need it, and the consumer's
tile is read after the barrier from L1/L2 rather than DRAM. Shared memory per block is the
sum of both members' (checked against the target's limit).
"""

from __future__ import annotations

from dataclasses import replace

from tvm import tirx

from engine.parallel.codegen.gpu import GpuMember, GpuStage, coarsen_threads, flatten_threads, gpu_member
from engine.parallel.codegen.gpu_horizontal import LaunchShape
from engine.parallel.codegen.link import check_blocks, consumer_blocks, join_intermediate
from engine.parallel.tir_util import FusionUnsupported, fresh_copy, fused_func, substitute, unravel

_TAG_ORDER = {"blockIdx.z": 0, "blockIdx.y": 1, "blockIdx.x": 2}  # slowest first, as engine.blockdeps


def barrier() -> tirx.Stmt:
    """`__syncthreads()`: every thread of the block arrives; its memory writes are visible."""
    return tirx.Evaluate(tirx.op.tvm_storage_sync("shared"))


def _one_stage(m: GpuMember, name: str) -> GpuStage:
    if len(m.stages) != 1:
        raise FusionUnsupported(f"{name}: block-level vertical fusion needs one grid (found {len(m.stages)})")
    return m.stages[0]


def vertical_member_reason(func: tirx.PrimFunc, name: str) -> str:
    """Why `func` cannot be a member of a CUDA block-level vertical fusion ("" when it can)."""
    try:
        _one_stage(gpu_member(func, name), name)
    except FusionUnsupported as err:
        return str(err)
    return ""


def _at_block(st: GpuStage, index) -> tirx.Stmt:
    """The stage's per-block body with its blockIdx loop vars bound to linear block `index`."""
    order = sorted(range(len(st.block_loops)), key=lambda i: _TAG_ORDER.get(st.block_tags[i], 3)
                   if st.block_tags else i)
    return substitute(st.inner, unravel(index, [st.block_loops[i] for i in order]))


def _threads(ps: GpuStage, cs: GpuStage) -> int:
    """Threads per block of the fused pair: the larger of the members whose threads share
    data; an independent member with more is coarsened (coarsen_threads), not padded to."""
    fixed = [s.threads for s in (ps, cs) if not s.independent]
    return max(fixed) if fixed else max(ps.threads, cs.threads)


def _threaded(st: GpuStage, name: str, total: int, uniform: bool) -> GpuStage:
    if uniform:
        return st
    if st.independent and st.threads > total:
        return coarsen_threads(st, total)
    if st.cross_thread_reduction and (st.threads != total or len(st.thread_config) > 1):
        raise FusionUnsupported(f"{name}: cross-thread reduction over {st.threads} threads cannot be "
                                f"re-threaded to the fused kernel's {total}")
    return replace(st, inner=flatten_threads(st.inner, total), threads=total,
                   thread_config=(("threadIdx.x", total),))


def fuse_vertical_gpu(producer: tirx.PrimFunc, consumer: tirx.PrimFunc, names: list[str], link,
                      max_shared_bytes: int = 48 * 1024, max_threads: int = 1024) -> tirx.PrimFunc:
    """One kernel: block b runs producer block b, a barrier, then its consumer blocks (see the
    module doc). Takes the producer's inputs, the consumer's other inputs, then writes both
    outputs (the producer's may have other readers)."""
    p = gpu_member(fresh_copy(producer), names[0])
    c = gpu_member(fresh_copy(consumer), names[1])
    ps, cs = _one_stage(p, names[0]), _one_stage(c, names[1])
    check_blocks(ps.blocks, cs.blocks, link)
    joined, c_parts = join_intermediate(p.parts, c.parts, link, names[1])
    shared = p.shared_bytes + c.shared_bytes
    if shared > max_shared_bytes:
        raise FusionUnsupported(f"shared memory of the pair adds up to {shared} bytes, over the "
                                f"{max_shared_bytes}-byte limit per block")
    total = _threads(ps, cs)
    if total > max_threads:
        raise FusionUnsupported(f"more than {max_threads} threads per block")
    uniform = ps.thread_config == cs.thread_config
    ps, cs = _threaded(ps, names[0], total, uniform), _threaded(cs, names[1], total, uniform)
    cs = replace(cs, inner=substitute(cs.inner, joined))

    i64 = lambda v: tirx.const(v, "int64")
    b = tirx.Var("fused_b", "int64")
    # several consumer tiles reuse the block's shared memory: a barrier after each
    tail = consumer_blocks(b, link, ps.blocks, lambda index: _at_block(cs, index), barrier())
    iv = tirx.IterVar(None, b, tirx.IterVar.ThreadIndex, "blockIdx.x")
    grid = tirx.For(b, i64(0), i64(ps.blocks), tirx.ForKind.THREAD_BINDING,
                    tirx.SeqStmt([_at_block(ps, b), barrier(), tail]), iv)
    return fused_func([p.parts, c_parts], grid, producer)


def launch_shape(producer: tirx.PrimFunc, consumer: tirx.PrimFunc, link) -> LaunchShape:
    """The fused pair's launch: producer blocks, T threads, idle share of the thread slots
    (per block: one producer tile and `per` consumer tiles), shared memory of both."""
    p, c = gpu_member(producer, "producer"), gpu_member(consumer, "consumer")
    ps, cs = _one_stage(p, "producer"), _one_stage(c, "consumer")
    total = _threads(ps, cs)
    busy = sum(min(s.threads, total) * n for s, n in ((ps, 1), (cs, link.per_producer)))
    return LaunchShape(total, ps.blocks, (ps.blocks, cs.blocks),
                       round(1 - busy / ((1 + link.per_producer) * total), 4), p.shared_bytes + c.shared_bytes)


__all__ = ["barrier", "fuse_vertical_gpu", "launch_shape", "vertical_member_reason"]
