"""Default (untuned) schedules for every PrimFunc of a Relax module on llvm targets.

``relax.build`` for llvm leaves kernels as naive single-threaded loop nests. Run
``schedule_module(mod, target)`` after LegalizeOps/AnnotateTIROpPattern/FoldConstant/
FuseOps/FuseTIR and before ``tvm.compile``: each PrimFunc without a schedule is given one
by the first rule of ``RULES`` that fits (dlight style, most specific first), and marked
``tirx.is_scheduled``. The llvm build pipeline only legalizes remaining Relax ops, so the
schedules survive to code generation.
"""

from __future__ import annotations

import logging
import math

import tvm
from tvm import relax, s_tir, tirx
from tvm.target import Target

from engine.schedule.cpu.common import (
    PREPROC_ATTR,
    ScheduleRule,
    has_preproc,
    blocks_of,
    is_reduction_block,
    iter_kinds,
    num_cores,
    opaque_buffers,
    parallelize,
    vector_lanes,
)
from engine.schedule.cpu.conv import Conv2dNCHW
from engine.schedule.cpu.conv_pixels import Conv1x1Pixels
from engine.schedule.cpu.depthwise_rows import DepthwiseRows
from engine.schedule.cpu.intrinsics import root_powers, serialize_unvectorizable
from engine.schedule.cpu.isa import Isa, isa_of
from engine.schedule.cpu.plane_reduce import PlaneReduce
from engine.schedule.cpu.pool import Pool2dRows
from engine.schedule.cpu.rowwise import RowWise

logger = logging.getLogger(__name__)

__all__ = ["RULES", "schedule_module", "schedule_func", "Conv1x1Pixels", "Conv2dNCHW", "Matmul", "RowWise", "Fallback"]


def _inline_all(sch: s_tir.Schedule, keep=()) -> None:
    """Inline injective producers/consumers wherever TIR allows (pads, bias, relu, exp), but
    never one whose buffers an opaque block (an extern call) also uses."""
    keep_names = {sch.get(b).name_hint for b in keep}
    opaque = opaque_buffers(sch)
    changed = True
    while changed:
        changed = False
        for b in blocks_of(sch):
            stmt = sch.get(b)
            if stmt.name_hint in keep_names or any(r.source.same_as(o) for r in [*stmt.reads, *stmt.writes]
                                                   for o in opaque):
                continue
            for prim in (sch.compute_inline, sch.reverse_compute_inline):
                try:
                    prim(b)
                    changed = True
                    break
                except Exception:  # pylint: disable=broad-except
                    continue
            if changed:
                break


# A matmul with fewer multiply-adds than this runs on one core: a recurrent step's
# [1, 64] x [64, 256] (16K MACs) takes about a microsecond, less than waking the thread pool.
MIN_PARALLEL_MACS = 1 << 18


