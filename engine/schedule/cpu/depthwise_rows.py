"""Default CPU schedule for a stride-1 depthwise conv2d on NCHW rows (llvm, where
`Isa.depthwise_rows`: AVX-512).

The channel-vector rule (engine.schedule.cpu.conv) runs a depthwise conv on an input
repacked channel-innermost, which costs a pass over the input that gathers from `ft`
channel planes, and each FMA of its micro-kernel needs its own input load. Here the
vector runs along the output row instead, which NCHW stores contiguously: a tile is `rt`
output rows of one channel, each a vector of the whole row width, so the padded input row
y + ky serves all the tile's rows that need it and each load feeds several FMAs; the
kernel's weights are scalars broadcast once per channel.

Where the planes give every core several (`plane_tasks`), a task is one channel plane: it
pads its plane into a scratch plane of its own (a few KiB, cache-resident: a vector fill
and a vector copy) and runs the plane's row tiles from it, so there is no padding pass over
the whole input and no padded copy in memory. The kernel is then one parallel loop whose
task c reads only plane c of its input: a 1x1 conv producing those planes fuses with it
in channel bands (engine.parallel.rows). With few planes the padding stays a separate
parallel pass and a task is one row tile, which row-band fusion (engine.parallel.codegen.
cpu_rows) takes as its row unit. Measured on a 2-core AVX-512 EPYC: mobilenet_block's
192@28x28 depthwise 0.036 -> 0.029 ms alone with row tiles (the channel rule's time
first), 0.027 -> 0.022 ms per plane; mobilenet_block end to end 0.86x per plane against
row tiles (0.83x with its expand -> depthwise pairs fused, where row tiles gave 0.92x
with depthwise -> project row bands), shufflenet 0.99x.
"""

from __future__ import annotations

from tvm import s_tir, tirx
from tvm.target import Target

from engine.schedule.cpu.common import ScheduleRule, fill_and_copy, num_cores, parallelize
from engine.schedule.cpu.conv import conv_stages, match_conv
from engine.schedule.cpu.isa import isa_of

# Row widths up to this many vectors are one vectorised row; wider rows go to the
# channel-vector rule. A tile holds at most MAX_ACCUMULATORS row vectors and at least half
# as many: on a 2-core AVX-512 EPYC, 28-wide rows ran 0.79x the channel rule's time with
# 4-row tiles and 2.7x with 7-row ones (spills), 14-wide rows 0.87x with 7 rows and 1.8x
# with 2.
# Up to four vectors per row: AVX-512 56-wide rows (2-row tiles) ran 0.57-0.59x, AVX2 code's
# 28-wide 0.76x (per kernel, 2-core Zen 5; 112-wide rows, 7 AVX-512 vectors, not measured).
MAX_ROW_VECTORS = 4
MAX_ACCUMULATORS = 8
# Tasks per core from which a task is a whole channel plane (padded in the task).
PLANE_TASKS_PER_CORE = 4


def plane_tasks(planes: int, cores: int) -> bool:
    """Whether `planes` channel planes give each of `cores` at least PLANE_TASKS_PER_CORE
    tasks (a static split of fewer leaves a core idle for a whole plane)."""
    return planes >= PLANE_TASKS_PER_CORE * cores


def row_tile(n_h: int, width: int, lanes: int) -> int | None:
    """Output rows per tile: the most dividing the height with at most MAX_ACCUMULATORS
    row vectors; None for rows narrower than half a vector (a 7-wide row measured 1.4x
    slower than the channel-vector rule) or wider than MAX_ROW_VECTORS vectors."""
    vectors = -(-width // lanes)
    if vectors > MAX_ROW_VECTORS or 2 * width < lanes:
        return None
    fits = [rt for rt in range(1, n_h + 1) if n_h % rt == 0 and rt * vectors <= MAX_ACCUMULATORS]
    return fits[-1] if fits and fits[-1] * vectors >= MAX_ACCUMULATORS // 2 else None


class DepthwiseRows(ScheduleRule):
    """Depthwise (one input channel per group), stride 1, conv2d (+ padding producer +
    injective epilogue), vectorised along output rows. `planes`: a task per channel plane
    (True) or per row tile (False); None chooses (`plane_tasks`)."""

    def __init__(self, planes: bool | None = None):
        self.planes = planes

    def apply(self, func: tirx.PrimFunc, target: Target):
        sch = s_tir.Schedule(func)
        match = match_conv(sch)
        if match is None or not match.depthwise:
            return None
        conv, stmt, v = match.block, match.stmt, match.vars
        _, _, n_h, n_w = (int(s) for s in stmt.writes[0].source.shape)
        src = stmt.reads[0].source
        # stride 1: the input row and column read are y + ry and x + rx
        region = stmt.reads[0].region
        if not all(_is_sum(region[d].min, v[d], v[d + 3]) for d in (2, 3)):
            return None
        isa = isa_of(target)
        if not isa.depthwise_rows:
            return None
        rt = row_tile(n_h, n_w, isa.lanes())
        if rt is None or len(src.shape) != 4:
            return None
        stages = conv_stages(sch, match)
        if stages is None:
            return None
        producers, last = stages
        n_n, n_c = (int(s) for s in stmt.writes[0].source.shape[:2])
        cores = num_cores(target)
        planes = plane_tasks(n_n * n_c, cores) if self.planes is None else self.planes
        n, f, y, x, rc, ry, rx = sch.get_loops(conv)
        yo, yi = sch.split(y, [None, rt])
        sch.reorder(n, f, yo, rc, ry, rx, yi, x)
        par = sch.fuse(n, f) if planes else sch.fuse(n, f, yo)
        sch.parallel(par)
        sch.reverse_compute_at(last, yo if planes else par, preserve_unit_loops=True)
        sch.vectorize(sch.get_loops(last)[-1])
        sch.unroll(yi)
        sch.vectorize(x)
        init = sch.decompose_reduction(conv, rc)
        il = sch.get_loops(init)
        sch.unroll(il[-2])
        sch.vectorize(il[-1])
        for b in reversed(producers):
            if not planes:  # the padding: its own parallel pass of whole rows
                parallelize(sch, b, cores)
                continue
            sch.compute_at(b, par, preserve_unit_loops=True)  # the task's plane, in its scratch
            if not fill_and_copy(sch, b):
                return None if self.planes else DepthwiseRows(planes=False).apply(func, target)
        return sch


def _is_sum(expr, a, b) -> bool:
    """Whether `expr` is `a + b` (the stride-1 input index of an output index and a tap)."""
    return (isinstance(expr, tirx.Add) and isinstance(expr.a, tirx.Var) and isinstance(expr.b, tirx.Var)
            and expr.a.same_as(a) and expr.b.same_as(b))
