"""What one scheduled PrimFunc reads and writes, per block: its grid and every access to a
parameter buffer, with the loops, block bindings and conditions around it.

Blocks (see facts.py): cuda, the `blockIdx.*` loops; llvm, the outermost `T.parallel`
loop and any serial loops around it. The *grid nest* is the last top-level loop nest that
writes an output parameter; accesses in earlier nests are *global*: every block of the
grid waits for them (the nests run one after the other).

>>> # grid = kernel_accesses(mod["concatenate"], "concatenate", n_inputs=2).grid
>>> # grid.blocks, grid.axis  -> (379, BlockAxis.BLOCK_IDX) on squeezenet's first concat
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tvm import ir, s_tir, tirx

from .facts import AccessKind, BlockAxis, GridDim, KernelGrid
from .index_eval import Unsupported, var_key

_TAG_ORDER = {"blockIdx.z": 0, "blockIdx.y": 1, "blockIdx.x": 2}


@dataclass(frozen=True, eq=False)
class Loop:
    var: ir.Var
    min: int
    extent: int
    tag: str  # "blockIdx.x", "threadIdx.y", "parallel", "serial", "vectorized", ...


@dataclass(frozen=True, eq=False)
class Access:
    """One load or store of a parameter buffer."""

    param: int
    kind: AccessKind
    indices: tuple
    conditions: tuple  # all must hold for the access to happen
    bindings: tuple  # ((iter var, value expr), ...), outer blocks first
    loops: tuple[Loop, ...]  # enclosing loops, outermost first
    nest: int  # top-level nest it sits in


@dataclass(frozen=True)
class Param:
    name: str
    shape: tuple[int, ...]
    is_output: bool

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    @property
    def strides(self) -> tuple[int, ...]:
        out, acc = [], 1
        for d in reversed(self.shape):
            out.append(acc)
            acc *= d
        return tuple(reversed(out))


@dataclass(frozen=True, eq=False)
class KernelAccesses:
    func: str
    grid: KernelGrid
    block_loops: tuple[Loop, ...]  # the grid's loops, slowest first (matches grid.dims)
    params: tuple[Param, ...]
    accesses: tuple[Access, ...]  # only accesses to parameter buffers
    grid_nest: int

    def is_global(self, access: Access) -> bool:
        return access.nest != self.grid_nest

    def of(self, param: int, kind: AccessKind) -> list[Access]:
        return [a for a in self.accesses if a.param == param and a.kind is kind]


def kernel_accesses(func: tirx.PrimFunc, name: str, n_inputs: int) -> KernelAccesses:
    """Walk a scheduled PrimFunc; `n_inputs` leading params are inputs, the rest outputs."""
    symbolic = [p.name for p in func.params if not all(isinstance(s, tirx.IntImm) for s in p.ty.shape)]
    if symbolic:  # shapes known only at run time (Range, Compress, NonMaxSuppression...)
        raise Unsupported(f"symbolic shape of {', '.join(symbolic)}")
    params = tuple(Param(p.name, tuple(int(s) for s in p.ty.shape), i >= n_inputs)
                   for i, p in enumerate(func.params))
    walker = _Walker({var_key(p): i for i, p in enumerate(func.params)})
    body = func.body
    if isinstance(body, s_tir.SBlockRealize):  # the root block
        body = body.block.body
    nests = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    for n, stmt in enumerate(nests):
        walker.nest = n
        walker.visit(stmt, (), (), ())
    outputs = {i for i, p in enumerate(params) if p.is_output}
    writers = [a.nest for a in walker.accesses if a.kind is AccessKind.WRITE and a.param in outputs]
    grid_nest = max(writers) if writers else len(nests) - 1
    block_loops, axis = _grid_loops(walker.nest_loops.get(grid_nest, []))
    dims = tuple(GridDim(str(l.tag if l.tag.startswith("blockIdx") else l.var.name), l.extent)
                 for l in block_loops)
    grid = KernelGrid(name, axis, dims, phases=len(nests))
    return KernelAccesses(name, grid, tuple(block_loops), params, tuple(walker.accesses), grid_nest)


def _grid_loops(loops: list[Loop]) -> tuple[list[Loop], BlockAxis]:
    """Block loops of a nest, from its loops in pre-order."""
    bound = [l for l in loops if l.tag.startswith("blockIdx")]
    if bound:
        bound.sort(key=lambda l: _TAG_ORDER.get(l.tag, 3))
        return bound, BlockAxis.BLOCK_IDX
    # llvm: the first parallel loop and the serial loops enclosing it (the outer chain).
    chain: list[Loop] = []
    for l in loops:
        if l.tag == "parallel":
            return [c for c in chain if c.extent > 1] + [l], BlockAxis.PARALLEL_LOOP
        chain.append(l)
    return [], BlockAxis.SINGLE


def kernel_grid(func: tirx.PrimFunc, name: str) -> KernelGrid:
    """The grid alone, from the loops: for kernels whose accesses cannot be read (the
    analysis then assumes every block of theirs depends on every block of the other side)."""
    walker = _Walker({}, loops_only=True)
    body = func.body
    if isinstance(body, s_tir.SBlockRealize):
        body = body.block.body
    nests = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    for n, stmt in enumerate(nests):
        walker.nest = n
        walker.visit(stmt, (), (), ())
    block_loops, axis = _grid_loops(walker.nest_loops.get(len(nests) - 1, []))
    dims = tuple(GridDim(str(l.tag if l.tag.startswith("blockIdx") else l.var.name), l.extent)
                 for l in block_loops)
    return KernelGrid(name, axis, dims, phases=len(nests))


class _Walker:
    def __init__(self, param_of: dict[int, int], loops_only: bool = False):
        self.param_of = param_of
        self.loops_only = loops_only  # collect loops; skip what cannot be read
        self.accesses: list[Access] = []
        self.nest = 0
        self.nest_loops: dict[int, list[Loop]] = {}

    def visit(self, stmt, loops, bindings, conds):
        t = type(stmt)
        if t is tirx.For:
            mn, ext = stmt.min, stmt.extent
            if type(mn) is not tirx.IntImm or type(ext) is not tirx.IntImm:
                if self.loops_only:
                    return
                raise Unsupported(f"loop {stmt.loop_var} with a symbolic range")
            if stmt.kind == tirx.ForKind.THREAD_BINDING:
                tag = str(stmt.thread_binding.thread_tag)
            else:
                tag = {tirx.ForKind.PARALLEL: "parallel", tirx.ForKind.VECTORIZED: "vectorized",
                       tirx.ForKind.UNROLLED: "unrolled"}.get(stmt.kind, "serial")
            loop = Loop(stmt.loop_var, int(mn.value), int(ext.value), tag)
            self.nest_loops.setdefault(self.nest, []).append(loop)
            self.visit(stmt.body, loops + (loop,), bindings, conds)
        elif t is tirx.SeqStmt:
            for s in stmt.seq:
                if type(s) is tirx.Bind:
                    bindings = bindings + ((s.var, s.value),)
                else:
                    self.visit(s, loops, bindings, conds)
        elif t is s_tir.SBlockRealize:
            block = stmt.block
            bindings = bindings + tuple(zip((iv.var for iv in block.iter_vars), stmt.iter_values))
            if not (type(stmt.predicate) is tirx.IntImm and stmt.predicate.value == 1):
                conds = conds + (stmt.predicate,)
            if block.init is not None:
                self.visit(block.init, loops, bindings, conds)
            self.visit(block.body, loops, bindings, conds)
        elif t is tirx.BufferStore:
            self.record(stmt.buffer, AccessKind.WRITE, stmt.indices, loops, bindings, conds)
            self.loads(stmt.value, loops, bindings, conds)
        elif t is tirx.IfThenElse:
            self.loads(stmt.condition, loops, bindings, conds)
            self.visit(stmt.then_case, loops, bindings, conds + (stmt.condition,))
            if stmt.else_case is not None:
                self.visit(stmt.else_case, loops, bindings, conds + (tirx.Not(stmt.condition),))
        elif t is tirx.AttrStmt:
            self.visit(stmt.body, loops, bindings, conds)
        elif t is tirx.Evaluate:
            self.loads(stmt.value, loops, bindings, conds)
        elif t in (tirx.AllocBuffer, tirx.DeclBuffer, tirx.Bind):
            pass
        elif hasattr(stmt, "body"):
            self.visit(stmt.body, loops, bindings, conds)
        elif not self.loops_only:
            raise Unsupported(f"statement {t.__name__}")

    def record(self, buffer, kind, indices, loops, bindings, conds):
        """Record an access to a parameter buffer, then the loads inside its indices."""
        if self.loops_only:
            return
        p = self.param_of.get(var_key(buffer))
        if p is not None:
            self.accesses.append(Access(p, kind, tuple(indices), conds, bindings, loops, self.nest))
        for i in indices:
            self.loads(i, loops, bindings, conds)

    def loads(self, expr, loops, bindings, conds):
        """Record parameter loads inside `expr`, with the if_then_else branch conditions."""
        if self.loops_only:
            return
        t = type(expr)
        if t is ir.TensorLoad:
            self.record(expr.source, AccessKind.READ, expr.indices, loops, bindings, conds)
        elif t is ir.Call and expr.op.name == "prim.if_then_else":
            c, a, b = expr.args
            self.loads(c, loops, bindings, conds)
            self.loads(a, loops, bindings, conds + (c,))
            self.loads(b, loops, bindings, conds + (tirx.Not(c),))
        elif t in (ir.Var, tirx.IntImm, tirx.FloatImm, ir.StringImm):
            return
        elif t is ir.Call:
            for a in expr.args:
                self.loads(a, loops, bindings, conds)
        elif t is tirx.Select:
            for a in (expr.condition, expr.true_value, expr.false_value):
                self.loads(a, loops, bindings, conds)
        elif t is tirx.Cast:
            self.loads(expr.value, loops, bindings, conds)
        elif t is tirx.Not:
            self.loads(expr.a, loops, bindings, conds)
        elif hasattr(expr, "a") and hasattr(expr, "b"):
            self.loads(expr.a, loops, bindings, conds)
            self.loads(expr.b, loops, bindings, conds)
        elif t is tirx.Let:
            self.loads(expr.value, loops, bindings, conds)
            self.loads(expr.body, loops, bindings + ((expr.var, expr.value),), conds)
        elif t is tirx.Reduce:
            raise Unsupported("Reduce node in a scheduled kernel")
        else:
            raise Unsupported(f"expression {t.__name__}")
