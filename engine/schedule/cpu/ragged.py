"""Ragged vector rows: a vectorised row longer than the register width and not a multiple
of it (55 floats on AVX-512) becomes, at build time, register-wide vectors and one short
tail vector in a loop of its own.

Left as one vector of the whole row, LLVM split it and built the ragged part lane by lane
(an LRN's shifted loads: 211 `vinsertps`, 2-7x slower); a predicated last vector (a
split with a tail condition) made a concat 5-10x slower; TVM's loop partitioning of the
schedule made both fast but put wrapper blocks in the kernel, which the block-dependency
analyses (the concat's slices, the one-to-one maps) do not read. So the schedule keeps
the one-vector row, which the analyses see, and marks it; the build splits it.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import ir, tirx
from tvm.s_tir import SBlock

from engine.ir_module import with_functions

RAGGED_ROW = "blockwise.ragged_row"  # loop annotation: the register width in lanes


def mark_ragged_row(sch, loop, extent: int, lanes: int) -> None:
    """Vectorise `loop` (a spatial row of `extent`) and, when it is ragged and longer than
    `lanes`, mark it for the build to split."""
    sch.vectorize(loop)
    if extent > lanes and extent % lanes:
        sch.annotate(loop, RAGGED_ROW, lanes)


def _fresh_definitions(stmt):
    """`stmt` with every Var it defines (loops, block iterators, lets) replaced by a new one
    and every block renamed, so that a copy can sit beside the original."""
    defined: dict[int, ir.Var] = {}

    for kind, var_of in ((tirx.For, lambda n: [n.loop_var]), (SBlock, lambda n: [iv.var for iv in n.iter_vars]),
                         (tirx.LetStmt, lambda n: [n.var]), (tirx.Let, lambda n: [n.var])):
        tvm_ffi.structural_walk(stmt, (kind, lambda n, var_of=var_of: defined.update(
            (v.__chandle__(), v) for v in var_of(n))), order="pre")
    fresh = {h: tirx.Var(v.name + "_tail", v.ty) for h, v in defined.items()}
    stmt = tvm_ffi.structural_map(stmt, (ir.Var, lambda v: fresh.get(v.__chandle__(), v)))

    def rename(block):
        return SBlock(block.iter_vars, block.reads, block.writes, block.name_hint + "_tail", block.body,
                      block.init, block.alloc_buffers, block.match_buffers, block.annotations)

    return tvm_ffi.structural_map(stmt, (SBlock, rename))


def _split(loop: tirx.For):
    lanes = int(loop.annotations[RAGGED_ROW])
    extent, start = int(loop.extent), int(loop.min)
    body_end = extent // lanes * lanes
    dtype = loop.loop_var.ty
    c = lambda v: tirx.const(v, dtype)
    outer, lane = tirx.Var(loop.loop_var.name + "_o", dtype), tirx.Var(loop.loop_var.name + "_v", dtype)
    at = lambda expr: tvm_ffi.structural_map(
        loop.body, (ir.Var, lambda v: expr if v.same_as(loop.loop_var) else v))
    body = tirx.For(outer, c(0), c(body_end // lanes), tirx.ForKind.SERIAL,
                    tirx.For(lane, c(0), c(lanes), tirx.ForKind.VECTORIZED,
                             at(c(start) + outer * c(lanes) + lane)))
    tail_var = tirx.Var(loop.loop_var.name + "_t", dtype)
    tail = tirx.For(tail_var, c(0), c(extent - body_end), tirx.ForKind.VECTORIZED,
                    _fresh_definitions(at(c(start + body_end) + tail_var)))
    return tirx.SeqStmt([body, tail])


def split_ragged_rows(mod: tvm.IRModule) -> tvm.IRModule:
    """`mod` with every marked row split into register-wide vectors and a tail vector."""
    updates = {}
    for gv, func in mod.functions_items():
        if not isinstance(func, tirx.PrimFunc):
            continue
        marked = []
        tvm_ffi.structural_walk(func.body, (tirx.For, lambda f: marked.append(RAGGED_ROW in f.annotations)),
                                order="pre")
        if any(marked):
            updates[gv] = tvm_ffi.structural_map(
                func, (tirx.For, lambda f: _split(f) if RAGGED_ROW in f.annotations else f))
    return with_functions(mod, updates)
