"""Shared pieces of the default CPU schedule rules (rule base class, loop helpers)."""

from __future__ import annotations

import tvm_ffi
from tvm import s_tir, tirx
from tvm.target import Target

from engine.cores import cpu_threads
from engine.schedule.cpu.isa import isa_of
from engine.schedule.cpu.ragged import mark_ragged_row

_get_sblock_realize = tvm_ffi.get_global_func("s_tir.schedule.GetSBlockRealize")

# Kernels with less work than this many loop iterations stay single-threaded: waking the
# thread pool costs more than it saves.
MIN_PARALLEL_WORK = 4096
# Wanted parallel chunks per core (load balance across uneven chunks).
CHUNKS_PER_CORE = 8


class ScheduleRule:
    """A default schedule for one class of PrimFunc.

    ``apply`` returns a ``tvm.s_tir.Schedule`` when the rule fits ``func``, else None
    (and must then leave nothing behind: every rule works on its own Schedule).
    """

    name = "rule"

    def apply(self, func: tirx.PrimFunc, target: Target) -> s_tir.Schedule | None:
        raise NotImplementedError


def num_cores(target: Target) -> int:
    n = target.attrs.get("num-cores", None) if target is not None else None
    return int(n) if n else cpu_threads()


def vector_lanes(target: Target | None, dtype_bits: int = 32) -> int:
    return isa_of(target).lanes(dtype_bits)


def blocks_of(sch: s_tir.Schedule) -> list:
    """The blocks directly under the root block, in program order."""
    return list(sch.get_child_blocks(sch.get_sblock("root")))


def opaque_buffers(sch: s_tir.Schedule) -> list:
    """Buffers (Vars) that a root-level block touches without declaring it: blocks with no
    reads and no writes wrap extern calls and hand-written loops (NonMaxSuppression's
    argsort, searchsorted). Inlining a block into or out of such a buffer would remove an
    allocation these blocks still use."""
    found: list = []

    def note(access):
        if not any(access.buffer.same_as(b) for b in found):
            found.append(access.buffer)

    for b in blocks_of(sch):
        stmt = sch.get(b)
        if not stmt.reads and not stmt.writes:
            tvm_ffi.structural_walk(stmt.body, [(tirx.BufferLoad, note), (tirx.BufferStore, note)], order="pre")
    return found


def is_reduction_block(sch: s_tir.Schedule, block) -> bool:
    return reduces(sch.get(block))


def reduces(stmt) -> bool:
    """Whether a block statement has a reduction iter var (a conv's, matmul's or pool's sum)."""
    return any(iv.iter_type == tirx.IterVar.CommReduce for iv in stmt.iter_vars)


def iter_kinds(stmt) -> str:
    """'S'/'R' per iter var of a block statement (data-parallel or not), e.g. "SSSSRRR"."""
    return "".join("S" if iv.iter_type == tirx.IterVar.DataPar else "R" for iv in stmt.iter_vars)


def _extent(sch, loop) -> int | None:
    ext = sch.get(loop).extent
    return int(ext) if isinstance(ext, tirx.IntImm) else None


def loop_kinds(sch: s_tir.Schedule, block) -> list[str]:
    """'S'/'R' per loop of ``block``: R when the loop variable feeds a reduction iter."""
    stmt = sch.get(block)
    realize = _get_sblock_realize(sch, block)
    red_vars = []
    for iv, val in zip(stmt.iter_vars, realize.iter_values):
        if iv.iter_type != tirx.IterVar.DataPar:
            red_vars += tirx.analysis.undefined_vars(val, [])
    return [
        "R" if any(v.same_as(sch.get(l).loop_var) for v in red_vars) else "S"
        for l in sch.get_loops(block)
    ]


def fill_and_copy(sch: s_tir.Schedule, pad) -> bool:
    """Split a padding block computed at a task's loop (its scratch plane) into a vector fill
    of the pad value, then a vector copy of the input rows, neither with a bounds check;
    False when the padding is not a constant one (the block is then left as it was)."""
    try:
        fill = sch.decompose_padding(pad, sch.get_loops(pad)[1])
    except Exception:  # pylint: disable=broad-except
        return False
    sch.vectorize(sch.get_loops(fill)[-1])
    sch.vectorize(sch.get_loops(pad)[-1])
    return True


def parallelize(sch: s_tir.Schedule, block, cores: int, vectorize: bool = True, lanes: int = 16,
                by_row: bool = False):
    """Parallelise the fused leading spatial loops of ``block``; vectorise its innermost
    loop when it is spatial (and, in the source layouts, the contiguous one). `by_row`: fuse
    every outer loop, so a chunk is one row (a conv's padding pass: a row-band fusion
    (engine.parallel.codegen.cpu_rows) then pads only the rows its band needs)."""
    loops = sch.get_loops(block)
    if not loops:
        return
    kinds = loop_kinds(sch, block)
    exts = [_extent(sch, l) for l in loops]
    if any(e is None for e in exts):  # dynamic shapes: just the outermost loop
        if kinds[0] == "S":
            sch.parallel(loops[0])
        return
    work = 1
    for e in exts:
        work *= e
    n_lead = 0
    while n_lead < len(loops) and kinds[n_lead] == "S":
        n_lead += 1
    outer = list(loops[:n_lead])
    if n_lead == len(loops) and n_lead > 1:
        # All spatial: the innermost loop stays serial for vectorisation.
        inner = outer.pop()
        if vectorize and exts[-1] > 1:
            if exts[-1] % lanes == 0 and exts[-1] > lanes:
                _, vec = sch.split(inner, [None, lanes])
                sch.vectorize(vec)
            else:  # a ragged row: the build splits it (engine.schedule.cpu.ragged)
                mark_ragged_row(sch, inner, exts[-1], lanes)
    if not outer or work < MIN_PARALLEL_WORK:
        return
    # Fuse just enough leading loops for CHUNKS_PER_CORE chunks per core; keeping the rest
    # serial avoids div/mod index math in the inner loops.
    k, prod = 0, 1
    while k < len(outer) and (prod < CHUNKS_PER_CORE * cores or by_row):
        prod *= exts[k]
        k += 1
    if prod <= 1:
        return
    fused = sch.fuse(*outer[:k]) if k > 1 else outer[0]
    sch.parallel(fused)


PREPROC_ATTR = "meta_schedule.layout_rewrite_preproc"  # MetaSchedule's mark of a weight repack block


def has_preproc(node) -> bool:
    """Whether `node` (a PrimFunc or statement) holds a block marked as a weight repack."""
    found = []
    tvm_ffi.structural_walk(node, (s_tir.SBlock, lambda b: found.append(PREPROC_ATTR in b.annotations)),
                            order="pre")
    return any(found)
