"""A minimal horizontal fusion of scheduled CPU kernels, for co-tuning.

    fuse_parallel([(f_a, k_a), (f_b, k_b)]) ->
        <pre-loops of f_a> <pre-loops of f_b>
        for c in T.parallel(k_a + k_b):
            if c < k_a:  for r in range(E_a / k_a): <body of f_a's parallel loop at c*E_a/k_a + r>
            else:        for r in range(E_b / k_b): <body of f_b's parallel loop at ...>

Each member is a scheduled PrimFunc whose last root-level loop is `T.parallel` over E
iterations; `k` (a divisor of E) is the number of chunks of the fused loop it gets. The
CPU thread pool splits the fused loop statically into equal ranges of chunks, so the chunk
counts decide how the members' work is balanced across threads. Layout-rewrite preprocessing
blocks (weight repacks) are removed first: the fused kernel takes the packed weights.

Not engine/parallel (the colleague's real pass): this works on standalone PrimFuncs for
measurement only; parameters are not shared between members.
"""

from __future__ import annotations

import tvm
from tvm import s_tir, tirx
from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock


def _root(func: tirx.PrimFunc) -> s_tir.SBlock:
    return func.body.block


def _stmts(stmt) -> list:
    return list(stmt.seq) if isinstance(stmt, tirx.SeqStmt) else [stmt]


def parallel_extent(func: tirx.PrimFunc) -> int:
    """Iterations of the member's last root-level parallel loop."""
    return int(_split_member(func)[1].extent)


def _split_member(func):
    stmts = _stmts(_root(func).body)
    last = stmts[-1]
    if not (isinstance(last, tirx.For) and last.kind == tirx.ForKind.PARALLEL):
        raise ValueError("member kernel does not end in a root-level parallel loop")
    return stmts[:-1], last


def strip_preproc(func: tirx.PrimFunc) -> tirx.PrimFunc:
    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(tvm.IRModule({"main": func}))
    return mod["main"]


def fuse_parallel(members: list[tuple[tirx.PrimFunc, int]]) -> tirx.PrimFunc:
    """One kernel running all members in one parallel loop, member i over k_i chunks."""
    pre, allocs, params, branches = [], [], [], []
    offset = 0
    chunk = None
    for func, k in members:
        func = strip_preproc(func)
        head, loop = _split_member(func)
        extent = int(loop.extent)
        if k < 1 or extent % k:
            raise ValueError(f"chunk count {k} does not divide the parallel extent {extent}")
        dtype = str(loop.loop_var.ty.dtype)
        if chunk is None:
            chunk = tirx.Var("chunk", dtype)
        per = extent // k
        inner = tirx.Var("r", dtype)
        c = chunk
        value = (c - tirx.const(offset, dtype)) * tirx.const(per, dtype) + inner
        body = tirx.SeqStmt([tirx.Bind(loop.loop_var, value), loop.body])
        serial = tirx.For(inner, tirx.const(0, dtype), tirx.const(per, dtype), tirx.ForKind.SERIAL, body)
        branches.append((offset + k, serial))
        offset += k
        pre += head
        allocs += list(_root(func).alloc_buffers)
        params += list(func.params)
    stmt = branches[-1][1]
    for bound, branch in reversed(branches[:-1]):
        stmt = tirx.IfThenElse(chunk < tirx.const(bound, str(chunk.ty.dtype)), branch, stmt)
    loop = tirx.For(chunk, tirx.const(0, str(chunk.ty.dtype)), tirx.const(offset, str(chunk.ty.dtype)),
                    tirx.ForKind.PARALLEL, stmt)
    root = s_tir.SBlock([], [], [], "root", tirx.SeqStmt(pre + [loop]), alloc_buffers=allocs)
    attrs = tvm.ir.make_node("ir.DictAttrs", **{"tirx.noalias": True, "tirx.is_scheduled": True,
                                                "global_symbol": "main"})
    return tirx.PrimFunc(params, s_tir.SBlockRealize([], True, root), attrs=attrs)
