"""Default (untuned) CPU schedule for NCHW conv2d with a fused injective epilogue.

Micro-kernel: an output tile of ``ft`` output channels x ``xt`` output columns lives in
registers (a "local" accumulator laid out [x][f] so that the channel tile is one or two
SIMD vectors). For every (c, ry, rx) of the reduction the kernel loads one packed weight
vector and does ``xt`` broadcast-FMAs, reading the NCHW input as scalars, so stride and
dilation cost nothing extra and no activation layout change is needed.

The weight is repacked to [F/ft, C, KH, KW, ft] by a block annotated as a layout-rewrite
preprocess; ``schedule_module`` splits it out and constant-folds it when the weight is a
constant, so at run time the kernel reads the packed copy directly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import tvm
from tvm import s_tir, tirx
from tvm.target import Target

from engine.schedule.cpu.common import (PREPROC_ATTR, ScheduleRule, blocks_of, is_reduction_block, iter_kinds, num_cores,
                                        parallelize, reduces)
from engine.schedule.cpu.isa import MIN_ACCUMULATORS, Isa, isa_of


def _var_of(expr):
    return expr if isinstance(expr, tirx.Var) else None


def _group_structure(stmt, v) -> tuple[int, int, int] | None:
    """(groups, out channels per group, in channels per group) of a conv block, checking
    that the input channel index is ``f // Fg * Cg + c`` (groups=1: plain ``c``)."""
    in_buf, w_buf = stmt.reads[0].source, stmt.reads[1].source
    if len(in_buf.shape) != 4 or len(stmt.reads[0].region) != 4:
        return None
    n_c, n_cg, n_f = int(in_buf.shape[1]), int(w_buf.shape[1]), int(w_buf.shape[0])
    if n_cg <= 0 or n_c % n_cg:
        return None
    groups = n_c // n_cg
    if n_f % groups:
        return None
    n_fg = n_f // groups
    ana = tvm.sym.Analyzer()
    ana.bind(v[1], tvm.ir.Range(0, n_f))
    ana.bind(v[4], tvm.ir.Range(0, n_cg))
    want = v[4] if groups == 1 else tirx.floordiv(v[1], n_fg) * n_cg + v[4]
    got = stmt.reads[0].region[1].min
    if not ana.can_prove(got - want == 0):
        return None
    return groups, n_fg, n_cg


@dataclass(frozen=True)
class ConvMatch:
    """The conv block of a kernel and its structure (engine.schedule.cpu's conv rules)."""

    block: object  # the reduction SBlockRV
    stmt: object  # its SBlock
    vars: tuple  # the block's iter vars: n, f, y, x, c, ry, rx
    groups: int
    n_fg: int  # output channels per group
    n_cg: int  # input channels per group

    @property
    def depthwise(self) -> bool:
        return self.groups > 1 and self.n_fg == 1 and self.n_cg == 1


def match_conv(sch: s_tir.Schedule) -> ConvMatch | None:
    """The single NCHW/OIHW conv2d reduction of `sch`'s function, or None."""
    reds = [b for b in blocks_of(sch) if is_reduction_block(sch, b)]
    if len(reds) != 1:
        return None
    stmt = sch.get(reds[0])
    if iter_kinds(stmt) != "SSSSRRR" or len(stmt.reads) != 2 or len(stmt.writes) != 1:
        return None
    v = tuple(iv.var for iv in stmt.iter_vars)
    w_region = stmt.reads[1].region
    if len(w_region) != 4 or any(
        _var_of(r.min) is None or not _var_of(r.min).same_as(v[i]) for r, i in zip(w_region, (1, 4, 5, 6))
    ):
        return None  # other layouts: not these rules
    grp = _group_structure(stmt, v)
    return ConvMatch(reds[0], stmt, v, *grp) if grp is not None else None


