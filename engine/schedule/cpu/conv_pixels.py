"""Default CPU schedule for a 1x1, stride-1, unpadded NCHW conv2d whose output channels
give the channel-vector micro-kernel (engine.schedule.cpu.conv) a narrow tile: a grouped
conv with 34 or 68 channels per group (2-4 of 16 lanes), or 1000 classifier channels (8),
and one that expands a short reduction (EXPANSION_MAX_VECTORS: mobilenet's and resnet's
expansions, squeezenet's expand1x1).

Such a conv is a GEMM per group, out[f, p] = sum_c w[f, c] * in[g(f)*Cg + c, p], over the
pixels p = y*W + x, which NCHW stores contiguously. The register tile is ``ft`` output
channels x ``pv`` vectors of pixels: per reduction step it loads ``pv`` input vectors and
broadcasts ``ft`` packed weights, so every lane is used whatever the channel count, and a
tile may straddle groups (the channel rows are unrolled, each reads its own group's input).
The pixel count rarely divides the tile (14x14 = 196): the pixel loop is partitioned into
whole tiles and one tail of fewer than a vector's lanes, which runs as one short vector
instead of the predicated, scalarised tile a plain split would give.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import s_tir, tirx
from tvm.target import Target

from engine.schedule.cpu.common import ScheduleRule, num_cores
from engine.schedule.cpu.conv import (_choose_tile, accumulators, conv_stages, match_conv, register_tiles,
                                      repack_weights, weight_source)
from engine.schedule.cpu.isa import MIN_ACCUMULATORS, Isa, isa_of

PIXEL_VECTORS = (2, 1, 4)  # preferred first: measured 8x2 < 4x4 < 16x1 (2-core AVX-512 EPYC)


def pixel_tiles(n_f: int, pixels: int, isa: Isa, cores: int = 1) -> list[tuple[int, int]]:
    """Every (ft, pv) tile for `isa`: ft output channels (a divisor of the channel count,
    within the accumulator registers) x pv pixel vectors, whose pixel tail after whole
    tiles fits one vector; the default first: tiles whose parallel chunks fill the cores
    (_fills_the_cores; a tile with a tail runs one chunk per channel tile, one without one
    per channel tile and pixel tile) before the others, then most accumulators, then
    PIXEL_VECTORS order: the widest register tile that still keeps every core busy."""
    lanes = isa.lanes()
    tiles = []
    for pv in PIXEL_VECTORS:
        if pixels < pv * lanes or pixels % (pv * lanes) > lanes:
            continue
        rows = [ft for ft in range(isa.max_rows(pv), 0, -1) if n_f % ft == 0]
        tiles += [(ft, pv) for ft in rows if ft * pv >= 4]

    def chunks(tile: tuple[int, int]) -> int:
        ft, pv = tile
        return n_f // ft * (pixels // (pv * lanes) if pixels % (pv * lanes) == 0 else 1)

    return sorted(tiles, key=lambda t: (not _fills_the_cores(chunks(t), cores), t[0] * t[1] < MIN_ACCUMULATORS))


# Per kernel, 2-core Zen 5, AVX-512: 16->64 at 55x55, (16, 1) runs 0.73x of (4, 1) (which
# gave 8 chunks per core), 32->128 at 27x27 (16, 1) 0.88x of (8, 1), 16->64 at 28x28 (8, 2)
# 0.79x of (4, 2): more accumulators beat finer load balance once each core has two chunks.
MIN_PIXEL_CHUNKS_PER_CORE = 2
BALANCE = 0.9  # busy share of the cores in the last round of chunks


def _fills_the_cores(chunks: int, cores: int) -> bool:
    rounds = -(-chunks // cores)
    return chunks >= MIN_PIXEL_CHUNKS_PER_CORE * cores and chunks >= BALANCE * rounds * cores


# A 1x1 conv that expands a short reduction (F >= C, C within this many vectors) writes far
# more than it reads per step: pixel vectors store whole NCHW rows where the channel rule
# transposes its tile. Per kernel against the channel rule (2-core Zen 5), AVX-512: 16->64
# at 55x55 0.79x, 32->192 at 28x28 0.67x, 64->256 at 56x56 (+residual) 0.92x, 128->512 at
# 28x28 0.84x, 256->1024 at 14x14 0.99x, 512->2048 at 7x7 1.15x; AVX2 code (haswell):
# 16->64 0.82x, 32->192 0.90x, 48->192 0.82x, 64->256 0.96x, 128->512 1.01x.
EXPANSION_MAX_VECTORS = 8


def _short_expansion(groups: int, n_c: int, n_f: int, isa: Isa) -> bool:
    return groups == 1 and n_f >= n_c and n_c <= EXPANSION_MAX_VECTORS * isa.lanes()


def _few_accumulators(n_f: int, n_w: int, pixels: int, isa: Isa, narrow: bool) -> bool:
    """The channel rule's tiles of one or two channel vectors have fewer accumulators than
    hide the FMA latency (AVX2 on 14-wide maps: 8 channels x 7 columns) and the map has at
    least 8 pixel vectors. Per kernel, AVX2 code (--arch haswell) on a 2-core Zen 5:
    resnet50's 1x1 convs at 14x14 0.88-0.92x as pixel tiles; at 7x7 (49 pixels, 6 vectors)
    1.02-1.10x slower. The channel rule's four-vector tile there (32 x 2, engine.schedule.
    cpu.conv._choose_tile) ran 1.03-1.32x slower than pixel tiles on the 1x1 convs of
    inception_v2 and densenet121, so it does not count."""
    lanes = isa.lanes()
    most = max((accumulators(t, lanes) for t in register_tiles(n_f, n_w, isa, narrow) if t[0] <= 2 * lanes),
               default=0)
    return most < MIN_ACCUMULATORS and pixels >= 8 * lanes


def _partitions(sch: s_tir.Schedule, name: str) -> list[str]:
    """Names of the blocks loop_partition made of block `name`, in loop order (it names
    them `name_<loop><k>` inside `..._common` / `..._partition` wrapper blocks)."""
    found: list[str] = []
    tvm_ffi.structural_walk(sch.mod["main"].body, (s_tir.SBlock, lambda b: found.append(b.name_hint)))
    return [n for n in found if n.startswith(name + "_") and not n.endswith(("_common", "_partition"))]


class Conv1x1Pixels(ScheduleRule):
    """1x1 stride-1 unpadded conv2d (+ injective epilogue), pixel-vectorised, when the
    channel-vector rule's tile would be narrower than one vector (or `tile` is given:
    (ft, pv), the tuner's knob space)."""

    def __init__(self, tile: tuple[int, int] | None = None):
        self.tile = tile

    def apply(self, func: tirx.PrimFunc, target: Target):
        sch = s_tir.Schedule(func)
        match = match_conv(sch)
        if match is None or match.depthwise:
            return None
        conv, stmt, v = match.block, match.stmt, match.vars  # v: n, f, y, x, c, ry, rx
        if any(int(stmt.iter_vars[i].dom.extent) != 1 for i in (5, 6)):
            return None  # not 1x1
        groups, n_fg = match.groups, match.n_fg
        _, n_f, n_h, n_w = (int(s) for s in stmt.writes[0].source.shape)
        isa = isa_of(target)
        if self.tile is None and not _short_expansion(groups, match.n_cg, n_f, isa):
            narrow = groups > 1
            n_tile = n_fg if narrow else n_f
            channel_tile = _choose_tile(n_tile, n_w, isa, narrow=narrow)
            if channel_tile is not None and channel_tile[0] >= isa.lanes() \
                    and not _few_accumulators(n_tile, n_w, n_h * n_w, isa, narrow):
                return None  # whole channel vectors: the channel rule's micro-kernel
        weight = weight_source(sch, match)
        # (a 1x1 unpadded conv's "pad" producer is an identity copy: inlined)
        stages = conv_stages(sch, match, inline_producers=True, keep=weight.maker)
        if stages is None:
            return None
        _, last = stages
        # stride 1, no padding: the input pixel read is the output pixel itself
        stmt = sch.get(conv)
        src = stmt.reads[0].source
        if len(src.shape) != 4 or [int(d) for d in src.shape[2:]] != [n_h, n_w]:
            return None
        ana = tvm.sym.Analyzer()
        for i in (5, 6):
            ana.bind(v[i], tvm.ir.Range(0, 1))
        if not all(ana.can_prove(stmt.reads[0].region[d].min - v[d] == 0) for d in (2, 3)):
            return None
        pixels = n_h * n_w
        options = pixel_tiles(n_f, pixels, isa, num_cores(target))
        if not options or (self.tile is not None and self.tile not in options):
            return None
        ft, pv = self.tile or options[0]
        return _schedule(sch, conv, last, n_w, pixels, ft, pv, isa.lanes(), weight, pixels_outer=groups == 1)


