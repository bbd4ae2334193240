"""Default CPU schedule for a 2-D NCHW pooling window (max or average, + injective epilogue).

The generic rule (engine.schedule.cpu.rules.Fallback) inlines the padding into the window
and runs it as scalars, each tap behind a bounds check, and an average pool's sum and
division as two parallel passes. Here a task is one channel plane: it pads its plane into
a scratch buffer of its own (a few KiB, cache-resident; no bounds checks left), then
computes each output row as one vector of the whole row width, the window taps outside
it, the row's accumulator in registers, and writes the row with the epilogue applied.

Stride-1 windows only (inception's pool branches, inception_v2's average pools): per
kernel on a 2-core Zen 5, 0.36-0.72x the generic rule's time with AVX-512 code and
0.38-0.76x with AVX2 code (`haswell`). A strided window's taps are gathers: with the
scratch plane stored in column phases (y, x % s, x // s) the taps were contiguous, and
a copy split by phase let LLVM vectorise it, but the rule still ran 0.69-1.60x the
generic one (squeezenet's 64 planes of 111x111: 1.44x, 27x27: 0.69x; resnet50's 112x112,
padded: 0.92x), so strided windows keep the generic rule.
"""

from __future__ import annotations

import tvm
from tvm import s_tir, tirx
from tvm.target import Target

from engine.schedule.cpu.common import (ScheduleRule, blocks_of, fill_and_copy, is_reduction_block, iter_kinds,
                                        num_cores)
from engine.schedule.cpu.isa import isa_of

POOL_RULES = ("meta_schedule.pool_max", "meta_schedule.pool_avg")
# Output rows up to this many vectors wide are one vectorised row (their accumulators in
# registers); wider maps keep the generic rule.
MAX_ROW_VECTORS = 8
# Rows of fewer outputs keep the generic rule: a global window's 1-wide row ran 2.0x its
# time (resnet50's 2048 planes of 7x7), a 2-wide one 1.7x; 4-wide ones ran 0.69x.
MIN_ROW = 4


def _pool_blocks(sch: s_tir.Schedule):
    """(pad or None, window reduction, epilogue blocks) of a pooling PrimFunc, or None."""
    blocks = blocks_of(sch)
    names = [sch.get(b).name_hint for b in blocks]
    marked = any(sch.get(b).annotations.get("schedule_rule", "") in POOL_RULES for b in blocks)
    reds = [b for b in blocks if is_reduction_block(sch, b)]
    if not marked or len(reds) != 1:
        return None
    red = reds[0]
    stmt = sch.get(red)
    if iter_kinds(stmt) != "SSSSRR" or len(stmt.reads) != 1 or len(stmt.writes) != 1:
        return None
    idx = names.index(stmt.name_hint)
    before, after = blocks[:idx], blocks[idx + 1:]
    if len(before) > 1 or any(is_reduction_block(sch, b) for b in after):
        return None
    pad = before[0] if before else None
    if pad is not None and not sch.get(pad).writes[0].source.same_as(stmt.reads[0].source):
        return None
    return pad, red, after


def _window(stmt) -> tuple[int, int] | None:
    """(stride, dilation) of the window's column read: index ox * s + kx * d."""
    v = [iv.var for iv in stmt.iter_vars]
    col = stmt.reads[0].region[3].min
    coeffs = tvm.sym.detect_linear_equation(col, [v[3], v[5]])
    if len(coeffs) != 3 or not all(isinstance(c, tirx.IntImm) for c in coeffs):
        return None
    return int(coeffs[0]), int(coeffs[1])


class Pool2dRows(ScheduleRule):
    """A pooling window (max, or an average's sum and division) over NCHW planes: one
    task per channel plane, its padding into a per-task scratch plane, output rows as
    vectors."""

    name = "pool-rows"

    def apply(self, func: tirx.PrimFunc, target: Target):
        sch = s_tir.Schedule(func)
        found = _pool_blocks(sch)
        if found is None:
            return None
        pad, red, epilogue = found
        stmt = sch.get(red)
        window = _window(stmt)
        out_shape = [int(d) for d in stmt.writes[0].source.shape]
        if window is None or len(out_shape) != 4:
            return None
        stride, dilation = window
        n_n, n_c, _, n_w = out_shape
        cores, lanes = num_cores(target), isa_of(target).lanes()
        if not MIN_ROW <= n_w <= MAX_ROW_VECTORS * lanes or n_n * n_c < 2 * cores or stride != 1 or dilation != 1:
            return None
        try:
            for b in epilogue[:-1]:
                sch.compute_inline(b)
        except Exception:  # pylint: disable=broad-except
            return None
        if epilogue:
            sch.set_scope(red, 0, "local")
            last = epilogue[-1]
        else:
            last = sch.cache_write(red, 0, "local")
        n, c, oy, ox, ky, kx = sch.get_loops(red)
        par = sch.fuse(n, c)
        sch.parallel(par)
        sch.reorder(oy, ky, kx, ox)
        if pad is not None:  # no padding: the taps read the input itself
            sch.compute_at(pad, par, preserve_unit_loops=True)
        sch.vectorize(ox)
        init = sch.decompose_reduction(red, ky)
        sch.vectorize(sch.get_loops(init)[-1])
        sch.reverse_compute_at(last, oy, preserve_unit_loops=True)
        sch.vectorize(sch.get_loops(last)[-1])
        # the padding as a fill of the plane, then a copy of the input rows: both vector
        # loops with no bounds check (832 planes of 7x7: 0.85x -> 0.51x the generic rule)
        if pad is not None and not fill_and_copy(sch, pad):
            return None  # not a constant padding: the generic rule's bounds checks
        return sch