def conv_stages(sch: s_tir.Schedule, match: ConvMatch, inline_producers: bool = False, keep: str | None = None):
    """(producers, last) of a matched conv kernel, or None: the blocks before the conv
    (inlined when asked: an identity "pad") and the block its accumulator, now "local",
    feeds: the epilogue folded into its last block, or a copy-out when the conv writes the
    output itself. `keep`: a producer left out of both (the weight's maker)."""
    blocks = blocks_of(sch)
    names = [sch.get(b).name_hint for b in blocks]
    idx = names.index(match.stmt.name_hint)
    producers = [b for b, name in zip(blocks[:idx], names) if name != keep]
    epilogue = blocks[idx + 1 :]
    if any(is_reduction_block(sch, b) for b in producers + epilogue):
        return None
    try:
        for b in (producers if inline_producers else []) + epilogue[:-1]:
            sch.compute_inline(b)
    except Exception:  # pylint: disable=broad-except
        return None
    kept = [] if inline_producers else producers
    if epilogue:
        sch.set_scope(match.block, 0, "local")
        return kept, epilogue[-1]
    return kept, sch.cache_write(match.block, 0, "local")


@dataclass(frozen=True)
class WeightSource:
    """Where a conv kernel's weight comes from: a param (`maker` None), or a block `maker`
    that copies a param in another order (ConvTranspose's `kernel_transform`: [C, F, KH, KW]
    read at [c, f, KH-1-r, KW-1-s]); `from_param` False for any other weight."""

    from_param: bool
    maker: str | None = None  # the copying block's name


def weight_source(sch: s_tir.Schedule, match: ConvMatch) -> WeightSource:
    weight = match.stmt.reads[1].source
    params = list(sch.mod["main"].params)
    if any(weight.same_as(b) for b in params):
        return WeightSource(True)
    makers = [sch.get(b) for b in blocks_of(sch) if any(w.source.same_as(weight) for w in sch.get(b).writes)]
    if len(makers) == 1 and not reduces(makers[0]) and makers[0].reads \
            and all(any(r.source.same_as(b) for b in params) for r in makers[0].reads):
        return WeightSource(True, makers[0].name_hint)
    return WeightSource(False)


