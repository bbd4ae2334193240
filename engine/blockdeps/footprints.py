"""Per-block footprints of one kernel on one parameter buffer.

- `block_boxes` (fast): fix the block index, relax every other loop to its range, and
  evaluate the index expressions with interval arithmetic, vectorised over all blocks.
  Boxes are clamped to the buffer. `BoxSet.exact` says whether the boxes are provably
  the footprints (affine indices without gaps, no conditions on relaxed loops, one access
  or identical boxes, no earlier phases).
- `block_elements` (exact): enumerate the loop variables each access depends on (numpy
  broadcasting, a chunk of blocks at a time) and yield (block, flat element) pairs, with
  the block predicates and if-conditions applied. Flat = row-major element offset, so a
  reshape view of a buffer has the same flat elements.

>>> # boxes = block_boxes(kernel_accesses(f, "concat", 2), 0, AccessKind.READ)
>>> # boxes.lo[b], boxes.hi[b]  -> start/stop of block b's box
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from .facts import AccessKind
from .index_eval import Unsupported, interval, linear_form, points, var_key
from .kernel_access import Access, KernelAccesses

# Most points enumerated at once (int64 arrays of this many elements per index dimension).
CHUNK_POINTS = 1 << 22


@dataclass(frozen=True, eq=False)
class BoxSet:
    lo: np.ndarray  # (blocks, ndim) start, inclusive
    hi: np.ndarray  # (blocks, ndim) stop, exclusive; a block with hi <= lo anywhere is empty
    exact: bool
    has_global: bool  # includes accesses of earlier nests (every block waits for them)
    flat_lo: np.ndarray | None = None  # (blocks,) row-major offset range, from the
    flat_hi: np.ndarray | None = None  # simplified flat index expression

    @property
    def nonempty(self) -> np.ndarray:
        return np.all(self.hi > self.lo, axis=1)

    @property
    def volumes(self) -> np.ndarray:
        return np.prod(np.maximum(self.hi - self.lo, 0), axis=1)

    def flat_intervals(self, strides: tuple[int, ...]) -> "BoxSet":
        """1-D boxes over row-major element offsets covering each block's footprint: the
        range of the box's corners, narrowed by the flat index range when known."""
        s = np.asarray(strides, dtype=np.int64)
        ne = self.nonempty
        lo = np.where(ne, self.lo @ s, 0)
        hi = np.where(ne, (self.hi - 1) @ s + 1, 0)
        if self.flat_lo is not None:
            lo, hi = np.maximum(lo, self.flat_lo), np.minimum(hi, self.flat_hi)
            hi = np.where(hi > lo, hi, lo)
        return BoxSet(lo[:, None], hi[:, None], False, self.has_global)


def _block_values(ka: KernelAccesses, blocks: np.ndarray) -> dict[int, np.ndarray]:
    """Loop-variable values of the block loops for linear block ids `blocks`."""
    if not ka.block_loops:
        return {}
    idx = np.unravel_index(blocks, ka.grid.shape)
    return {var_key(l.var): l.min + i.astype(np.int64) for l, i in zip(ka.block_loops, idx)}


def _relaxed_loops(ka: KernelAccesses, access: Access):
    block = {var_key(l.var) for l in ka.block_loops} if not ka.is_global(access) else set()
    return [l for l in access.loops if var_key(l.var) not in block]


def _free_keys(expr) -> set[int]:
    from tvm import tirx

    return {var_key(v) for v in tirx.analysis.undefined_vars(expr, [])}


def _needed(access: Access) -> tuple[set[int], list]:
    """Variables the access's indices and conditions depend on (through the bindings),
    and the bindings to evaluate, in order."""
    need: set[int] = set()
    for e in (*access.indices, *access.conditions):
        need |= _free_keys(e)
    used = []
    for var, value in reversed(access.bindings):
        k = var_key(var)
        if k in need:
            need.discard(k)
            need |= _free_keys(value)
            used.append((var, value))
    return need, list(reversed(used))