def _schedule(sch, conv, last, n_w: int, pixels: int, ft: int, pv: int, lanes: int, weight,
              pixels_outer: bool = True):
    """`pixels_outer`: with whole pixel tiles, the parallel chunks run the channel tiles of
    one pixel tile in turn, so a core's next chunk re-reads the input pixels it just read.
    Per kernel (2-core Zen 5), the 56x56 expansions of resnet50, densenet121 and
    inception_v2: AVX-512 0.87-0.94x, AVX2 code 0.92-1.00x; shufflenet's grouped 1x1 conv
    (each channel tile reads another group's input) AVX-512 1.09x slower, so not for groups.
    A chunk then writes a channel tile's pixel tile, which the row-band code generator
    takes as a unit of channels (mobilenet_block's AVX2 expand -> depthwise channel bands)."""
    # Weight [F, Cg, 1, 1] -> [F/ft, Cg, 1, 1, ft]: a step's ft broadcasts are contiguous.
    wpack = repack_weights(sch, conv, ft, weight)
    # Pixels as one axis: the accumulator and both blocks' iterations over p = y*W + x, so
    # a tile of pixels that crosses rows is still one box of the accumulator.
    sch.transform_layout(conv, ("write", 0), lambda n_, f_, y_, x_: (n_, f_, y_ * n_w + x_))
    sch.transform_block_layout(conv, lambda n_, f_, y_, x_, c_, r_, s_: (n_, f_, y_ * n_w + x_, c_, r_, s_))
    sch.transform_block_layout(last, lambda n_, f_, y_, x_: (n_, f_, y_ * n_w + x_))
    n, f, p, rc, ry, rx = sch.get_loops(conv)
    fo, fi = sch.split(f, [None, ft])
    tile = pv * lanes
    whole = pixels // tile * tile
    if whole == pixels:  # whole tiles only: parallel over both tiles, in `pixels_outer` order
        po, p = sch.split(p, [None, tile])
        tiles = (po, fo) if pixels_outer else (fo, po)
        sch.reorder(n, *tiles, p, rc, ry, rx, fi)
        par = sch.fuse(n, *tiles)
    else:  # the partitioned pixel loop stays inside one chunk per channel tile
        sch.reorder(n, fo, p, rc, ry, rx, fi)
        par = sch.fuse(n, fo)
    sch.parallel(par)
    sch.reverse_compute_at(last, par, preserve_unit_loops=True)
    conv_name, last_name = sch.get(conv).name_hint, sch.get(last).name_hint
    parts = [(conv_name, last_name)]
    if whole < pixels:
        # whole tiles, then a tail of at most `lanes` pixels (pixel_tiles ensures it)
        sch.loop_partition(p, [whole, None])
        sch.loop_partition(sch.get_loops(last)[-1], [whole, None])
        parts = list(zip(_partitions(sch, conv_name), _partitions(sch, last_name)))
    for k, (cname, lname) in enumerate(parts):
        cb = sch.get_sblock(cname)
        pl, rc_, ry_, rx_, fi_ = sch.get_loops(cb)[-5:]
        if k == 0:
            po, pi = sch.split(pl, [None, tile])
            sch.reorder(po, rc_, ry_, rx_, fi_, pi)
            pio, pii = sch.split(pi, [None, lanes])
            sch.unroll(pio)
            sch.vectorize(pii)
        else:  # the tail: a loop starting at `whole` (split refuses those), one short vector
            sch.reorder(rc_, ry_, rx_, fi_, pl)
            sch.vectorize(pl)
        sch.unroll(fi_)
        sch.decompose_reduction(cb, rc_)  # the init loops keep the unroll and vector marks
        lb = sch.get_sblock(lname)
        ll = sch.get_loops(lb)[-1]
        if k == 0:
            _, inner = sch.split(ll, [None, lanes])
            sch.vectorize(inner)
        else:
            sch.vectorize(ll)
    return sch
