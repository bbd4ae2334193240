"""Horizontal fusion for llvm: several scheduled PrimFuncs -> one kernel.

A member's root body is a sequence of stages: a `T.parallel` loop (n chunks) or a serial
statement (one chunk), e.g. a 3x3 conv's padding loop then its conv loop. The fused
kernel runs phases; member stages are aligned to the last phase (a member with s stages
takes the last s phases). In a phase, member i's parallel loop (extent n_i) becomes the
range [o_i, o_i + n_i) of one fused `T.parallel(sum n_i)` loop, selected by `if`
dispatch; the end of a parallel loop is the barrier between a member's stages. The fused
PrimFunc takes all members' inputs, then all members' outputs (`call_tir` with a tuple
output).
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm import tirx

from engine.parallel.tir_util import (FusionUnsupported, RootParts, count, dispatch, fresh_copy,
                                      fused_func, root_parts, substitute)


@dataclass(frozen=True, eq=False)
class CpuStage:
    loop_var: tirx.Var | None  # None: a serial statement, one chunk
    chunks: int
    body: tirx.Stmt  # the parallel loop's body, or the whole statement


@dataclass(frozen=True, eq=False)
class CpuMember:
    parts: RootParts
    stages: tuple[CpuStage, ...]

    @property
    def chunks(self) -> int:
        return max(s.chunks for s in self.stages)


def _is_parallel(loop) -> bool:
    return loop.kind == tirx.ForKind.PARALLEL


def _stage(stmt, name: str) -> CpuStage:
    n_parallel = count(stmt, tirx.For, _is_parallel)
    if n_parallel == 0:
        return CpuStage(None, 1, stmt)
    if isinstance(stmt, tirx.For) and _is_parallel(stmt) and n_parallel == 1 \
            and isinstance(stmt.min, tirx.IntImm) and stmt.min.value == 0 \
            and isinstance(stmt.extent, tirx.IntImm):
        return CpuStage(stmt.loop_var, int(stmt.extent.value), stmt.body)
    raise FusionUnsupported(f"{name}: a parallel loop nested below the outer loops")


def cpu_member(func: tirx.PrimFunc, name: str) -> CpuMember:
    """How `func` splits into stages of parallel chunks; FusionUnsupported when it does not."""
    parts = root_parts(func, name)
    stmts = list(parts.body.seq) if isinstance(parts.body, tirx.SeqStmt) else [parts.body]
    stages: list[CpuStage] = []
    for stmt in stmts:
        stage = _stage(stmt, name)
        if stage.loop_var is None and stages and stages[-1].loop_var is None:
            stages[-1] = CpuStage(None, 1, tirx.SeqStmt([stages[-1].body, stage.body]))
        else:
            stages.append(stage)
    return CpuMember(parts, tuple(stages))


def member_chunks(func: tirx.PrimFunc, name: str) -> int:
    """Chunks of the member's main (largest) parallel stage."""
    return cpu_member(func, name).chunks


def _phase(members: list[tuple[CpuMember, CpuStage]], fv: tirx.Var) -> tirx.Stmt:
    if len(members) == 1 and members[0][1].loop_var is None:
        return members[0][1].body
    ranges, bodies, start = [], [], 0
    for _, st in members:
        if st.loop_var is not None:
            local = fv - tirx.const(start, "int64")
            if str(st.loop_var.ty) != "int64":
                local = tirx.Cast(str(st.loop_var.ty), local)
            bodies.append(substitute(st.body, {st.loop_var.__chandle__(): local}))
        else:
            bodies.append(st.body)
        ranges.append((start, start + st.chunks))
        start += st.chunks
    return tirx.For(fv, tirx.const(0, "int64"), tirx.const(start, "int64"), tirx.ForKind.PARALLEL,
                    dispatch(fv, ranges, bodies))


def fuse_cpu(funcs: list[tirx.PrimFunc], names: list[str]) -> tirx.PrimFunc:
    """One PrimFunc running every member's chunks, phase by phase (see module doc)."""
    members = [cpu_member(fresh_copy(f), n) for f, n in zip(funcs, names)]
    n_phases = max(len(m.stages) for m in members)
    phases = []
    for p in range(n_phases):
        active = [(m, m.stages[p - (n_phases - len(m.stages))]) for m in members
                  if p >= n_phases - len(m.stages)]
        phases.append(_phase(active, tirx.Var(f"fused_p{p}", "int64")))
    body = phases[0] if len(phases) == 1 else tirx.SeqStmt(phases)
    return fused_func([m.parts for m in members], body, funcs[0])
