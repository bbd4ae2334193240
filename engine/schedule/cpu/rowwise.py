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
            # Same leading row loops, one inner loop (the row's reduction or map).
            if ext is None or ext[:-1] != rows or len(ext) != len(shape):
                return None
            if any(iv.iter_type != tirx.IterVar.DataPar for iv in stmt.iter_vars[:-1]):
                return None
            if len(stmt.writes) != 1 or list(stmt.writes[0].source.shape)[: len(rows)] != list(
                sch.get(last).writes[0].source.shape
            )[: len(rows)]:
                return None
        work = 1
        for e in shape:
            work *= e
        lanes = vector_lanes(target)
        loops = sch.get_loops(last)
        row = sch.fuse(*loops[:-1]) if len(loops) > 2 else loops[0]
        for b in reversed(blocks[:-1]):
            sch.compute_at(b, row, preserve_unit_loops=True)
        if work >= MIN_PARALLEL_WORK:
            sch.parallel(row)
        for b in blocks:
            if not is_reduction_block(sch, b):
                inner = sch.get_loops(b)[-1]
                n = int(sch.get(inner).extent)
                if n % lanes == 0 and n > lanes:
                    _, vec = sch.split(inner, [None, lanes])
                    sch.vectorize(vec)
                elif n <= 4 * lanes:
                    sch.vectorize(inner)
        return sch
