"""A small explicit knob space over our default CPU schedules, for co-tuning.

`member_variants(func, target)` lists (knobs, scheduled PrimFunc) pairs: for NCHW conv2d
the register tile (ft output channels x xt output columns) of engine.cpu_rules_conv's
micro-kernel; any other kernel has one variant, its default schedule. The conv schedule
below is the default rule's with the tile as a parameter (the default picks the tile with
most accumulators).
"""

from __future__ import annotations

from tvm import s_tir, tirx

from engine.cpu_common import blocks_of, is_reduction_block, num_cores, parallelize
from engine.cpu_rules_conv import MAX_ACC_VECTORS, PREPROC_ATTR, Conv2dNCHW
from engine.cpu_schedule import schedule_func


def _conv_shape(func) -> tuple[int, int] | None:
    """(output channels, output width) when Conv2dNCHW fits `func`, else None."""
    sch = s_tir.Schedule(func)
    reds = [b for b in blocks_of(sch) if is_reduction_block(sch, b)]
    if len(reds) != 1 or Conv2dNCHW().apply(func, None) is None:
        return None
    _, n_f, _, n_w = (int(s) for s in sch.get(reds[0]).writes[0].source.shape)
    return n_f, n_w


def conv_tiles(n_f: int, n_w: int) -> list[tuple[int, int]]:
    tiles = []
    for ft in (32, 16, 8):
        if n_f % ft:
            continue
        cap = max(1, MAX_ACC_VECTORS // max(1, ft // 16))
        tiles += [(ft, xt) for xt in range(2, min(n_w, cap) + 1) if n_w % xt == 0]
    # Most accumulators first (stable): the first tile is the one the default rule picks.
    return sorted(tiles, key=lambda t: -t[0] * t[1])


def schedule_conv(func: tirx.PrimFunc, target, ft: int, xt: int) -> tirx.PrimFunc:
    """engine.cpu_rules_conv.Conv2dNCHW with the register tile given."""
    sch = s_tir.Schedule(func)
    blocks = blocks_of(sch)
    conv = next(b for b in blocks if is_reduction_block(sch, b))
    idx = [sch.get(b).name_hint for b in blocks].index(sch.get(conv).name_hint)
    producers, epilogue = blocks[:idx], blocks[idx + 1:]
    for b in epilogue[:-1]:
        sch.compute_inline(b)
    if epilogue:
        last = epilogue[-1]
        sch.set_scope(conv, 0, "local")
    else:
        last = sch.cache_write(conv, 0, "local")
    wpack = sch.cache_read(conv, 1, "global")
    sch.transform_layout(wpack, ("write", 0), lambda f, c, r, s: (f // ft, c, r, s, f % ft))
    sch.annotate(wpack, PREPROC_ATTR, True)
    n, f, y, x, rc, ry, rx = sch.get_loops(conv)
    fo, fi = sch.split(f, [None, ft])
    xo, xi = sch.split(x, [None, xt])
    sch.reorder(n, fo, y, xo, rc, ry, rx, xi, fi)
    par = sch.fuse(n, fo, y)
    sch.parallel(par)
    sch.reverse_compute_at(last, xo, preserve_unit_loops=True)
    e = sch.get_loops(last)[2:]
    if len(e) == 4:
        sch.reorder(e[0], e[2], e[3], e[1])
        sch.vectorize(e[1])
    sch.transform_layout(conv, ("write", 0), lambda n_, f_, y_, x_: (n_, y_, x_, f_))
    sch.unroll(xi)
    sch.vectorize(fi)
    init = sch.decompose_reduction(conv, rc)
    il = sch.get_loops(init)[-2:]
    sch.unroll(il[0])
    sch.vectorize(il[1])
    for b in reversed(producers):
        stmt_b = sch.get(b)
        if len(stmt_b.reads) == 1 and list(stmt_b.reads[0].source.shape) == list(stmt_b.writes[0].source.shape):
            try:
                sch.compute_inline(b)
                continue
            except Exception:  # pylint: disable=broad-except
                pass
        parallelize(sch, b, num_cores(target))
    parallelize(sch, wpack, num_cores(target), vectorize=False)
    return sch.mod["main"].with_attr("tirx.is_scheduled", True)


def member_variants(func: tirx.PrimFunc, target) -> list[tuple[tuple, tirx.PrimFunc]]:
    """(knobs, scheduled function) for every point of the member's knob space."""
    shape = _conv_shape(func)
    if shape is None:
        default = schedule_func(func, target)
        return [(("default",), default)] if default is not None else []
    return [((ft, xt), schedule_conv(func, target, ft, xt)) for ft, xt in conv_tiles(*shape)]