def _comparisons(cond) -> list:
    """`cond` as a list of expressions e with e <= 0 (None for parts that are not
    comparisons: they are not used to narrow ranges)."""
    from tvm import tirx

    t = type(cond)
    if t is tirx.And:
        return _comparisons(cond.a) + _comparisons(cond.b)
    if t is tirx.Not and type(cond.a) in (tirx.LT, tirx.LE, tirx.GT, tirx.GE):
        flip = {tirx.LT: tirx.GE, tirx.LE: tirx.GT, tirx.GT: tirx.LE, tirx.GE: tirx.LT}[type(cond.a)]
        return _comparisons(flip(cond.a.a, cond.a.b))
    one = tirx.const(1, "int64")
    if t is tirx.LT:
        return [cond.a - cond.b + one]
    if t is tirx.LE:
        return [cond.a - cond.b]
    if t is tirx.GT:
        return [cond.b - cond.a + one]
    if t is tirx.GE:
        return [cond.b - cond.a]
    return [None]


def _forms(access: Access, keys: set[int]) -> dict:
    forms: dict[int, dict | None] = {}
    for var, value in access.bindings:
        try:
            forms[var_key(var)] = _linear_with_poison(value, forms, keys)
        except Unsupported:
            forms[var_key(var)] = None
    return forms


def _linear_with_poison(expr, forms, keys):
    poisoned = {k for k, f in forms.items() if f is None}
    if poisoned & _free_keys(expr):
        return None
    return linear_form(expr, {k: f for k, f in forms.items() if f is not None}, keys)


def _with_bindings(env: dict, bindings) -> dict:
    env = dict(env)
    for var, value in bindings:
        try:
            env[var_key(var)] = interval(value, env)
        except Unsupported:
            pass  # unused binding; a used one fails where it is used
    return env


def _narrowed_env(ka: KernelAccesses, access: Access, block_env: dict, relaxed: list,
                  forms: dict) -> tuple[dict, np.ndarray | bool]:
    """Interval environment of an access (bindings evaluated), with the ranges of relaxed
    loops narrowed by linear conditions (a necessary condition: stays conservative), and
    the blocks for which the access happens at all."""
    env = {} if ka.is_global(access) else dict(block_env)
    env.update({var_key(l.var): (np.int64(l.min), np.int64(l.min + l.extent - 1)) for l in relaxed})
    ext = {var_key(l.var): l.extent for l in relaxed}
    dead: np.ndarray | bool = False
    for cond in access.conditions:
        for e in _comparisons(cond):
            if e is None:
                continue
            try:
                f = _linear_with_poison(e, forms, set(ext))
            except Unsupported:
                continue
            if f is None:
                continue
            try:  # a condition false for a whole block removes the access from it
                e_lo, _ = interval(e, _with_bindings(env, access.bindings))
                dead = dead | (e_lo > 0)
            except Unsupported:
                pass
            for k, c in f.items():
                if ext.get(k, 1) <= 1:
                    continue
                trial = dict(env)
                trial[k] = (np.int64(0), np.int64(0))
                try:
                    rest_lo, _ = interval(e, _with_bindings(trial, access.bindings))
                except Unsupported:
                    continue
                lo, hi = env[k]
                if c > 0:
                    hi = np.minimum(hi, np.floor_divide(-rest_lo, c))
                else:
                    lo = np.maximum(lo, -np.floor_divide(rest_lo, c))
                env[k] = (lo, hi)
    live: np.ndarray | bool = ~np.asarray(dead)
    for l in relaxed:
        lo, hi = env[var_key(l.var)]
        live = live & (lo <= hi)
    return _with_bindings(env, access.bindings), live


def _certified(access: Access, relaxed: list, forms: dict) -> bool:
    """The interval box of this access is exactly its footprint for every block: affine
    indices over disjoint relaxed loops without gaps, and conditions that only bound
    one relaxed loop each (those were applied exactly by the narrowing)."""
    ext = {var_key(l.var): l.extent for l in relaxed}
    moving = {k for k, e in ext.items() if e > 1}
    for cond in access.conditions:
        for e in _comparisons(cond):
            if e is None:
                return False
            try:
                f = _linear_with_poison(e, forms, set(ext))
            except Unsupported:
                return False
            if f is None or len(set(f) & moving) > 1:
                return False
    seen: set[int] = set()
    for idx in access.indices:
        try:
            f = _linear_with_poison(idx, forms, set(ext))
        except Unsupported:
            return False
        if f is None:
            return False
        f = {k: c for k, c in f.items() if k in moving}
        if seen & set(f):
            return False
        seen |= set(f)
        covered = 0
        for k, c in sorted(f.items(), key=lambda kv: abs(kv[1])):
            if abs(c) > covered + 1:
                return False
            covered += abs(c) * (ext[k] - 1)
    return True


