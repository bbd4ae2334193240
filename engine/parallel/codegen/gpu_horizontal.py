"""Horizontal fusion for CUDA (Magneto): several dlight-scheduled PrimFuncs -> one kernel per
phase, its blocks partitioned among the members.

Grid: member i's blockIdx loops are flattened into the range [o_i, o_i + B_i) of one
`blockIdx.x` loop, dispatched by `if tvm_thread_invariant(b < o_{i+1})` (thread-invariant,
so barriers inside a member stay legal). The ranges follow `GpuLayout.order`.

Threads: the fused kernel has T threads per block (`GpuLayout.threads`; default: the most
threads a member that cannot be regrouped has). A member whose threads work alone
(`GpuStage.independent`, e.g. dlight's Fallback rule for pooling, concat, elementwise) is
regrouped into blocks of T threads: its B_i x T_i (block, thread) pairs become
ceil(B_i T_i / T) blocks of T, so no thread idles but the tail. Any other member keeps its
threads; when they are fewer than T, its thread chains become one predicated threadIdx.x
loop (`flatten_threads`) and the rest of its threads idle: `launch_shape` reports the idle
fraction. A member with a cross-thread reduction must already have T threads.

Shared memory: each block runs one member, and the members' `__shared__` arrays are
declared in different branches; ptxas overlays them (measured: inception_block's fused
1x1 convs, 6912 B each, fuse to 6912 B, not 20736), so the limit is checked against the
largest member. Members with several top-level grids (stages) take the last phases.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tvm import tirx

from engine.parallel.codegen.gpu import GpuStage, and_predicate, chain_dims, flatten_threads, gpu_member, _chains
from engine.parallel.tir_util import FusionUnsupported, dispatch, fresh_copy, fused_func, substitute, unravel


@dataclass(frozen=True)
class GpuLayout:
    """How members share the fused kernel: threads per block (0: the default rule) and the
    order of the members' block ranges (None: member order)."""

    threads: int = 0
    order: tuple[int, ...] | None = None

    def describe(self) -> str:
        order = "member order" if self.order is None else "order " + ",".join(map(str, self.order))
        return f"{self.threads or 'default'} threads/block, {order}"


@dataclass(frozen=True)
class LaunchShape:
    """What one fused launch looks like: facts of the generated kernel, before ptxas."""

    threads_per_block: int
    blocks: int
    member_blocks: tuple[int, ...]
    idle_threads: float  # share of the launched thread slots that have no work (blocks weighted)
    shared_bytes: int  # per block: the largest member's (each block runs one member)


def default_threads(stages: list[GpuStage]) -> int:
    fixed = [s.threads for s in stages if not s.independent]
    return max(fixed) if fixed else max(s.threads for s in stages)


