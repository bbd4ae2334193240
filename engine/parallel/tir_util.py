"""Small TIR helpers shared by the CPU and GPU horizontal-fusion code generators."""

from __future__ import annotations

import math
from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import ir, tirx
from tvm.s_tir import SBlock, SBlockRealize
from tvm.tirx import _ffi_api as _tirx_api
from tvm.tirx.buffer import is_buffer_var

from engine.errors import CompileError
from engine.ir_module import with_functions


OP_PATTERN_OPAQUE = 8  # relax OpPatternKind::kOpaque


class FusionUnsupported(CompileError):
    """A member kernel has a shape the horizontal code generator cannot fuse (one line)."""


def fresh_copy(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """The same PrimFunc with every Var (params, buffers, loops, block iters) replaced by a
    new one: two calls of one PrimFunc can then live side by side in a fused kernel."""
    cache: dict[int, ir.Var] = {}

    def on_var(var):
        h = var.__chandle__()
        if h not in cache:
            cache[h] = (_tirx_api.BufferVar(var.name, var.ty, None) if is_buffer_var(var)
                        else tirx.Var(var.name, var.ty))
        return cache[h]

    return tvm_ffi.structural_map(func, (ir.Var, on_var))


def c_identifier_names(mod: tvm.IRModule) -> tvm.IRModule:
    """`mod` with every PrimFunc variable whose name is not a C identifier renamed (`/`, `.`,
    `-` -> `_`): the CUDA code generator prints names as they are, and an ONNX input such as
    resnet50's `gpu_0/data_0` made nvcc fail. Other PrimFuncs are returned as they are."""
    import re

    def bad(name: str) -> bool:
        return not name.isidentifier()

    updates = {}
    for gv, func in mod.functions_items():
        if not isinstance(func, tirx.PrimFunc):
            continue
        names: list[str] = []
        tvm_ffi.structural_walk(func, (ir.Var, lambda v: names.append(v.name)))
        if not any(bad(n) for n in names):
            continue
        cache: dict[int, ir.Var] = {}

        def on_var(var):
            if not bad(var.name):
                return var
            h = var.__chandle__()
            if h not in cache:
                new = re.sub(r"\W", "_", var.name)
                new = new if new[:1].isalpha() or new[:1] == "_" else f"v_{new}"
                cache[h] = (_tirx_api.BufferVar(new, var.ty, None) if is_buffer_var(var) else tirx.Var(new, var.ty))
            return cache[h]

        updates[gv] = tvm_ffi.structural_map(func, (ir.Var, on_var))
    return with_functions(mod, updates)


def unravel(index, dims, dtype: str = "int64") -> dict[int, object]:
    """Vars of `dims` ((var, extent) pairs, outermost first) bound to the row-major digits of
    the linear `index` (of type `dtype`): the last var is fastest, the first is not wrapped.
    Keyed by `__chandle__()`, for `substitute`; a var of another type gets a Cast."""
    mapping, stride = {}, 1
    for pos, (var, ext) in enumerate(reversed(dims)):
        idx = index // tirx.const(stride, dtype) if stride > 1 else index
        if pos < len(dims) - 1:
            idx = idx % tirx.const(ext, dtype)
        mapping[var.__chandle__()] = idx if str(var.ty) == dtype else tirx.Cast(str(var.ty), idx)
        stride *= ext
    return mapping


def buffer_bytes(buf) -> int:
    """Bytes of a buffer Var with a static shape (a PrimFunc param or allocation)."""
    return math.prod(int(d) for d in buf.ty.shape) * buf.dtype.itemsize


def move_accesses(node, buf: ir.Var, to: ir.Var, indices, region, value=lambda v: v):
    """`node` with every access of buffer `buf` moved to buffer `to`: `indices(list) -> list`
    maps a load's or store's indices, `region(list of Range) -> list` a block's read or write
    region, `value(expr)` a stored value."""
    h = buf.__chandle__()

    def on_load(n):
        return tirx.BufferLoad(to, indices(list(n.indices))) if n.source.__chandle__() == h else n

    def on_store(n):
        return tirx.BufferStore(to, value(n.value), indices(list(n.indices))) if n.buffer.__chandle__() == h else n

    def on_region(n):
        return ir.TensorRegion(to, region(list(n.region)), n.ty) if n.source.__chandle__() == h else n

    return tvm_ffi.structural_map(node, [(ir.expr.TensorLoad, on_load), (tirx.BufferStore, on_store),
                                         (ir.TensorRegion, on_region)])


def substitute(node, mapping: dict[int, object]):
    """Replace Vars (keyed by `__chandle__()`) by expressions."""
    if not mapping:
        return node
    return tvm_ffi.structural_map(node, (ir.Var, lambda v: mapping.get(v.__chandle__(), v)))


@dataclass(frozen=True, eq=False)
class RootParts:
    """A scheduled PrimFunc taken apart: params, root-block allocations and root body."""

    inputs: tuple[ir.Var, ...]
    output: ir.Var
    allocs: tuple[ir.Var, ...]
    body: tirx.Stmt


def root_parts(func: tirx.PrimFunc, name: str) -> RootParts:
    realize = func.body
    if not isinstance(realize, SBlockRealize) or len(realize.block.iter_vars):
        raise FusionUnsupported(f"{name}: no root block (not a scheduled block-level PrimFunc)")
    block = realize.block
    if len(block.match_buffers):
        raise FusionUnsupported(f"{name}: root block has match_buffers")
    if len(func.params) < 2 or not all(is_buffer_var(p) for p in func.params):
        raise FusionUnsupported(f"{name}: expected buffer params (inputs..., one output)")
    return RootParts(tuple(func.params[:-1]), func.params[-1], tuple(block.alloc_buffers), block.body)


def fused_func(parts: list[RootParts], body: tirx.Stmt, like: tirx.PrimFunc,
               extra_allocs=()) -> tirx.PrimFunc:
    """A PrimFunc taking all members' inputs, then all members' outputs (call_tir DPS
    order for a tuple output), with one root block holding every member's allocations."""
    params = [p for m in parts for p in m.inputs] + [m.output for m in parts]
    allocs = [a for m in parts for a in m.allocs] + list(extra_allocs)
    root = SBlock([], [], [], "root", body, None, allocs)
    # op_pattern 8 (kOpaque): a target whose build re-runs FuseOps (cuda's default pipeline)
    # must not merge a fused kernel with its neighbours; the merged kernel would allocate
    # the intermediate between them inside the launch ("Cannot allocate global memory")
    attrs = tvm.ir.make_node("ir.DictAttrs", **{"tirx.is_scheduled": True, "tirx.noalias": True,
                                                "op_pattern": OP_PATTERN_OPAQUE})
    return tirx.PrimFunc(params, SBlockRealize([], True, root), ret_type=like.ret_type, attrs=attrs)


def dispatch(index: tirx.PrimExpr, ranges: list[tuple[int, int]], bodies: list[tirx.Stmt],
             wrap=lambda cond: cond) -> tirx.Stmt:
    """`if index < end0: body0 elif index < end1: body1 ... else: body_last`."""
    stmt = bodies[-1]
    for (_, end), body in reversed(list(zip(ranges[:-1], bodies[:-1]))):
        cond = index < tirx.const(end, index.ty if hasattr(index, "ty") else "int64")
        stmt = tirx.IfThenElse(wrap(cond), body, stmt)
    return stmt


def walk(node, kind, fn) -> None:
    tvm_ffi.structural_walk(node, (kind, fn), order="pre")


def count(node, kind, pred=lambda n: True) -> int:
    found = [0]

    def on(n):
        if pred(n):
            found[0] += 1

    walk(node, kind, on)
    return found[0]