def _flat_expr(ka: KernelAccesses, access: Access):
    """Row-major offset of the access, simplified with the loop ranges and bindings known
    (fused-then-split index math such as x // 3025 * 3025 + x % 3025 folds back to x).
    None when TVM cannot build or simplify it."""
    from tvm import ir, sym, tirx

    try:
        an = sym.Analyzer()
        for l in access.loops:
            dt = str(l.var.ty.dtype) if hasattr(l.var.ty, "dtype") else "int64"
            an.bind(l.var, ir.Range.from_min_extent(tirx.const(l.min, dt), tirx.const(l.extent, dt)))
        for var, value in access.bindings:
            an.bind(var, value)
        flat = tirx.const(0, "int64")
        for idx, stride in zip(access.indices, ka.params[access.param].strides):
            flat = flat + tirx.Cast("int64", idx) * tirx.const(stride, "int64")
        return an.simplify(flat)
    except Exception:  # pylint: disable=broad-except
        return None


def block_boxes(ka: KernelAccesses, param: int, kind: AccessKind) -> BoxSet:
    """Fast method: one box per block of what it reads/writes of `param`, plus the range
    of its row-major offsets."""
    shape = np.asarray(ka.params[param].shape, dtype=np.int64)
    numel = ka.params[param].numel
    n_blocks, ndim = ka.grid.blocks, len(shape)
    blocks = np.arange(n_blocks)
    block_env = {k: (v, v) for k, v in _block_values(ka, blocks).items()}
    big, small = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    lo = np.full((n_blocks, ndim), big, dtype=np.int64)
    hi = np.full((n_blocks, ndim), small, dtype=np.int64)
    f_lo = np.full(n_blocks, big, dtype=np.int64)
    f_hi = np.full(n_blocks, small, dtype=np.int64)
    accesses = ka.of(param, kind)
    exact, has_global, boxes = len(accesses) > 0, False, []
    for a in accesses:
        relaxed = _relaxed_loops(ka, a)
        forms = _forms(a, {var_key(l.var) for l in relaxed})
        env, live = _narrowed_env(ka, a, block_env, relaxed, forms)
        a_lo = np.empty((n_blocks, ndim), dtype=np.int64)
        a_hi = np.empty((n_blocks, ndim), dtype=np.int64)
        for d, idx in enumerate(a.indices):
            l, h = interval(idx, env)
            a_lo[:, d] = np.broadcast_to(np.maximum(l, 0), n_blocks)
            a_hi[:, d] = np.broadcast_to(np.minimum(h, shape[d] - 1), n_blocks)
        try:
            flat_expr = _flat_expr(ka, a)
            if flat_expr is None:
                raise Unsupported("no flat index")
            fl, fh = interval(flat_expr, env)
        except Unsupported:
            fl, fh = np.int64(0), np.int64(numel - 1)
        fl = np.broadcast_to(np.maximum(fl, 0), n_blocks)
        fh = np.broadcast_to(np.minimum(fh, numel - 1), n_blocks)
        live = np.broadcast_to(live, n_blocks)
        empty = np.any(a_hi < a_lo, axis=1) | ~live | (fh < fl)
        lo = np.where(empty[:, None], lo, np.minimum(lo, a_lo))
        hi = np.where(empty[:, None], hi, np.maximum(hi, a_hi))
        f_lo = np.where(empty, f_lo, np.minimum(f_lo, fl))
        f_hi = np.where(empty, f_hi, np.maximum(f_hi, fh))
        has_global |= ka.is_global(a)
        exact &= not ka.is_global(a) and _certified(a, relaxed, forms)
        boxes.append((a_lo, a_hi, empty))
    if len(boxes) > 1 and exact:
        first = boxes[0]
        exact = all(np.array_equal(b[2], first[2]) and np.array_equal(b[0][~b[2]], first[0][~first[2]])
                    and np.array_equal(b[1][~b[2]], first[1][~first[2]]) for b in boxes[1:])
    empty = np.any(hi < lo, axis=1)
    lo[empty], hi[empty] = 0, -1
    f_lo[empty], f_hi[empty] = 0, -1
    return BoxSet(lo, hi + 1, bool(exact), has_global, f_lo, f_hi + 1)


