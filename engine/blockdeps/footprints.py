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

    @property
    def nonempty(self) -> np.ndarray:
        return np.all(self.hi > self.lo, axis=1)

    @property
    def volumes(self) -> np.ndarray:
        return np.prod(np.maximum(self.hi - self.lo, 0), axis=1)

    def flat_intervals(self, strides: tuple[int, ...]) -> "BoxSet":
        """1-D boxes over row-major element offsets covering each box (for reshape views)."""
        s = np.asarray(strides, dtype=np.int64)
        ne = self.nonempty
        lo = np.where(ne, self.lo @ s, 0)
        hi = np.where(ne, (self.hi - 1) @ s + 1, 0)
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


def _certified(ka: KernelAccesses, access: Access, relaxed: list) -> bool:
    """The interval box of this access is exactly its footprint for every block."""
    keys = {var_key(l.var) for l in relaxed}
    ext = {var_key(l.var): l.extent for l in relaxed}
    for c in access.conditions:
        need = _free_keys(c)
        forms_free = set()
        for var, value in access.bindings:
            if var_key(var) in need:
                forms_free |= _free_keys(value)
        if (need | forms_free) & keys:
            return False
    forms: dict[int, dict] = {}
    for var, value in access.bindings:
        f = linear_form(value, forms, keys)
        if f is not None:
            forms[var_key(var)] = f
        else:
            forms[var_key(var)] = None  # poisoned: any use is not affine
    seen: set[int] = set()
    for idx in access.indices:
        try:
            f = _linear_with_poison(idx, forms, keys)
        except Unsupported:
            return False
        if f is None:
            return False
        if seen & set(f):
            return False
        seen |= set(f)
        covered = 0
        for k, c in sorted(f.items(), key=lambda kv: abs(kv[1])):
            if abs(c) > covered + 1:
                return False
            covered += abs(c) * (ext[k] - 1)
    return True


def _linear_with_poison(expr, forms, keys):
    poisoned = {k for k, f in forms.items() if f is None}
    if poisoned & _free_keys(expr):
        return None
    return linear_form(expr, {k: f for k, f in forms.items() if f is not None}, keys)


def block_boxes(ka: KernelAccesses, param: int, kind: AccessKind) -> BoxSet:
    """Fast method: one box per block of what it reads/writes of `param`."""
    shape = np.asarray(ka.params[param].shape, dtype=np.int64)
    n_blocks, ndim = ka.grid.blocks, len(shape)
    blocks = np.arange(n_blocks)
    block_env = {k: (v, v) for k, v in _block_values(ka, blocks).items()}
    lo = np.full((n_blocks, ndim), np.iinfo(np.int64).max, dtype=np.int64)
    hi = np.full((n_blocks, ndim), np.iinfo(np.int64).min, dtype=np.int64)
    accesses = ka.of(param, kind)
    exact, has_global, boxes = len(accesses) > 0, False, []
    for a in accesses:
        relaxed = _relaxed_loops(ka, a)
        env = {} if ka.is_global(a) else dict(block_env)
        env.update({var_key(l.var): (np.int64(l.min), np.int64(l.min + l.extent - 1)) for l in relaxed})
        for var, value in a.bindings:
            try:
                env[var_key(var)] = interval(value, env)
            except Unsupported:
                pass  # unused binding; a used one fails below
        a_lo = np.empty((n_blocks, ndim), dtype=np.int64)
        a_hi = np.empty((n_blocks, ndim), dtype=np.int64)
        for d, idx in enumerate(a.indices):
            l, h = interval(idx, env)
            a_lo[:, d] = np.broadcast_to(np.maximum(l, 0), n_blocks)
            a_hi[:, d] = np.broadcast_to(np.minimum(h, shape[d] - 1), n_blocks)
        live = np.ones(n_blocks, dtype=bool)
        block_conds = [c for c in a.conditions]
        if block_conds and not ka.is_global(a):
            live = _block_only_conditions(ka, a, block_conds, live)
        a_hi[~live] = a_lo[~live] - 1
        empty = np.any(a_hi < a_lo, axis=1)
        lo = np.where(empty[:, None], lo, np.minimum(lo, a_lo))
        hi = np.where(empty[:, None], hi, np.maximum(hi, a_hi))
        has_global |= ka.is_global(a)
        exact &= not ka.is_global(a) and _certified(ka, a, relaxed)
        boxes.append((a_lo, a_hi, empty))
    if len(boxes) > 1 and exact:
        first = boxes[0]
        exact = all(np.array_equal(b[2], first[2]) and np.array_equal(b[0][~b[2]], first[0][~first[2]])
                    and np.array_equal(b[1][~b[2]], first[1][~first[2]]) for b in boxes[1:])
    empty = np.any(hi < lo, axis=1)
    lo[empty], hi[empty] = 0, -1
    return BoxSet(lo, hi + 1, bool(exact), has_global)


def _block_only_conditions(ka, access, conds, live):
    """Apply the conditions that depend on the block index only (others are relaxed)."""
    block_keys = {var_key(l.var) for l in ka.block_loops}
    need, used = _needed(Access(access.param, access.kind, (), tuple(conds), access.bindings,
                                access.loops, access.nest))
    if not need <= block_keys:
        return live
    env = _block_values(ka, np.arange(ka.grid.blocks))
    try:
        for var, value in used:
            env[var_key(var)] = points(value, env)
        for c in conds:
            live = live & np.broadcast_to(points(c, env), live.shape)
    except Unsupported:
        pass
    return live


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
        relaxed = [l for l in _relaxed_loops(ka, a) if var_key(l.var) in need]
        per_block = int(np.prod([l.extent for l in relaxed], dtype=np.int64)) if relaxed else 1
        n_blocks = 1 if glob else ka.grid.blocks
        step = max(1, chunk_points // max(per_block, 1))
        for start in range(0, n_blocks, step):
            blocks = np.arange(start, min(start + step, n_blocks))
            nd = len(relaxed) + 1
            env = {} if glob else {k: v.reshape((-1,) + (1,) * (nd - 1))
                                   for k, v in _block_values(ka, blocks).items()}
            for i, l in enumerate(relaxed):
                shp = [1] * nd
                shp[i + 1] = l.extent
                env[var_key(l.var)] = np.arange(l.min, l.min + l.extent, dtype=np.int64).reshape(shp)
            for var, value in used:
                env[var_key(var)] = points(value, env)
            full = (len(blocks),) + tuple(l.extent for l in relaxed)
            mask = np.ones(full, dtype=bool)
            flat = np.zeros(full, dtype=np.int64)
            for d, idx in enumerate(a.indices):
                v = np.broadcast_to(points(idx, env), full)
                mask &= (v >= 0) & (v < shape[d])
                flat += v * strides[d]
            for c in a.conditions:
                mask &= np.broadcast_to(points(c, env), full)
            if glob:
                yield None, np.unique(flat[mask])
            else:
                yield np.broadcast_to(blocks.reshape((-1,) + (1,) * (nd - 1)), full)[mask], flat[mask]