class Matmul(ScheduleRule):
    """[batch..] C[i, j] = sum_k A[.., i, k] * B[.., k, j] (+ injective epilogue).

    Register tile it x jt with j (contiguous in B and C) vectorised, k outside the tile,
    parallel over (batch, j-tiles, i-tiles) from MIN_PARALLEL_MACS on: consecutive chunks
    share a column panel of B, which a 2-D weight B has contiguous (prepacked [J/jt, K, jt]).
    """

    name = "matmul"

    def __init__(self, tile: tuple[int, int] | None = None):
        self.tile = tile  # (it, jt) fixed instead of chosen: the tuner's knob space

    @staticmethod
    def tiles(n_i: int, n_j: int, isa: Isa) -> list[tuple[int, int]]:
        """Every (it, jt) this rule accepts for `isa`, the one it picks by default first: up
        to 4 rows x up to 4 vectors of columns (in half-vector steps), within the ISA's
        accumulator registers."""
        half = max(isa.lanes() // 2, 1)
        its = [d for d in range(1, 9) if n_i % d == 0]
        jts = [d for d in range(half, 8 * half + 1, half) if n_j % d == 0]
        fits = [(i, j) for i in its for j in jts if i <= isa.max_rows(-(-j // isa.lanes()))]
        return sorted(fits, key=lambda t: (-t[1], -t[0]))

    def apply(self, func, target):
        sch = s_tir.Schedule(func)
        reds = [b for b in blocks_of(sch) if is_reduction_block(sch, b)]
        if len(reds) != 1:
            return None
        mm = reds[0]
        stmt = sch.get(mm)
        kinds = iter_kinds(stmt)
        if len(kinds) < 3 or kinds[-1] != "R" or "R" in kinds[:-1] or len(stmt.reads) != 2:
            return None
        iv_i, iv_j, iv_k = (iv.var for iv in stmt.iter_vars[-3:])
        a_idx, b_idx = (r.region for r in stmt.reads)

        def is_var(r, v):
            return isinstance(r.min, tirx.Var) and r.min.same_as(v)

        # B must be [.., k, j] and A [.., i, k]: j contiguous in B and in the output.
        if not (is_var(b_idx[-1], iv_j) and is_var(b_idx[-2], iv_k) and is_var(a_idx[-1], iv_k)):
            return None
        if len(sch.get_loops(mm)) != len(kinds):
            return None
        _inline_all(sch, keep=[mm])
        if len([b for b in blocks_of(sch) if b is not None]) > 2:
            return None
        n_i, n_j = (int(iv.dom.extent) for iv in stmt.iter_vars[-3:-1])
        options = self.tiles(n_i, n_j, isa_of(target))
        if not options or (self.tile is not None and self.tile not in options):
            return None
        it, jt = self.tile or options[0]
        b_buf = stmt.reads[1].source
        wpack = None
        if len(b_buf.ty.shape) == 2 and any(b_buf.same_as(p) for p in func.params):
            # A weight [K, J] -> [J/jt, K, jt]: each column tile's panel is contiguous
            wpack = sch.cache_read(mm, 1, "global")
            sch.transform_layout(wpack, ("write", 0), lambda k_, j_: (j_ // jt, k_, j_ % jt))
            sch.annotate(wpack, PREPROC_ATTR, True)
        loops = sch.get_loops(mm)
        *batch, i, j, k = loops
        io, ii = sch.split(i, [None, it])
        jo, ji = sch.split(j, [None, jt])
        sch.reorder(*batch, jo, io, k, ii, ji)
        par = sch.fuse(*batch, jo, io)
        if math.prod(int(iv.dom.extent) for iv in stmt.iter_vars) >= MIN_PARALLEL_MACS:
            sch.parallel(par)
        # (the weight repack is a producer: a bare matmul writing its output param has none)
        consumers = [b for b in blocks_of(sch) if not sch.get(b).same_as(sch.get(mm))
                     and (wpack is None or not sch.get(b).same_as(sch.get(wpack)))]
        if consumers:
            sch.set_scope(mm, 0, "local")
        else:  # the matmul writes the output param: accumulate locally, copy out per tile
            consumers = [sch.cache_write(mm, 0, "local")]
        if consumers:
            sch.reverse_compute_at(consumers[-1], par, preserve_unit_loops=True)
            sch.vectorize(sch.get_loops(consumers[-1])[-1])
        sch.unroll(ii)
        sch.vectorize(ji)
        init = sch.decompose_reduction(mm, k)
        sch.vectorize(sch.get_loops(init)[-1])
        return sch


class Fallback(ScheduleRule):
    """Anything else (pooling, softmax, mean, LRN, concat, reshape, elementwise).

    Inline what can be inlined, then for every remaining block parallelise its fused
    leading spatial loops and vectorise its innermost loop when that is spatial.
    Reductions keep their reduction loops innermost (pool windows, softmax rows).
    """

    name = "fallback"

    def apply(self, func, target):
        sch = s_tir.Schedule(func)
        _inline_all(sch)
        cores, lanes = num_cores(target), vector_lanes(target)
        for b in blocks_of(sch):
            parallelize(sch, b, cores, vectorize=True, lanes=lanes)
        return sch


RULES: list[ScheduleRule] = [Conv1x1Pixels(), DepthwiseRows(), Conv2dNCHW(), Matmul(), Pool2dRows(), PlaneReduce(),
                             RowWise(), Fallback()]


def is_scheduled(func) -> bool:
    return bool(func.attrs is not None and func.attrs.get("tirx.is_scheduled", False))


def schedule_func(func: tirx.PrimFunc, target: Target, rules=None) -> tirx.PrimFunc | None:
    """Schedule one PrimFunc with the first fitting rule; None if no rule applied. Loops
    that call an intrinsic llvm cannot vectorise (cosh, sinh, fmod) stay scalar; a pow
    with an exponent in quarters becomes square roots (engine.schedule.cpu.intrinsics)."""
    for rule in rules or RULES:
        try:
            sch = rule.apply(func, target)
        except Exception as err:  # pylint: disable=broad-except
            # A rule that matched but hit an unsupported corner: try the next one.
            logger.debug("rule %s failed: %s", type(rule).__name__, err)
            sch = None
        if sch is not None:
            return serialize_unvectorizable(root_powers(sch.mod["main"])).with_attr("tirx.is_scheduled", True)
    return None


def schedule_module(mod: tvm.IRModule, target: Target) -> tvm.IRModule:
    """Give every not-yet-scheduled PrimFunc of ``mod`` a default CPU schedule."""
    updates = {}
    for gv, func in mod.functions_items():
        if isinstance(func, tirx.PrimFunc) and not is_scheduled(func):
            new = schedule_func(func, target)
            if new is not None:
                updates[gv] = new
    if not updates:
        return mod
    mod = mod.clone() if hasattr(mod, "clone") else tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs)
    for gv, func in updates.items():
        mod[gv] = func
    # (all kernels: co-tuned or tuned ones may carry a repack too)
    if any(isinstance(f, tirx.PrimFunc) and has_preproc(f) for _, f in mod.functions_items()):
        # Move the weight repacks into their own PrimFuncs and evaluate them at compile
        # time when the weights are constants (they are after FoldConstant).
        with target:
            mod = relax.transform.SplitLayoutRewritePreproc()(mod)
            mod = relax.transform.FoldConstant()(mod)
            mod = relax.transform.DeadCodeElimination()(mod)
    return mod
