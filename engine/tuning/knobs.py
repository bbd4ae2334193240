"""A small explicit knob space over our default CPU schedules, for tuning and co-tuning.

`member_variants(func, target)` lists (knobs, scheduled PrimFunc) pairs, the default
rule's choice first: for NCHW conv2d the register tile (ft output channels x xt output
columns) of engine.schedule.cpu.conv's micro-kernel, knobs (ft, xt), and for a 1x1 conv
the pixel-vector tiles of engine.schedule.cpu.conv_pixels, knobs ("px", ft, pv), and for
a depthwise conv engine.schedule.cpu.depthwise_rows, knobs ("dwrows",) (its default task
shape) and ("dwrows", "planes" | "rows"); for matmul the register
tile (it rows x jt columns) of engine.schedule.cpu.rules.Matmul, knobs ("mm", it, jt), which
also sets how many parallel chunks the kernel offers; any other kernel has one variant,
its default schedule.
"""

from __future__ import annotations

from tvm import s_tir, tirx
from tvm_ffi import structural_equal

from engine.schedule.cpu.common import blocks_of, is_reduction_block, num_cores
from engine.schedule.cpu.conv import Conv2dNCHW, match_conv, register_tiles
from engine.schedule.cpu.conv_pixels import Conv1x1Pixels, pixel_tiles
from engine.schedule.cpu.depthwise_rows import DepthwiseRows
from engine.schedule.cpu.isa import Isa, isa_of
from engine.schedule.cpu.rules import Matmul, schedule_func


def _scheduled(sch) -> tirx.PrimFunc | None:
    """The function of a rule's schedule, marked scheduled (None: the rule did not fit)."""
    return sch.mod["main"].with_attr("tirx.is_scheduled", True) if sch is not None else None


def _conv_shape(func) -> tuple[int, int] | None:
    """(output channels, output width) when Conv2dNCHW fits `func`, else None."""
    sch = s_tir.Schedule(func)
    reds = [b for b in blocks_of(sch) if is_reduction_block(sch, b)]
    if len(reds) != 1 or Conv2dNCHW().apply(func, None) is None:
        return None
    _, n_f, _, n_w = (int(s) for s in sch.get(reds[0]).writes[0].source.shape)
    return n_f, n_w


def conv_tiles(n_f: int, n_w: int, isa: Isa) -> list[tuple[int, int]]:
    """The conv rule's register tiles for `isa` with at least two columns and a channel tile
    of half a vector or more; the first is the one the default rule picks."""
    lanes = isa.lanes()
    return [(ft, xt) for ft, xt in register_tiles(n_f, n_w, isa) if xt >= 2 and ft >= lanes // 2]


def schedule_conv(func: tirx.PrimFunc, target, ft: int, xt: int) -> tirx.PrimFunc:
    """engine.schedule.cpu.conv.Conv2dNCHW with the register tile given."""
    sch = Conv2dNCHW(tile=(ft, xt)).apply(func, target)
    if sch is None:
        raise ValueError(f"not a conv2d the CPU conv rule schedules: {func.attrs}")
    return sch.mod["main"].with_attr("tirx.is_scheduled", True)


def _pixel_variants(func: tirx.PrimFunc, target) -> list[tuple[tuple, tirx.PrimFunc]]:
    """("px", ft, pv) variants of a 1x1 conv the pixel rule fits (given a tile), else []."""
    match = match_conv(s_tir.Schedule(func))
    if match is None:
        return []
    _, n_f, n_h, n_w = (int(s) for s in match.stmt.writes[0].source.shape)
    out = []
    # the rule's own order (it depends on the cores), so its default is the first of them
    for ft, pv in pixel_tiles(n_f, n_h * n_w, isa_of(target), num_cores(target)):
        pixel = Conv1x1Pixels(tile=(ft, pv)).apply(func, target)
        if pixel is None:
            return []  # not a 1x1 stride-1 unpadded conv: no tile fits
        out.append((("px", ft, pv), _scheduled(pixel)))
    return out


def _matmul_shape(func) -> tuple[int, int] | None:
    """(rows, columns) when the Matmul rule schedules `func` (and the conv rule does not)."""
    sch = s_tir.Schedule(func)
    reds = [b for b in blocks_of(sch) if is_reduction_block(sch, b)]
    if len(reds) != 1 or len(sch.get(reds[0]).iter_vars) < 3 or Matmul().apply(func, None) is None:
        return None
    n_i, n_j = (int(iv.dom.extent) for iv in sch.get(reds[0]).iter_vars[-3:-1])
    return n_i, n_j


def schedule_matmul(func: tirx.PrimFunc, target, it: int, jt: int) -> tirx.PrimFunc:
    sch = Matmul(tile=(it, jt)).apply(func, target)
    if sch is None:
        raise ValueError(f"not a matmul the CPU matmul rule schedules with tile {it}x{jt}")
    return sch.mod["main"].with_attr("tirx.is_scheduled", True)


def member_variants(func: tirx.PrimFunc, target) -> list[tuple[tuple, tirx.PrimFunc]]:
    """(knobs, scheduled function) for every point of the member's knob space."""
    shape = _conv_shape(func)
    if shape is not None:
        # (a grouped conv's tiles must also divide its channels per group: the rule says which)
        channel = [((ft, xt), _scheduled(sch))
                   for ft, xt in conv_tiles(*shape, isa_of(target))
                   if (sch := Conv2dNCHW(tile=(ft, xt)).apply(func, target)) is not None]
        rows = DepthwiseRows().apply(func, target)
        if rows is not None:  # the default rule where it fits (AVX-512), first, then its other task shape
            default = _scheduled(rows)
            modes = [(("dwrows", mode), _scheduled(DepthwiseRows(planes=mode == "planes").apply(func, target)))
                     for mode in ("planes", "rows")]
            return [(("dwrows",), default)] + [(k, f) for k, f in modes
                                               if f is not None and not structural_equal(f, default)] + channel
        pixel = _pixel_variants(func, target)
        return pixel + channel if Conv1x1Pixels().apply(func, target) is not None else channel + pixel
    mm = _matmul_shape(func)
    if mm is not None:
        return [(("mm", it, jt), schedule_matmul(func, target, it, jt)) for it, jt in Matmul.tiles(*mm, isa_of(target))]
    default = schedule_func(func, target)
    return [(("default",), default)] if default is not None else []


def template_points(func: tirx.PrimFunc, target) -> list[tuple[tuple, tirx.PrimFunc]]:
    """member_variants for the per-kernel tuner ([] when the kernel has no CPU schedule)."""
    try:
        return member_variants(func, target)
    except Exception:  # pylint: disable=broad-except
        return []  # a tile the rule refuses: the kernel keeps the other candidates


def schedule_knobs(func: tirx.PrimFunc, target, knobs: tuple) -> tirx.PrimFunc | None:
    """The template schedule of `func` at `knobs` (as recorded by the tuner), or None."""
    if len(knobs) == 2 and all(isinstance(k, int) for k in knobs):
        return schedule_conv(func, target, *knobs)
    if len(knobs) == 3 and knobs[0] == "mm":
        return schedule_matmul(func, target, int(knobs[1]), int(knobs[2]))
    if knobs == ("dwrows",):
        return _scheduled(DepthwiseRows().apply(func, target))
    if len(knobs) == 2 and knobs[0] == "dwrows":
        return _scheduled(DepthwiseRows(planes=knobs[1] == "planes").apply(func, target))
    if len(knobs) == 3 and knobs[0] == "px":
        return _scheduled(Conv1x1Pixels(tile=(int(knobs[1]), int(knobs[2]))).apply(func, target))
    return None
