"""Row-band block-level fusion for llvm: BlockDepend's one-to-few (halo) case, with the
intermediate kept in a per-task scratch buffer instead of main memory.

A conv-like kernel's parallel loop runs chunks `o * H + y` (an outer tile o, output row y
innermost) or `y * O + o` (rows outer, engine.schedule.cpu.conv.rows_outer); a consumer chunk of row y reads a window of the producer's rows (a 3x3 conv:
rows y-1..y+1; a 1x1 conv or depthwise -> pointwise: row y). The fused kernel runs one
parallel task per band of the consumer's rows; for each of its rows y it first computes
the producer rows that row needs and the task has not computed yet (every tile o), then
row y of the consumer. So a producer row is consumed while it is in the core's cache, and
the intermediate lives in a scratch buffer of the task holding only the band's rows (plus
the halo, which neighbouring tasks both compute: halo by recomputation). A consumer's own
row stages (a padding pass, an input repack) join the chain with their buffers in scratch
too. The row structure is read from the stages' write/read boxes (engine.blockdeps), so
any kernel with chunks `o * H + y` or `y * O + o` and row windows `clamp(s*y + a .. s*y + a + k)` fits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import tvm_ffi
from tvm import ir, tirx
from tvm.s_tir import SBlockRealize

from engine.blockdeps.facts import AccessKind
from engine.blockdeps.footprints import block_boxes
from engine.blockdeps.index_eval import Unsupported
from engine.blockdeps.kernel_access import kernel_accesses
from engine.parallel.codegen.cpu import CpuStage, cpu_member
from engine.parallel.plan import RowLink, unit_noun
from engine.parallel.tir_util import FusionUnsupported, RootParts, fresh_copy, fused_func, move_accesses, substitute

I64 = "int64"


def _c(v: int):
    return tirx.const(int(v), I64)


def _ops(y):
    """(min, max, constant) for row arithmetic on Python ints (sizes, the plan) or on TIR
    expressions (the fused kernel's loop bounds): one formula serves both."""
    if isinstance(y, (int, np.integer)):
        return min, max, int
    return tirx.min, tirx.max, _c


def _units(lo, hi, per: int):
    """The row units [lo // per, ceil(hi / per)) holding buffer rows [lo, hi)."""
    if per == 1:
        return lo, hi
    if isinstance(lo, (int, np.integer)):
        return lo // per, -(-hi // per)
    return tirx.floordiv(lo, _c(per)), tirx.floordiv(hi + _c(per - 1), _c(per))


@dataclass(frozen=True)
class RowWindow:
    """Rows [clamp(stride*y + offset), clamp(stride*y + offset + size)) of a buffer with
    `rows` rows are what row y of the next stage reads; `y` an int or a TIR expression."""

    stride: int
    offset: int
    size: int
    rows: int

    def _clamp(self, y, start: int):
        mn, mx, c = _ops(y)
        return mn(mx(y * c(self.stride) + c(start), c(0)), c(self.rows))

    def lo(self, y):
        return self._clamp(y, self.offset)

    def hi(self, y):
        return self._clamp(y, self.offset + self.size)


@dataclass(frozen=True, eq=False)
class RowStage:
    """A parallel stage whose chunk o*rows + y (or y*tiles + o: `rows_outer`) writes row unit
    y (axis `dim`) of `out`: rows [y*per, (y+1)*per), one row unless the schedule tiles
    several rows (DepthwiseRows)."""

    stage: CpuStage
    out: ir.Var
    dim: int
    rows: int  # row units
    window: RowWindow | None  # rows of the previous stage's buffer it reads (None: the first)
    per: int = 1  # buffer rows per unit
    rows_outer: bool = False

    @property
    def tiles(self) -> int:
        return self.stage.chunks // self.rows

    def by_tile(self, a: np.ndarray) -> np.ndarray:
        """Per-chunk values `a` (chunks first) as [tiles, rows, ...] whatever the chunk order."""
        if self.rows_outer:
            return np.swapaxes(a.reshape(self.rows, self.tiles, *a.shape[1:]), 0, 1)
        return a.reshape(self.tiles, self.rows, *a.shape[1:])

    @property
    def axis(self) -> str:
        """What a unit slices, in words: image or token rows (the second-to-last axis), the
        channels of an NCHW tensor (a concat's slices, a channel-window LRN) or an axis."""
        n = len(self.out.ty.shape)
        if self.dim == n - 2:
            return "rows"
        return "channels" if (n, self.dim) == (4, 1) else f"axis-{self.dim} slices"


def _stage_func(stage: CpuStage, params: list) -> tirx.PrimFunc:
    loop = tirx.For(stage.loop_var, _c(0), _c(stage.chunks), tirx.ForKind.PARALLEL, stage.body)
    return tirx.PrimFunc(params, loop)


def _row_dim(lo: np.ndarray, hi: np.ndarray, shape, chunks: int) -> tuple[int, int, int, bool] | None:
    """(axis, units, per, rows outer) along which chunk c writes exactly rows
    [u*per, (u+1)*per) of u = c % units, or None. On the row axis (the second-to-last) also
    u = c // (chunks / units), rows outer: such a conv's chunks also write channel tile
    c % tiles, and read as channel units they would seem to read all rows of their input."""
    ids = np.arange(chunks)

    def units_per(d: int) -> tuple[int, int] | None:
        n = int(shape[d])
        per = int(hi[0, d] - lo[0, d]) if chunks else 0
        if n <= 1 or per < 1 or n % per:
            return None
        units = n // per
        if units < 2 or chunks % units or not np.all(hi[:, d] - lo[:, d] == per):
            return None
        return units, per

    row = len(shape) - 2
    if row >= 0 and (found := units_per(row)):
        units, per = found
        for outer, unit in ((False, ids % units), (True, ids // (chunks // units))):
            if np.array_equal(lo[:, row], unit * per):
                return row, units, per, outer
    for d in range(len(shape)):
        if d != row and (found := units_per(d)) and np.array_equal(lo[:, d], ids % found[0] * found[1]):
            return d, *found, False
    return None


def _fit_window(lo: np.ndarray, hi: np.ndarray, rows_in: int) -> RowWindow | None:
    """The clamped affine window covering the rows [lo[y], hi[y]) each row y reads."""
    ys = np.flatnonzero(hi > lo)
    if len(ys) == 0:
        return None
    strides = {int(lo[b] - lo[a]) // (b - a) for a, b in zip(ys[:-1], ys[1:]) if (lo[b] - lo[a]) % (b - a) == 0}
    fits = []
    for s in sorted(strides or {0}):
        if s < 0:
            continue
        offset = int(np.min(lo[ys] - s * ys))
        size = int(np.max(hi[ys] - s * ys)) - offset
        w = RowWindow(int(s), offset, size, int(rows_in))
        if all(w.lo(int(y)) <= lo[y] and w.hi(int(y)) >= hi[y] for y in ys):
            fits.append(w)
    # the tightest: a padded stride-2 window (rows 0..1, 1..3, 3..5, ..) also fits stride 1
    # with a window of half the input
    return min(fits, key=lambda w: w.size, default=None)


def _boxes(stage: CpuStage, params: list, param: int, kind: AccessKind, n_inputs: int):
    try:
        ka = kernel_accesses(_stage_func(stage, params), "stage", n_inputs)
        if ka.grid.blocks != stage.chunks:
            raise FusionUnsupported("a stage's parallel loop is not its grid")
        return block_boxes(ka, param, kind)
    except Unsupported as err:
        raise FusionUnsupported(f"a stage's accesses cannot be read: {err}") from None


def row_stage(stage: CpuStage, out: ir.Var, prev: RowStage | None, name: str) -> RowStage:
    """The row structure of `stage` writing `out` (and reading `prev.out`); FusionUnsupported
    when it has none."""
    if stage.loop_var is None:
        raise FusionUnsupported(f"{name}: a serial stage has no rows")
    params = [out] if prev is None else [prev.out, out]
    w = _boxes(stage, params, len(params) - 1, AccessKind.WRITE, len(params) - 1)
    found = _row_dim(w.lo, w.hi, out.ty.shape, stage.chunks)
    if found is None:
        raise FusionUnsupported(f"{name}: its parallel chunks do not write one row each (o * rows + y)")
    dim, rows, per, outer = found
    shaped = RowStage(stage, out, dim, rows, None, per, outer).by_tile
    window = None
    if prev is not None:
        r = _boxes(stage, params, 0, AccessKind.READ, 1)
        lo = shaped(r.lo[:, prev.dim])
        hi = shaped(r.hi[:, prev.dim])
        empty = shaped(np.any(r.hi <= r.lo, axis=1))
        lo, hi = np.where(empty, 0, lo), np.where(empty, 0, hi)
        if not (np.all(lo == lo[0]) and np.all(hi == hi[0])):
            raise FusionUnsupported(f"{name}: the rows a chunk reads depend on more than its row")
        window = _fit_window(lo[0], hi[0], prev.rows * prev.per)
        # a window that moves with the row (a chunk of another axis, such as a pool parallel
        # over channels, reads every row: stride 0)
        if window is None or (rows > 1 and window.stride < 1) or 2 * window.size > prev.rows * prev.per:
            raise FusionUnsupported(f"{name}: each row reads all rows of its input (no row locality)")
    return RowStage(stage, out, dim, rows, window, per, outer)


def _rebase(node, buf: ir.Var, scratch: ir.Var, dim: int, base, order: tuple[int, ...]):
    """`node` with every access of `buf` moved to `scratch`: row index minus `base`, axes
    in `order` (scratch axis i is buffer axis order[i])."""

    def idx(indices):
        indices[dim] = indices[dim] - base
        return [indices[a] for a in order]

    def span(region):
        region[dim] = ir.Range.from_min_extent(region[dim].min - base, region[dim].extent)
        return [region[a] for a in order]

    return move_accesses(node, buf, scratch, idx, span)


def vector_axis(stage: CpuStage, buf: ir.Var) -> int | None:
    """The axis of `buf` the stage's vectorised stores run along (a conv epilogue writing
    NCHW from channel-vector accumulators: the channel axis), or None."""
    vec: set[int] = set()
    tvm_ffi.structural_walk(stage.body, (tirx.For, lambda f: vec.add(f.loop_var.__chandle__())
                                         if f.kind == tirx.ForKind.VECTORIZED else None))
    h, axes = buf.__chandle__(), set()

    def uses_vec(e) -> bool:
        found = [False]
        tvm_ffi.structural_walk(e, (ir.Var, lambda v: found.__setitem__(0, found[0] or v.__chandle__() in vec)))
        return found[0]

    def on_realize(r):
        binding = {iv.var.__chandle__(): uses_vec(val) for iv, val in zip(r.block.iter_vars, r.iter_values)}

        def on_store(st):
            if st.buffer.__chandle__() != h:
                return
            for a, index in enumerate(st.indices):
                names: list[bool] = []
                tvm_ffi.structural_walk(index, (ir.Var, lambda v: names.append(
                    binding.get(v.__chandle__(), v.__chandle__() in vec))))
                if any(names):
                    axes.add(a)

        tvm_ffi.structural_walk(r.block.body, (tirx.BufferStore, on_store))

    tvm_ffi.structural_walk(stage.body, (SBlockRealize, on_realize))
    return axes.pop() if len(axes) == 1 else None


def scratch_order(st: "RowStage") -> tuple[int, ...]:
    """Axis order of a chain buffer's scratch: as the buffer, but the axis the writer's
    vector stores run along innermost, so they are contiguous stores instead of scatters
    (the scratch is private to the fused kernel: its layout is free)."""
    n = len(st.out.ty.shape)
    v = vector_axis(st.stage, st.out)
    if v is None or v == n - 1:
        return tuple(range(n))
    return tuple(a for a in range(n) if a != v) + (v,)


def _rows_of(st: RowStage, tile, row):
    """The stage's body for the chunk of (tile, row): `chunk // inner` and `chunk % inner`
    (inner: the rows, or the tiles when rows are outer) become the outer and inner index
    themselves, so no division is left in the inner loops."""
    v = st.stage.loop_var
    outer, inner, n = (row, tile, st.tiles) if st.rows_outer else (tile, row, st.rows)
    h = v.__chandle__()
    cast = (lambda e: e) if str(v.ty) == I64 else (lambda e: tirx.Cast(str(v.ty), e))

    def on_div(e):
        if isinstance(e.a, ir.Var) and e.a.__chandle__() == h and isinstance(e.b, tirx.IntImm) \
                and e.b.value % n == 0:
            q = e.b.value // n
            return cast(outer if q == 1 else tirx.floordiv(outer, _c(q)))
        return e

    def on_mod(e):
        if isinstance(e.a, ir.Var) and e.a.__chandle__() == h and isinstance(e.b, tirx.IntImm) and e.b.value == n:
            return cast(inner)
        return e

    body = tvm_ffi.structural_map(st.stage.body, [(tirx.FloorDiv, on_div), (tirx.FloorMod, on_mod)], order="pre")
    return substitute(body, {h: cast(outer * _c(n) + inner)})


def _rows_loop(st: RowStage, start, stop, name: str) -> tirx.Stmt:
    """Rows [start, stop) of the stage, every tile (tile outer: a weight tile stays hot)."""
    o, r = tirx.Var(f"{name}_o", I64), tirx.Var(f"{name}_r", I64)
    # loops start at 0 (a loop with a variable start lost its offset in the lowering)
    inner = tirx.For(r, _c(0), stop - start, tirx.ForKind.SERIAL, _rows_of(st, o, start + r))
    return tirx.For(o, _c(0), _c(st.tiles), tirx.ForKind.SERIAL, inner)


@dataclass(frozen=True)
class RowPlan:
    """How the fused kernel splits the last stage's `rows`: task t runs rows
    [t*rows//tasks, (t+1)*rows//tasks), so bands differ by at most one row and the
    runtime's even split of the tasks gives every core the same number of rows; with
    `align` > 1, bands start at multiples of `align` rows (the producer's multi-row chunks:
    a band boundary inside one would have both tasks compute it).
    `whole_band`: each stage runs its band's rows tile by tile (a weight tile is read once
    per band), instead of row by row (the producer rows a row needs, then that row)."""

    tasks: int
    rows: int
    whole_band: bool = False
    align: int = 1

    @property
    def units(self) -> int:
        return -(-self.rows // self.align)

    def start(self, t):
        """Task t's first row; `t` an int or a TIR expression."""
        mn, _, c = _ops(t)
        first = t * self.units // self.tasks if isinstance(t, int) else tirx.floordiv(t * c(self.units), c(self.tasks))
        return first if self.align == 1 else mn(first * c(self.align), c(self.rows))

    @property
    def band(self) -> int:
        return max(self.start(t + 1) - self.start(t) for t in range(self.tasks))


def chain_align(chain: list[RowStage]) -> int:
    """Rows of the last stage per row unit of the first: its `per` when every window maps a
    row to the same row (depthwise -> pointwise), else 1."""
    first = chain[0]
    if first.per > 1 and all(st.window.stride == 1 and st.window.size == 1 and st.window.offset == 0
                             and st.per == 1 for st in chain[1:]):
        return first.per
    return 1


def plan_rows(chain: list[RowStage], tasks: int, whole_band: bool = False) -> RowPlan:
    rows, align = chain[-1].rows, chain_align(chain)
    return RowPlan(max(1, min(tasks, -(-rows // align))), rows, whole_band, align)


def _needs(chain: list[RowStage], y) -> list[tuple]:
    """Per stage (first .. last-but-one): the row units [lo, hi) of its buffer row unit y of
    the last stage needs, through the windows; `y` an int or a TIR expression."""
    _, mx, c = _ops(y)
    lo, hi = y, y + c(1)
    out = []
    for prev, st in reversed(list(zip(chain, chain[1:]))):
        lo, hi = st.window.lo(lo), st.window.hi(mx(hi - c(1), lo))
        lo, hi = _units(lo, mx(hi, lo), prev.per)
        out.append((lo, hi))
    return out[::-1]


def scratch_rows(chain: list[RowStage], plan: RowPlan) -> list[int]:
    """Rows of scratch each chain buffer (but the last) needs: the most any task spans."""
    most = [0] * (len(chain) - 1)
    for t in range(plan.tasks):
        r0, r1 = plan.start(t), plan.start(t + 1)
        first, last = _needs(chain, r0), _needs(chain, r1 - 1)
        most = [max(m, hi - lo) for m, (lo, _), (_, hi) in zip(most, first, last)]
    return most


def chain_scratch_bytes(chain: list[RowStage], plan: RowPlan) -> int:
    """Bytes of one task's scratch buffers."""
    total = 0
    for st, n in zip(chain[:-1], scratch_rows(chain, plan)):
        shape = [int(s) for s in st.out.ty.shape]
        total += math.prod(shape) // shape[st.dim] * n * st.per * st.out.dtype.itemsize
    return total


def fused_rows_body(chain: list[RowStage], plan: RowPlan, name: str = "fused") -> tirx.Stmt:
    """The parallel loop over row bands running the chain with scratch buffers."""
    t, yy = tirx.Var(f"{name}_task", I64), tirx.Var(f"{name}_y", I64)
    r0, r1 = plan.start(t), plan.start(t + _c(1))
    y = r0 + yy
    first = _needs(chain, r0)
    last = chain[-1]
    if plan.whole_band:
        end = _needs(chain, r1 - _c(1))
        steps = [_rows_loop(st, first[k][0], tirx.max(end[k][1], first[k][0]), f"{name}_s{k}")
                 for k, st in enumerate(chain[:-1])]
        steps.append(_rows_loop(last, r0, r1, f"{name}_s{len(chain) - 1}"))
        body = tirx.SeqStmt(steps)
    else:
        now, prev = _needs(chain, y), _needs(chain, y - _c(1))
        steps = []
        for k, st in enumerate(chain[:-1]):
            lo, hi = now[k]
            start = tirx.Select(yy == _c(0), lo, tirx.max(prev[k][1], lo))
            steps.append(_rows_loop(st, start, tirx.max(hi, start), f"{name}_s{k}"))
        o = tirx.Var(f"{name}_o", I64)
        steps.append(tirx.For(o, _c(0), _c(last.tiles), tirx.ForKind.SERIAL, _rows_of(last, o, y)))
        body = tirx.For(yy, _c(0), r1 - r0, tirx.ForKind.SERIAL, tirx.SeqStmt(steps))
    scratch = []
    for k, (st, n) in enumerate(zip(chain[:-1], scratch_rows(chain, plan))):
        shape = list(st.out.ty.shape)
        shape[st.dim] = n * st.per
        order = scratch_order(st)
        buf = tirx.decl_buffer([_c(int(shape[a])) for a in order], st.out.dtype, f"{st.out.name}_rows")
        base = first[k][0] if st.per == 1 else first[k][0] * _c(st.per)
        body = _rebase(body, st.out, buf, st.dim, base, order)
        scratch.append(buf)
    # Allocated by the task itself, around its row loop: an allocation left to the lowering
    # would be placed at the lowest common scope of its uses, one row step, and the rows
    # carried from one step to the next would be lost.
    task = tirx.SeqStmt([tirx.AllocBuffer(b) for b in scratch] + [body])
    return tirx.For(t, _c(0), _c(plan.tasks), tirx.ForKind.PARALLEL, task)


def _stage_output(stage: CpuStage, candidates: list[ir.Var]) -> ir.Var:
    written = []
    handles = {c.__chandle__(): c for c in candidates}
    tvm_ffi.structural_walk(stage.body, (tirx.BufferStore, lambda n: written.append(n.buffer.__chandle__())))
    hits = {h for h in written if h in handles}
    if len(hits) != 1:
        raise FusionUnsupported("a consumer stage writes no single row buffer")
    return handles[hits.pop()]


def row_chain(producer: tirx.PrimFunc, consumer: tirx.PrimFunc, names: list[str], consumer_param: int):
    """(producer's earlier stages, the row chain, the parts) of a producer -> consumer pair:
    the producer's last stage, then every stage of the consumer; FusionUnsupported when a
    stage has no row structure."""
    p = cpu_member(fresh_copy(producer), names[0])
    c = cpu_member(fresh_copy(consumer), names[1])
    inter = c.parts.inputs[consumer_param]
    if not tvm_ffi.structural_equal(inter.ty, p.parts.output.ty):
        raise FusionUnsupported(f"{names[1]} reads the producer's output with another shape (a view)")
    joined = {inter.__chandle__(): p.parts.output}
    c_stages = [CpuStage(s.loop_var, s.chunks, substitute(s.body, joined)) for s in c.stages]
    chain = [row_stage(p.stages[-1], p.parts.output, None, names[0])]
    owned = list(c.parts.allocs) + [c.parts.output]
    for k, st in enumerate(c_stages):
        out = c.parts.output if k == len(c_stages) - 1 else _stage_output(st, owned)
        chain.append(row_stage(st, out, chain[-1], names[1]))
    return p, c, chain


def _reads(stage: CpuStage, buf: ir.Var) -> bool:
    found = [False]
    h = buf.__chandle__()
    tvm_ffi.structural_walk(stage.body, (ir.expr.TensorLoad, lambda n: found.__setitem__(
        0, found[0] or n.source.__chandle__() == h)))
    return found[0]


def row_invariant_bytes(chain: list[RowStage], inputs) -> int:
    """Bytes of the inputs some stage reads the same part of for every row (weights): a
    row-band task re-reads them at every row step, where the kernels alone read a weight
    tile for a run of rows."""
    total = 0
    for buf in inputs:
        for st in chain:
            if not _reads(st.stage, buf):
                continue
            r = _boxes(st.stage, [buf, st.out], 0, AccessKind.READ, 1)
            lo, hi = st.by_tile(r.lo), st.by_tile(r.hi)
            if st.rows > 1 and np.all(lo == lo[:, :1]) and np.all(hi == hi[:, :1]):
                total += math.prod(int(d) for d in buf.ty.shape) * buf.dtype.itemsize
                break
    return total


def recomputed_share(chain: list[RowStage], plan: RowPlan) -> float:
    """Extra producer rows the tasks compute (halo rows computed by two tasks), as a share."""
    total = 0
    for t in range(plan.tasks):
        r0, r1 = plan.start(t), plan.start(t + 1)
        total += _needs(chain, r1 - 1)[0][1] - _needs(chain, r0)[0][0]
    return max(total / chain[0].rows - 1.0, 0.0)


def reading_units(chain: list[RowStage]) -> int:
    """How many of the last stage's units read any of the producer's (a concat reads its
    input in a slice of its channels only)."""
    firsts = (_needs(chain, y)[0] for y in range(chain[-1].rows))  # the producer's units [lo, hi)
    return sum(1 for lo, hi in firsts if hi > lo)


# Row steps re-read the weights; past this they fall out of the core's L2 and the pair runs
# slower fused (2-core AVX-512 Xeon, resnet50: 211 KiB 0.92-0.94x, 852 KiB 0.86-1.28x,
# 3.4 MiB 1.3-1.5x; mobilenet_block's depthwise -> pointwise, 32 KiB: 0.80x)
MAX_ROW_INVARIANT_BYTES = 256 * 1024
MAX_RECOMPUTED = 0.1  # the default band count keeps halo recomputation under this share


def default_tasks(chain: list[RowStage], cores: int) -> int:
    """Row bands: the most of (4, 3, 2, 1) x cores whose halo recomputation stays under
    MAX_RECOMPUTED (measured on a 2-core AVX-512 Xeon: 2-4 bands per core within noise of
    each other on depthwise -> pointwise; a 3x3 consumer pays 2 halo rows per band);
    FusionUnsupported when even one band per core recomputes more."""
    for per_core in (4, 3, 2, 1):
        plan = plan_rows(chain, per_core * cores)
        share = recomputed_share(chain, plan)
        if share <= MAX_RECOMPUTED:
            return plan.tasks
    raise FusionUnsupported(f"one row band per core recomputes {share:.0%} of the producer's rows "
                            f"(more than {MAX_RECOMPUTED:.0%})")


def _window_text(st: RowStage, prev: RowStage) -> str:
    w = st.window
    start = f"{w.stride}*y" if w.stride != 1 else "y"
    start += f"{w.offset:+d}" if w.offset else ""
    unit = f"{unit_noun(st.axis)} y" if st.per == 1 else f"unit y ({st.per} {st.axis})"
    return f"{st.out.name} {unit} reads {prev.out.name} {prev.axis} [{start}, {start}+{w.size})"


class WouldNotPay(FusionUnsupported):
    """A pair with a row structure that the fused kernel would run slower (one line); `link`
    holds its row facts at one band per core or the default band count."""

    def __init__(self, reason: str, link):
        super().__init__(reason)
        self.link = link


def row_link(producer: tirx.PrimFunc, consumer: tirx.PrimFunc, names: list[str], consumer_param: int,
             cores: int, tasks: int | None = None):
    """The plan.RowLink of a pair; FusionUnsupported when it has no row structure,
    WouldNotPay when it has one that would not pay. The fused kernel is generated once, as
    the dry run."""
    p, c, chain = row_chain(producer, consumer, names, consumer_param)
    inputs = list(p.parts.inputs) + [x for i, x in enumerate(c.parts.inputs) if i != consumer_param]
    reasons = []
    weights = row_invariant_bytes(chain, inputs)
    if weights > MAX_ROW_INVARIANT_BYTES:
        reasons.append(f"{weights / 1024:.0f} KiB of weights would be re-read at every row step "
                       f"(more than {MAX_ROW_INVARIANT_BYTES // 1024} KiB)")
    if not tasks:
        try:
            tasks = default_tasks(chain, cores)
        except FusionUnsupported as err:
            reasons.append(str(err))
            tasks = cores
    plan = plan_rows(chain, tasks)
    # Bands split the consumer's units evenly; when only some of them read the producer
    # (a concat's slice) the producer's work falls on the few bands holding them, while the
    # pair alone runs it on every core (2-core EPYC, max pool -> concat over channels,
    # fused/plain: 1.06-1.19x with the pool in half of the channels, 1.11x in 80%, 0.97x in 83%)
    reading = reading_units(chain)
    if reading < chain[-1].rows:
        reasons.append(f"the consumer reads the producer in {reading} of its {chain[-1].rows} "
                       f"{chain[-1].axis} only (a slice): bands would split its work unevenly")
    if not reasons:
        _fused(p, c, chain, consumer_param, plan, producer)  # the dry run
    kept = 0
    for st in chain[:-1]:
        kept += math.prod(int(d) for d in st.out.ty.shape) * st.out.dtype.itemsize
    link = RowLink(consumer_param, chain[-1].rows, plan.tasks, plan.band,
                   tuple(_window_text(st, prev) for prev, st in zip(chain, chain[1:])),
                   chain[0].stage.chunks, chain[-1].stage.chunks, len(c.stages), kept,
                   int(chain_scratch_bytes(chain, plan)), round(float(recomputed_share(chain, plan)), 4),
                   per=chain[-1].per, axis=chain[-1].axis)
    if reasons:
        raise WouldNotPay("; ".join(reasons), link)
    return link


def fuse_rows_cpu(producer: tirx.PrimFunc, consumer: tirx.PrimFunc, names: list[str], consumer_param: int,
                  tasks: int, whole_band: bool = False) -> tirx.PrimFunc:
    """One PrimFunc: the producer's earlier stages, then the row-band chain (see module doc).
    It takes the producer's inputs and the consumer's other inputs and writes only the
    consumer's output: the intermediate has no other reader (the caller checks)."""
    p, c, chain = row_chain(producer, consumer, names, consumer_param)
    return _fused(p, c, chain, consumer_param, plan_rows(chain, tasks, whole_band), producer)


def _fused(p, c, chain: list[RowStage], consumer_param: int, plan: RowPlan, like: tirx.PrimFunc) -> tirx.PrimFunc:
    phases = [s.body if s.loop_var is None else
              tirx.For(s.loop_var, _c(0), _c(s.chunks), tirx.ForKind.PARALLEL, s.body) for s in p.stages[:-1]]
    phases.append(fused_rows_body(chain, plan))
    in_scratch = {st.out.__chandle__() for st in chain[:-1]}
    c_inputs = tuple(x for i, x in enumerate(c.parts.inputs) if i != consumer_param)
    allocs = tuple(a for a in p.parts.allocs + c.parts.allocs if a.__chandle__() not in in_scratch)
    parts = RootParts(tuple(p.parts.inputs) + c_inputs, c.parts.output, allocs, phases[0])
    return fused_func([parts], phases[0] if len(phases) == 1 else tirx.SeqStmt(phases), like)