def repack_weights(sch: s_tir.Schedule, conv, ft: int, source: WeightSource):
    """The weight repacked to [F/ft, C, KH, KW, ft] (a step's ft channels contiguous) by a
    block marked as a compile-time repack, which SplitLayoutRewritePreproc splits out when
    it reads a param only: a copying maker is inlined into the repack. Any other weight is
    repacked at run time, unmarked."""
    wpack = sch.cache_read(conv, 1, "global")
    sch.transform_layout(wpack, ("write", 0), lambda f, c, r, s: (f // ft, c, r, s, f % ft))
    if source.maker is not None:
        sch.compute_inline(sch.get_sblock(source.maker))
    if source.from_param:
        sch.annotate(wpack, PREPROC_ATTR, True)
    return wpack


# A reduction this short (a stem's 3 channels x 3x3 taps: 27 steps) leaves the write-back a
# large share of a tile's work; with row write-back the epilogue then runs once per output
# row, after all its tiles, and writes each channel's row whole. Per kernel (AVX-512, 2-core
# Zen 5): 3->64 3x3 stride 2 at 111x111 (squeezenet) 0.85x, 3->24 at 112x112 (shufflenet)
# 0.94x, 3->32 0.89x; longer ones do not gain: 3->64 7x7 (147 steps) 1.01x, 16->64 3x3 (144)
# 0.96-0.99x, 64->64 3x3 1.07x; AVX2 code's transposed write-back 1.00-1.07x.
ROW_EPILOGUE_MAX_STEPS = 32


def channel_tiles(lanes: int, narrow: bool = False) -> tuple[int, ...]:
    """Output-channel tiles tried, widest first: two vectors down to a quarter vector
    (narrow groups: down to two lanes)."""
    tiles = [t for t in (2 * lanes, lanes, lanes // 2, lanes // 4) if t >= 2]
    if narrow and 2 not in tiles:
        tiles.append(2)
    return tuple(tiles)


def accumulators(tile: tuple[int, int], lanes: int) -> int:
    """Accumulator vectors of an (ft, xt) register tile: ft channels in vectors, xt columns."""
    ft, xt = tile
    return -(-ft // lanes) * xt


def register_tiles(n_out_ch: int, out_w: int, isa: Isa, narrow: bool = False) -> list[tuple[int, int]]:
    """Every (ft, xt) register tile for `isa`: ft output channels (a divisor of the channel
    count) x xt output columns (a divisor of the width: no predicates inside the
    micro-kernel), within the ISA's accumulator registers; most accumulators first."""
    lanes = isa.lanes()

    def of(ft: int) -> list[tuple[int, int]]:
        cap = isa.max_rows(max(1, -(-ft // lanes)))
        return [(ft, xt) for xt in range(1, min(out_w, cap) + 1) if out_w % xt == 0] if n_out_ch % ft == 0 else []

    order = lambda t: (-t[0] * t[1], -t[0])
    tiles = sorted([t for ft in channel_tiles(lanes, narrow) for t in of(ft)], key=order)
    if not narrow and (not isa.broadcast_operand or not tiles
                       or accumulators(tiles[0], lanes) < isa.max_rows(1) // 2):
        # Four channel vectors per column: where a width has no good divisor and fills
        # under half the accumulators the ISA allows (squeezenet's stem on AVX-512, 111 =
        # 3 x 37: 6 of 18; its 64x3 tile ran 0.204 -> 0.167 ms, 2-core AVX-512 EPYC), and
        # without a broadcast operand, where 32x2 on AVX2 loads 6 operands per 8 FMAs
        # (_choose_tile)
        tiles = sorted(tiles + of(4 * lanes), key=order)
    return tiles


def _bytes(buf) -> int:
    return math.prod(int(d) for d in buf.shape) * tvm.DataType(buf.dtype).bits // 8


ROWS_OUTER_RATIO = 4


def rows_outer(stmt) -> bool:
    """Whether a 1x1 conv's parallel chunks run rows outside channel tiles: when its input
    outweighs both its weights (ROWS_OUTER_RATIO times) and its output (a reduction). The
    cores split the outer axis, so with rows outside a core reads all the weights and the
    input rows of its half; with channel tiles outside, half the weights and all the input,
    half of it written by the other core into that core's cache. Byte counts, not a
    machine's constants; end to end, 2-core Intel Xeon, in-process A/B (3 x 40 samples):
    resnet50 0.90-0.93x, densenet121 0.89-0.90x, inception_v1 0.96-1.00x, inception_v2
    0.96-1.00x (AVX-512); resnet50 0.98-0.99x, densenet121 0.93-0.94x (AVX2 code). A 3x3
    conv or a weight-heavy 14x14/7x7 1x1 ran 1.3-3.0x slower by rows; an expansion
    (squeezenet's expand1x1) gained nothing."""
    taps = int(stmt.iter_vars[5].dom.extent) * int(stmt.iter_vars[6].dom.extent)
    data, weights, out = (_bytes(b) for b in (stmt.reads[0].source, stmt.reads[1].source, stmt.writes[0].source))
    return taps == 1 and data >= max(ROWS_OUTER_RATIO * weights, out)


def loads_per_fma(tile: tuple[int, int], lanes: int) -> float:
    """Operand loads per full-width FMA of an (ft, xt) tile's reduction step where broadcasts
    are loads of their own: its weight vectors and xt broadcast input columns, for ft * xt
    multiply-adds (a tile narrower than a vector wastes the other lanes)."""
    ft, xt = tile
    return (-(-ft // lanes) + xt) / (ft * xt / lanes)


# Without a broadcast operand (Isa.broadcast_operand) the tile with the most accumulators
# is not the fastest: a one-vector tile loads xt + 1 operands per xt FMAs, a two-vector one
# xt + 2 per 2 * xt. Per kernel on a 2-core Zen 5, 55-wide 3x3 convs as 16x5 instead of
# 8x11 tiles: AVX2 code (--arch haswell) 0.86-0.95x (squeezenet), 0.89x (inception_v1),
# SSE code (x86-64) 0.84-0.91x; end to end AVX2 squeezenet 0.987-0.990x, inception_v1
# 0.984-0.987x. With AVX-512's broadcast operand the 16x5 tile ran 1.03-1.04x slower.
def _choose_tile(n_out_ch: int, out_w: int, isa: Isa, narrow: bool = False) -> tuple[int, int] | None:
    """The default (ft, xt): the most accumulators, the wider channel tile on a tie; where
    the ISA has no broadcast operand, of the tiles with MIN_ACCUMULATORS or more, the one
    with the fewest operand loads per FMA (then the most accumulators, then the narrower)."""
    tiles = register_tiles(n_out_ch, out_w, isa, narrow)
    lanes = isa.lanes()
    enough = [t for t in tiles if accumulators(t, lanes) >= MIN_ACCUMULATORS]
    if isa.broadcast_operand or not enough:
        return tiles[0] if tiles else None
    # ties: the narrower channel tile (more parallel chunks; 28-wide 16x4 and 32x2 ran alike)
    return min(enough, key=lambda t: (round(loads_per_fma(t, lanes), 6), -accumulators(t, lanes), t[0]))


class Conv2dNCHW(ScheduleRule):
    """conv2d (NCHW/OIHW) + optional padding producer + injective epilogue.

    Grouped convolutions: when the channels per group allow a channel tile, the output
    channel loop is split [groups, per-group] so a tile never straddles two groups (the
    input channel stays a scalar per tile). Depthwise (one input and one output channel
    per group): the input is repacked to [N, C/ft, H, W, ft] in a parallel pre-pass (with
    the padding folded in), so the channel-vector reads of the micro-kernel are contiguous.

    `tile=(ft, xt)` fixes the register tile (output channels x output columns) instead of
    choosing it: the tuner's knob space (engine.tuning.knobs)."""

    def __init__(self, tile: tuple[int, int] | None = None):
        self.tile = tile

    def apply(self, func: tirx.PrimFunc, target: Target):
        sch = s_tir.Schedule(func)
        match = match_conv(sch)
        if match is None:
            return None
        conv, stmt = match.block, match.stmt
        groups, n_fg, depthwise = match.groups, match.n_fg, match.depthwise
        _, n_f, _, n_w = (int(s) for s in stmt.writes[0].source.shape)
        # Channel tile: within one group, except depthwise (any divisor of F, input repacked).
        isa = isa_of(target)
        if groups == 1 or depthwise:
            tile = self.tile or _choose_tile(n_f, n_w, isa)
        else:  # narrow groups (e.g. 34 channels): 2-lane tiles beat the generic fallback
            tile = self.tile or _choose_tile(n_fg, n_w, isa, narrow=True)
        if tile is None:
            return None
        ft, xt = tile
        if groups > 1 and not depthwise and n_fg % ft:
            return None

        # Epilogue (bias add, relu, ...): folded into the last block, which is then computed
        # per register tile straight from the accumulator.
        weight = weight_source(sch, match)
        stages = conv_stages(sch, match, keep=weight.maker)
        if stages is None:
            return None
        producers, last = stages

        wpack = repack_weights(sch, conv, ft, weight)

        ipack = None
        if depthwise:
            # Input [N, C, H, W] -> [N, C/ft, H, W, ft]: lane j of a tile reads channel j.
            ipack = sch.cache_read(conv, 0, "global")
            sch.transform_layout(ipack, ("write", 0), lambda n_, c, h, w: (n_, c // ft, h, w, c % ft))

        n, f, y, x, rc, ry, rx = sch.get_loops(conv)
        if groups > 1 and not depthwise:
            g, fg = sch.split(f, [groups, n_fg])
            fo, fi = sch.split(fg, [None, ft])
            outer = [n, g, fo, y]
        else:
            fo, fi = sch.split(f, [None, ft])
            outer = [n, y, fo] if groups == 1 and rows_outer(stmt) else [n, fo, y]
        xo, xi = sch.split(x, [None, xt])
        # Reduction loops outside the register tile; (n, f-tile, row) or (n, row, f-tile) is
        # the parallel axis: F/ft * H chunks, >= 8 per core for all layers of the model zoo nets.
        taps = int(stmt.iter_vars[5].dom.extent) * int(stmt.iter_vars[6].dom.extent)
        taps_outside = taps > 1 and isa.taps_outside_from is not None and xt >= isa.taps_outside_from
        if taps_outside:  # see Isa.taps_outside_from
            sch.reorder(*outer, xo, ry, rx, rc, xi, fi)
        else:
            sch.reorder(*outer, xo, rc, ry, rx, xi, fi)
        par = sch.fuse(*outer)
        sch.parallel(par)
        row_writeback = isa.row_writeback and ft >= isa.lanes()
        steps = match.n_cg * taps
        if row_writeback and steps <= ROW_EPILOGUE_MAX_STEPS:
            sch.reverse_compute_at(last, par, preserve_unit_loops=True)  # the whole row's tiles
            e = sch.get_loops(last)[1:]
        else:
            sch.reverse_compute_at(last, xo, preserve_unit_loops=True)
            e = sch.get_loops(last)[2:]
        if len(e) == 4 and row_writeback:
            # whole channel vectors: write rows of output columns (see Isa.row_writeback); a
            # narrow tile (a grouped conv's 2-8 lanes) measured slower transposed
            sch.vectorize(e[3])
        elif len(e) == 4:  # write-back (n, f, y, x) -> (n, y, x, f): read accumulators as vectors
            sch.reorder(e[0], e[2], e[3], e[1])
            sch.vectorize(e[1])
        # Accumulator layout [.., x, f]: channel tile contiguous -> plain vector registers.
        sch.transform_layout(conv, ("write", 0), lambda n_, f_, y_, x_: (n_, y_, x_, f_))
        sch.unroll(xi)
        sch.vectorize(fi)
        init = sch.decompose_reduction(conv, ry if taps_outside else rc)
        il = sch.get_loops(init)[-2:]
        sch.unroll(il[0])
        sch.vectorize(il[1])

        for b in reversed(producers):
            stmt_b = sch.get(b)
            same_shape = len(stmt_b.reads) == 1 and list(stmt_b.reads[0].source.shape) == list(
                stmt_b.writes[0].source.shape
            )
            # An identity "pad" (1x1 conv, no padding) disappears; real padding stays a
            # separate parallel pass so the inner loop carries no boundary checks (depthwise:
            # it is folded into the input repack, which is that pass).
            if same_shape or ipack is not None:
                try:
                    sch.compute_inline(b)
                    continue
                except Exception:  # pylint: disable=broad-except
                    pass
            parallelize(sch, b, num_cores(target), by_row=True)
        if ipack is not None:
            # Write the packed input in its own order (channel lane innermost): in NCHW order
            # every element lands in another cache line, 16x the write traffic.
            n_, c_, h_, w_ = sch.get_loops(ipack)
            co, ci = sch.split(c_, [None, ft])
            sch.reorder(n_, co, h_, w_, ci)
            # the lane loop vectorised (a gather of ft channel planes, one vector store):
            # depthwise kernels 0.91-0.95x on AVX-512, 0.84x with AVX2 code (2-core EPYC)
            parallelize(sch, ipack, num_cores(target))
        parallelize(sch, wpack, num_cores(target), vectorize=False)
        return sch
