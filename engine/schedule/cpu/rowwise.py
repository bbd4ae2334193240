"""Default CPU schedule for row-wise kernels: softmax / log-softmax / layer-norm style
chains of blocks that share all leading spatial loops and reduce or map along the last.

All blocks are computed per row under one parallel loop (one thread-pool launch instead
of one per block, rows stay in L1), spatial inner loops are vectorised.
"""

from __future__ import annotations

from tvm import s_tir, tirx
from tvm.target import Target

from engine.schedule.cpu.common import MIN_PARALLEL_WORK, ScheduleRule, blocks_of, is_reduction_block, vector_lanes


def _extents(sch, block):
    out = []
    for l in sch.get_loops(block):
        e = sch.get(l).extent
        if not isinstance(e, tirx.IntImm):
            return None
        out.append(int(e))
    return out


def _split_row_reduction(sch: s_tir.Schedule, block, lanes: int):
    """Sum a row in `lanes` partial sums (rfactor) so that the loop can run on vectors: a
    serial sum waits on the add's latency at every element. Returns the partial-sum block
    (its partial sums are added in `block`), or None when the row does not split evenly or
    TIR knows no rfactor for the reduction."""
    inner = sch.get_loops(block)[-1]
    extent = sch.get(inner).extent
    if not isinstance(extent, tirx.IntImm) or int(extent) % lanes or int(extent) < 2 * lanes:
        return None
    try:
        _, lane = sch.split(inner, [None, lanes])
        return sch.rfactor(lane, factor_axis=len(sch.get(block).iter_vars) - 1)
    except Exception:  # pylint: disable=broad-except
        return None


def _vectorize_partials(sch: s_tir.Schedule, partial) -> None:
    """Zero the partial sums once, then add a vector of elements per step."""
    lane, chunk = sch.get_loops(partial)[-2:]  # rfactor puts the factored loop outside
    sch.reorder(chunk, lane)
    sch.vectorize(lane)  # while the block still holds its init: TIR refuses it after
    init = sch.decompose_reduction(partial, chunk)
    sch.vectorize(sch.get_loops(init)[-1])


class RowWise(ScheduleRule):
    name = "rowwise"

    def apply(self, func: tirx.PrimFunc, target: Target):
        sch = s_tir.Schedule(func)
        blocks = blocks_of(sch)
        if len(blocks) < 2 or not any(is_reduction_block(sch, b) for b in blocks):
            return None
        last = blocks[-1]
        if is_reduction_block(sch, last):
            return None
        shape = _extents(sch, last)
        if shape is None or len(shape) < 2:
            return None
        rows = shape[:-1]
        for b in blocks[:-1]:
            ext = _extents(sch, b)
            stmt = sch.get(b)
            # Same leading row loops, then one inner loop (the row's reduction or map) or none
            # (a per-row scalar: layer norm's mean between its two reductions).
            per_row = ext == rows and not is_reduction_block(sch, b)
            if ext is None or not per_row and (ext[:-1] != rows or len(ext) != len(shape)):
                return None
            if any(iv.iter_type != tirx.IterVar.DataPar for iv in stmt.iter_vars[: len(rows)]):
                return None
            if len(stmt.writes) != 1 or list(stmt.writes[0].source.shape)[: len(rows)] != list(
                sch.get(last).writes[0].source.shape
            )[: len(rows)]:
                return None
        work = 1
        for e in shape:
            work *= e
        lanes = vector_lanes(target)
        reductions = [b for b in blocks[:-1] if is_reduction_block(sch, b)]
        partials = [p for p in (_split_row_reduction(sch, b, lanes) for b in reductions) if p is not None]
        loops = sch.get_loops(last)
        row = sch.fuse(*loops[:-1]) if len(loops) > 2 else loops[0]
        for b in reversed(blocks_of(sch)[:-1]):
            sch.compute_at(b, row, preserve_unit_loops=True)
        if work >= MIN_PARALLEL_WORK:
            sch.parallel(row)
        for p in partials:
            _vectorize_partials(sch, p)
        for b in blocks:
            if is_reduction_block(sch, b):
                continue
            if len(sch.get_loops(b)) > 1:
                inner = sch.get_loops(b)[-1]
                n = int(sch.get(inner).extent)
                if n % lanes == 0 and n > lanes:
                    _, vec = sch.split(inner, [None, lanes])
                    sch.vectorize(vec)
                elif n <= 4 * lanes:
                    sch.vectorize(inner)
        return sch