def _loop_ranges(ka: KernelAccesses, access: Access, relaxed: list) -> dict[int, tuple[int, int]]:
    """Narrowed [lo, hi] of each relaxed loop, over all blocks (for enumeration)."""
    blocks = np.arange(ka.grid.blocks)
    block_env = {k: (v, v) for k, v in _block_values(ka, blocks).items()}
    forms = _forms(access, {var_key(l.var) for l in relaxed})
    env, live = _narrowed_env(ka, access, block_env, relaxed, forms)
    out = {}
    for l in relaxed:
        lo, hi = env[var_key(l.var)]
        sel = np.broadcast_to(live, np.shape(lo)) if np.ndim(lo) else True
        lo_v = int(np.min(lo[sel])) if np.ndim(lo) and np.any(sel) else int(np.min(lo))
        hi_v = int(np.max(hi[sel])) if np.ndim(hi) and np.any(sel) else int(np.max(hi))
        out[var_key(l.var)] = (max(lo_v, l.min), min(hi_v, l.min + l.extent - 1))
    return out


def block_elements(ka: KernelAccesses, param: int, kind: AccessKind,
                   chunk_points: int = CHUNK_POINTS) -> Iterator[tuple[np.ndarray | None, np.ndarray]]:
    """Exact method: (blocks, flat elements) pairs of every access of `param`.

    Pairs come in chunks of whole blocks; `blocks` is None for accesses of earlier nests
    (they count for every block). Pairs may repeat."""
    p = ka.params[param]
    shape = np.asarray(p.shape, dtype=np.int64)
    strides = np.asarray(p.strides, dtype=np.int64)
    for a in ka.of(param, kind):
        need, used = _needed(a)
        glob = ka.is_global(a)
        all_relaxed = _relaxed_loops(ka, a)
        ranges = _loop_ranges(ka, a, all_relaxed)
        relaxed = [l for l in all_relaxed if var_key(l.var) in need]
        if any(ranges[var_key(l.var)][1] < ranges[var_key(l.var)][0] for l in relaxed):
            continue  # the access never happens
        sizes = [ranges[var_key(l.var)][1] - ranges[var_key(l.var)][0] + 1 for l in relaxed]
        per_block = int(np.prod(sizes, dtype=np.int64)) if relaxed else 1
        n_blocks = 1 if glob else ka.grid.blocks
        step = max(1, chunk_points // max(per_block, 1))
        for start in range(0, n_blocks, step):
            blocks = np.arange(start, min(start + step, n_blocks))
            nd = len(relaxed) + 1
            env = {} if glob else {k: v.reshape((-1,) + (1,) * (nd - 1))
                                   for k, v in _block_values(ka, blocks).items()}
            for i, l in enumerate(relaxed):
                shp = [1] * nd
                shp[i + 1] = sizes[i]
                r0 = ranges[var_key(l.var)][0]
                env[var_key(l.var)] = np.arange(r0, r0 + sizes[i], dtype=np.int64).reshape(shp)
            for var, value in used:
                env[var_key(var)] = points(value, env)
            full = (len(blocks),) + tuple(sizes)
            mask = np.ones(full, dtype=bool)
            flat = np.zeros(full, dtype=np.int64)
            for d, idx in enumerate(a.indices):
                v = np.broadcast_to(points(idx, env), full)
                mask &= (v >= 0) & (v < shape[d])
                flat += v * strides[d]
            for c in a.conditions:
                mask &= np.broadcast_to(points(c, env), full)
            if glob:
                yield None, flat[mask]
            else:
                yield np.broadcast_to(blocks.reshape((-1,) + (1,) * (nd - 1)), full)[mask], flat[mask]
