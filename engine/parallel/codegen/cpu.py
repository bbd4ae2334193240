"""Horizontal fusion for llvm: several scheduled PrimFuncs -> one kernel.

A member's root body is a sequence of stages: a `T.parallel` loop (n chunks) or a serial
statement (one chunk), e.g. a 3x3 conv's padding loop then its conv loop. The fused
kernel runs phases; member stages are aligned to the last phase (a member with s stages
takes the last s phases); the end of a parallel loop is the barrier between a member's
stages. In a phase the members' parallel loops become one `T.parallel` loop, either
contiguous (member i's n_i iterations are the range [o_i, o_i + n_i) of a loop of
sum n_i, selected by `if` dispatch) or sliced (default: iteration w of a loop of
P = max n_i runs iterations [w*n_i/P, (w+1)*n_i/P) of every member i). How the chunks
share the loop is a `CpuLayout`, the knob co-tuning searches (engine.tuning.cotune): in
contiguous mode member i may be regrouped into k_i < n_i chunks (its share of the loop).
The fused PrimFunc takes all members' inputs, then all members' outputs (`call_tir` with
a tuple output). `fuse_vertical_cpu` is the block-level vertical fusion of a producer and
a consumer whose block map is one-to-one.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm_ffi
from tvm import tirx
from tvm.s_tir import SBlock

from engine.parallel.codegen.link import check_blocks, consumer_blocks, join_intermediate
from engine.parallel.tir_util import (FusionUnsupported, RootParts, buffer_bytes, count, dispatch, fresh_copy,
                                      fused_func, root_parts, substitute)
from engine.schedule.cpu.common import CHUNKS_PER_CORE, reduces


@dataclass(frozen=True)
class CpuLayout:
    """How members share the fused parallel loop.

    sliced: every fused iteration runs a proportional slice of every member (the runtime's
    static split then gives each core the same share of each member); `tasks` > 0 caps the
    loop at that many iterations (e.g. the core count; 1 runs the phase serially). Contiguous (sliced=False): member i
    owns a range of the loop, `shares[i]` chunks of it (None: one chunk per iteration of its
    own parallel loop), so the shares decide how its work lands on the cores."""

    sliced: bool = True
    tasks: int = 0
    shares: tuple[int, ...] | None = None

    def describe(self) -> str:
        if self.sliced:
            return f"sliced, {self.tasks or 'max'} tasks"
        return "contiguous, shares " + ("natural" if self.shares is None else "/".join(map(str, self.shares)))


@dataclass(frozen=True, eq=False)
class CpuStage:
    loop_var: tirx.Var | None  # None: a serial statement, one chunk
    chunks: int
    body: tirx.Stmt  # the parallel loop's body, or the whole statement


@dataclass(frozen=True, eq=False)
class CpuMember:
    parts: RootParts
    stages: tuple[CpuStage, ...]

    @property
    def chunks(self) -> int:
        return max(s.chunks for s in self.stages)


def _is_parallel(loop) -> bool:
    return loop.kind == tirx.ForKind.PARALLEL


def _stage(stmt, name: str) -> CpuStage:
    n_parallel = count(stmt, tirx.For, _is_parallel)
    if n_parallel == 0:
        return CpuStage(None, 1, stmt)
    if isinstance(stmt, tirx.For) and _is_parallel(stmt) and n_parallel == 1 \
            and isinstance(stmt.min, tirx.IntImm) and stmt.min.value == 0 \
            and isinstance(stmt.extent, tirx.IntImm):
        return CpuStage(stmt.loop_var, int(stmt.extent.value), stmt.body)
    raise FusionUnsupported(f"{name}: a parallel loop nested below the outer loops")


def cpu_member(func: tirx.PrimFunc, name: str) -> CpuMember:
    """How `func` splits into stages of parallel chunks; FusionUnsupported when it does not."""
    parts = root_parts(func, name)
    stmts = list(parts.body.seq) if isinstance(parts.body, tirx.SeqStmt) else [parts.body]
    stages: list[CpuStage] = []
    for stmt in stmts:
        stage = _stage(stmt, name)
        if stage.loop_var is None and stages and stages[-1].loop_var is None:
            stages[-1] = CpuStage(None, 1, tirx.SeqStmt([stages[-1].body, stage.body]))
        else:
            stages.append(stage)
    return CpuMember(parts, tuple(stages))


def _local(st: CpuStage, index) -> tirx.Stmt:
    if str(st.loop_var.ty) != "int64":
        index = tirx.Cast(str(st.loop_var.ty), index)
    return substitute(st.body, {st.loop_var.__chandle__(): index})


def _phase_sliced(members: list[tuple[int, CpuStage]], fv: tirx.Var, tasks: int) -> tirx.Stmt:
    """Fused iteration w runs slice [w*n_i/P, (w+1)*n_i/P) of every member i (P = max n_i):
    the runtime's static split of the parallel loop then gives every core the same share
    of every member, whatever their per-chunk costs."""
    n_iter = max(st.chunks for _, st in members)
    if tasks > 0:
        n_iter = min(n_iter, tasks)
    i64 = lambda v: tirx.const(v, "int64")
    stmts = []
    for k, (_, st) in enumerate(members):
        if st.loop_var is None:  # one chunk: spread the serial members over the iterations
            stmts.append(tirx.IfThenElse(fv == i64(k * n_iter // len(members)), st.body, None))
        elif st.chunks == n_iter:
            stmts.append(_local(st, fv))
        else:
            lo = fv * i64(st.chunks) // i64(n_iter)
            hi = (fv + i64(1)) * i64(st.chunks) // i64(n_iter)
            j = tirx.Var(f"{st.loop_var.name}_s", "int64")
            stmts.append(tirx.For(j, i64(0), hi - lo, tirx.ForKind.SERIAL, _local(st, lo + j)))
    body = stmts[0] if len(stmts) == 1 else tirx.SeqStmt(stmts)
    # one task: no thread-pool launch at all (tiny groups, where waking the pool costs more
    # than the work)
    kind = tirx.ForKind.PARALLEL if n_iter > 1 else tirx.ForKind.SERIAL
    return tirx.For(fv, i64(0), i64(n_iter), kind, body)


def _regrouped(st: CpuStage, j, k: int) -> tirx.Stmt:
    """Chunk j of k of the stage: its iterations [j*n/k, (j+1)*n/k), serially."""
    i64 = lambda v: tirx.const(v, "int64")
    lo = j * i64(st.chunks) // i64(k)
    hi = (j + i64(1)) * i64(st.chunks) // i64(k)
    r = tirx.Var(f"{st.loop_var.name}_r", "int64")
    return tirx.For(r, i64(0), hi - lo, tirx.ForKind.SERIAL, _local(st, lo + r))


def _phase(members: list[tuple[int, CpuStage]], fv: tirx.Var, layout: CpuLayout) -> tirx.Stmt:
    if len(members) == 1 and members[0][1].loop_var is None:
        return members[0][1].body
    if layout.sliced:
        return _phase_sliced(members, fv, layout.tasks)
    ranges, bodies, start = [], [], 0
    for m, st in members:
        k = st.chunks
        if layout.shares is not None and st.loop_var is not None:
            k = max(1, min(layout.shares[m], st.chunks))
        local = fv - tirx.const(start, "int64")
        if st.loop_var is None:
            bodies.append(st.body)
        elif k == st.chunks:
            bodies.append(_local(st, local))
        else:
            bodies.append(_regrouped(st, local, k))
        ranges.append((start, start + k))
        start += k
    return tirx.For(fv, tirx.const(0, "int64"), tirx.const(start, "int64"), tirx.ForKind.PARALLEL,
                    dispatch(fv, ranges, bodies))


def fuse_cpu(funcs: list[tirx.PrimFunc], names: list[str], layout: CpuLayout = CpuLayout()) -> tirx.PrimFunc:
    """One PrimFunc running every member's chunks, phase by phase, shared as `layout` says
    (see CpuLayout and the module doc)."""
    if layout.shares is not None and len(layout.shares) != len(funcs):
        raise ValueError(f"{len(layout.shares)} shares for {len(funcs)} members")
    members = [cpu_member(fresh_copy(f), n) for f, n in zip(funcs, names)]
    n_phases = max(len(m.stages) for m in members)
    phases = []
    for p in range(n_phases):
        active = [(i, m.stages[p - (n_phases - len(m.stages))]) for i, m in enumerate(members)
                  if p >= n_phases - len(m.stages)]
        phases.append(_phase(active, tirx.Var(f"fused_p{p}", "int64"), layout))
    body = phases[0] if len(phases) == 1 else tirx.SeqStmt(phases)
    return fused_func([m.parts for m in members], body, funcs[0])


def _not_one_parallel_loop(m: CpuMember) -> str:
    if len(m.stages) != 1:
        return f"found {len(m.stages)} stages"
    return "its one stage is serial" if m.stages[0].loop_var is None else ""


def vertical_member_reason(func: tirx.PrimFunc, name: str) -> str:
    """Why `func` cannot be a member of a block-level vertical fusion ("" when it can)."""
    try:
        return _not_one_parallel_loop(cpu_member(func, name))
    except FusionUnsupported as err:
        return str(err)


# When both members reduce (two convs), a fused chunk runs a group of consecutive producer
# blocks, then their consumer blocks; the group is the largest that leaves every core
# CHUNKS_PER_CORE chunks (the default schedules' count) and its intermediate in GROUP_BYTES.
# Block by block, resnet50's projection -> expansion pairs alternated two convs' 64-plane
# input streams every 8 x 32 outputs: 0.92-1.01x their members' time alone, grouped
# 0.95-1.26x (2-core Zen 5, each kernel alone). Injective pairs stay block by block
# (densenet121's concat -> batch norm: 1.06-1.13x so, 0.86-1.03x grouped).
GROUP_BYTES = 256 * 1024


def _reduces(stmt: tirx.Stmt) -> bool:
    """Whether `stmt` holds a reduction block (a conv's or matmul's sum)."""
    found = []
    tvm_ffi.structural_walk(stmt, (SBlock, lambda b: found.append(reduces(b))), order="pre")
    return any(found)


def block_group(blocks: int, block_bytes: int, cores: int) -> int:
    """The producer blocks one fused chunk runs (a divisor of `blocks`)."""
    best = 1
    for g in range(1, blocks + 1):
        if blocks % g == 0 and blocks // g >= CHUNKS_PER_CORE * cores and g * block_bytes <= GROUP_BYTES:
            best = g
    return best


def fuse_vertical_cpu(producer: tirx.PrimFunc, consumer: tirx.PrimFunc, names: list[str], link,
                      cores: int = 1) -> tirx.PrimFunc:
    """Block-level vertical fusion (BlockDepend): one parallel loop over groups of the
    producer's blocks (block_group); a chunk runs its producer blocks, then the consumer
    blocks that read only them (`link`, a plan.BlockLink), so each consumer block reads data
    its own core just wrote. The fused kernel takes the producer's inputs, the consumer's
    other inputs, then writes both outputs (the producer's may have other readers)."""
    p = cpu_member(fresh_copy(producer), names[0])
    c = cpu_member(fresh_copy(consumer), names[1])
    for m, name in ((p, names[0]), (c, names[1])):
        why = _not_one_parallel_loop(m)
        if why:
            raise FusionUnsupported(f"{name}: block-level vertical fusion needs exactly one parallel loop ({why})")
    ps, cs = p.stages[0], c.stages[0]
    check_blocks(ps.chunks, cs.chunks, link)
    joined, c_parts = join_intermediate(p.parts, c.parts, link, names[1])
    c_stage = CpuStage(cs.loop_var, cs.chunks, substitute(cs.body, joined))
    i64 = lambda v: tirx.const(v, "int64")
    group = block_group(ps.chunks, buffer_bytes(p.parts.output) // ps.chunks, cores) \
        if _reduces(ps.body) and _reduces(cs.body) else 1
    g, b, bc = tirx.Var("fused_g", "int64"), tirx.Var("fused_b", "int64"), tirx.Var("fused_bc", "int64")
    first = g * i64(group)
    body = tirx.SeqStmt([
        tirx.For(b, i64(0), i64(group), tirx.ForKind.SERIAL, _local(ps, first + b)),
        tirx.For(bc, i64(0), i64(group), tirx.ForKind.SERIAL,
                 consumer_blocks(first + bc, link, ps.chunks, lambda index: _local(c_stage, index)))])
    loop = tirx.For(g, i64(0), i64(ps.chunks // group), tirx.ForKind.PARALLEL, body)
    return fused_func([p.parts, c_parts], loop, producer)