def _regrouped(st: GpuStage, total: int) -> GpuStage:
    """The stage as blocks of `total` threads (see the module doc); exact for any body
    because every (block, thread) pair of the member maps to one global thread id."""
    (chain,) = _chains(st.inner)
    own = st.threads
    pairs = st.blocks * own
    blocks = -(-pairs // total)
    bv = tirx.Var("rb", "int64")
    t = tirx.Var("rt", chain[-1].loop_var.ty)
    i64 = lambda v: tirx.const(v, "int64")
    g = bv * i64(total) + (t if str(t.ty) == "int64" else tirx.Cast("int64", t))
    # the member's thread id is g % own, its block g // own
    mapping = {**unravel(g % i64(own), chain_dims(chain)), **unravel(g // i64(own), st.block_loops)}
    body = substitute(chain[-1].body, mapping)
    if blocks * total != pairs:
        body = and_predicate(body, g < i64(pairs))
    iv = tirx.IterVar(None, t, tirx.IterVar.ThreadIndex, "threadIdx.x")
    loop = tirx.For(t, tirx.const(0, t.ty), tirx.const(total, t.ty), tirx.ForKind.THREAD_BINDING, body, iv,
                    chain[-1].annotations)
    return replace(st, block_loops=((bv, blocks),), inner=loop, threads=total,
                   thread_config=(("threadIdx.x", total),), block_tags=("blockIdx.x",))


def shaped(stages: list[GpuStage], names: list[str], total: int) -> list[GpuStage]:
    """Every member's stage with `total` threads per block: regrouped when its threads work
    alone, else kept, or flattened to a predicated threadIdx.x loop when the members' thread
    layouts differ."""
    out = []
    for st, name in zip(stages, names):
        if st.independent and st.threads != total:
            st = _regrouped(st, total)
        elif st.threads > total:
            raise FusionUnsupported(f"{name}: {st.threads} threads per block, more than the fused "
                                    f"kernel's {total}, and its threads share data")
        out.append(st)
    if len({st.thread_config for st in out}) == 1:
        return out
    flat = (("threadIdx.x", total),)
    for k, (st, name) in enumerate(zip(out, names)):
        if st.thread_config == flat:
            continue
        if st.cross_thread_reduction:
            raise FusionUnsupported(f"{name}: cross-thread reduction over {st.threads} threads cannot be "
                                    f"re-threaded to the fused kernel's {total}")
        out[k] = replace(st, inner=flatten_threads(st.inner, total), threads=total, thread_config=flat,
                         busy=st.busy_threads)
    return out


def _phase(active: list[GpuStage], order: list[int], bv: tirx.Var) -> tirx.Stmt:
    ranges, bodies, start = [], [], 0
    for i in order:
        st = active[i]
        bodies.append(substitute(st.inner, unravel(bv - tirx.const(start, "int64"), st.block_loops)))
        ranges.append((start, start + st.blocks))
        start += st.blocks
    iv = tirx.IterVar(None, bv, tirx.IterVar.ThreadIndex, "blockIdx.x")
    return tirx.For(bv, tirx.const(0, "int64"), tirx.const(start, "int64"), tirx.ForKind.THREAD_BINDING,
                    dispatch(bv, ranges, bodies, wrap=tirx.op.tvm_thread_invariant), iv)


def _phases(members, names):
    n_phases = max(len(m.stages) for m in members)
    for p in range(n_phases):
        yield [(i, m.stages[p - (n_phases - len(m.stages))], n) for i, (m, n) in enumerate(zip(members, names))
               if p >= n_phases - len(m.stages)]


def _plan(members, names, layout: GpuLayout, max_threads: int):
    """(phase members as shaped stages with their member index, order within each phase)."""
    out = []
    for active in _phases(members, names):
        stages = [st for _, st, _ in active]
        total = layout.threads or default_threads(stages)
        if total > max_threads:
            raise FusionUnsupported(f"more than {max_threads} threads per block")
        shaped_stages = shaped(stages, [n for _, _, n in active], total)
        index = [i for i, _, _ in active]
        rank = {m: r for r, m in enumerate(layout.order)} if layout.order is not None else {}
        order = sorted(range(len(active)), key=lambda j: rank.get(index[j], index[j]))
        out.append((index, shaped_stages, order))
    return out


def plan_phase(members, names, layout: GpuLayout, max_threads: int = 1024):
    """The main (last) phase as `fuse_gpu` lays it out: (member index of each active stage,
    the stages with the fused kernel's threads, the launch order of those stages)."""
    _check_layout(layout, len(members))
    return _plan(members, names, layout, max_threads)[-1]


def _check_layout(layout: GpuLayout, n: int) -> None:
    if layout.order is not None and sorted(layout.order) != list(range(n)):
        raise ValueError(f"order {layout.order} is not a permutation of {n} members")


def fuse_gpu(funcs: list[tirx.PrimFunc], names: list[str], layout: GpuLayout = GpuLayout(),
             max_shared_bytes: int = 48 * 1024, max_threads: int = 1024) -> tirx.PrimFunc:
    """One kernel per phase running every member's blocks (see the module doc)."""
    _check_layout(layout, len(funcs))
    members = [gpu_member(fresh_copy(f), n) for f, n in zip(funcs, names)]
    shared = max(m.shared_bytes for m in members)
    if shared > max_shared_bytes:
        raise FusionUnsupported(f"a member needs {shared} bytes of shared memory, over the "
                                f"{max_shared_bytes}-byte limit per block")
    phases = [_phase(stages, order, tirx.Var(f"fused_b{p}", "int64"))
              for p, (_, stages, order) in enumerate(_plan(members, names, layout, max_threads))]
    body = phases[0] if len(phases) == 1 else tirx.SeqStmt(phases)
    return fused_func([m.parts for m in members], body, funcs[0])


def launch_shape(funcs: list[tirx.PrimFunc], names: list[str], layout: GpuLayout = GpuLayout(),
                 max_threads: int = 1024) -> LaunchShape:
    """The fused kernel's last (main) phase as `fuse_gpu` would build it: threads, blocks,
    idle thread share, shared memory."""
    members = [gpu_member(f, n) for f, n in zip(funcs, names)]
    _, stages, _ = plan_phase(members, names, layout, max_threads)
    total = stages[0].threads
    blocks = tuple(s.blocks for s in stages)
    busy = sum(s.blocks * s.busy_threads for s in stages)
    slots = sum(blocks) * total
    return LaunchShape(total, sum(blocks), blocks, round(1 - busy / slots, 4) if slots else 0.0,
                       max(m.shared_bytes for m in members))


__all__ = ["GpuLayout", "LaunchShape", "default_threads", "fuse_gpu", "launch_shape", "plan_phase", "shaped"]
