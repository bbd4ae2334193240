"""Consumer block -> producer blocks for one kernel edge, by the fast or the exact method,
and the classification of the map.

>>> classify(np.array([0, 1, 2]), np.array([0, 1]), producer_blocks=2, few_bound=4)
<EdgeClass.ONE_TO_ONE: 'one-to-one'>
>>> classify(np.array([0, 2, 4]), np.array([0, 1, 0, 1]), producer_blocks=2, few_bound=4)
<EdgeClass.ALL_TO_ALL: 'all-to-all'>
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .facts import AccessKind, EdgeBlockMap, EdgeClass, KernelRef, Method
from .footprints import BoxSet, block_boxes, block_elements
from .kernel_access import KernelAccesses

DEFAULT_FEW_BOUND = 4
# Largest consumer x producer boolean matrix built at once.
_MATRIX_CELLS = 1 << 26
_ALL = -2  # owner of elements written by an earlier nest: every block
_NONE = -1


def classify(indptr: np.ndarray, indices: np.ndarray, producer_blocks: int, few_bound: int) -> EdgeClass:
    """The class of a CSR consumer->producer map (see EdgeClass)."""
    fan_in = np.diff(indptr)
    if len(indices) == 0:
        return EdgeClass.INDEPENDENT
    dependent = fan_in[fan_in > 0]
    if producer_blocks > 1 and np.all(dependent == producer_blocks):
        return EdgeClass.ALL_TO_ALL
    if producer_blocks == 1 and len(fan_in) > 1:
        return EdgeClass.ALL_TO_ALL  # one producer block feeds every consumer block
    if dependent.max() <= 1:
        return EdgeClass.ONE_TO_ONE
    if dependent.max() <= few_bound:
        return EdgeClass.ONE_TO_FEW
    return EdgeClass.PARTIAL


@dataclass(frozen=True, eq=False)
class EdgeInput:
    """What one kernel edge needs: producer output `output`, read by the consumer's
    params `params` (usually one), possibly through a reshape view."""

    producer: KernelRef
    consumer: KernelRef
    producer_ka: KernelAccesses
    consumer_ka: KernelAccesses
    output: int  # producer param index of the output
    params: tuple[int, ...]  # consumer param indices reading it
    via_view: bool


def _csr_from_matrix(mat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows, cols = np.nonzero(mat)
    indptr = np.zeros(mat.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=mat.shape[0]), out=indptr[1:])
    return indptr, cols.astype(np.int64)


def _csr_from_pairs(keys: np.ndarray, n_c: int, n_p: int) -> tuple[np.ndarray, np.ndarray]:
    keys = np.unique(keys)
    rows, cols = keys // n_p, keys % n_p
    indptr = np.zeros(n_c + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_c), out=indptr[1:])
    return indptr, cols.astype(np.int64)


def fast_map(edge: EdgeInput) -> tuple[np.ndarray, np.ndarray, int, bool, tuple[str, ...]]:
    """(indptr, indices, element_deps upper bound, boxes exact, notes) by box overlap."""
    pw = block_boxes(edge.producer_ka, edge.output, AccessKind.WRITE)
    out_shape = edge.producer_ka.params[edge.output].shape
    notes: list[str] = []
    reads: list[BoxSet] = []
    for param in edge.params:
        r = block_boxes(edge.consumer_ka, param, AccessKind.READ)
        if edge.consumer_ka.params[param].shape != out_shape:
            r = r.flat_intervals(edge.consumer_ka.params[param].strides)
            notes.append("reshape view: boxes compared as flat element ranges")
        reads.append(r)
    p = pw if reads[0].lo.shape[1] == pw.lo.shape[1] else pw.flat_intervals(edge.producer_ka.params[edge.output].strides)
    n_c, n_p = edge.consumer_ka.grid.blocks, edge.producer_ka.grid.blocks
    mat = np.zeros((n_c, n_p), dtype=bool) if n_c * n_p <= _MATRIX_CELLS else None
    keys = []
    p_ne = p.nonempty
    step = max(1, _MATRIX_CELLS // max(n_p * p.lo.shape[1] * 4, 1))
    element_deps = 0
    for r in reads:
        element_deps += int(r.volumes.sum())
        for s in range(0, n_c, step):
            lo, hi = r.lo[s:s + step, None, :], r.hi[s:s + step, None, :]
            hit = np.all((lo < p.hi[None]) & (p.lo[None] < hi), axis=2)
            hit &= p_ne[None, :] & r.nonempty[s:s + step, None]
            if mat is not None:
                mat[s:s + step] |= hit
            else:
                rr, cc = np.nonzero(hit)
                keys.append((rr + s) * n_p + cc)
    indptr, indices = _csr_from_matrix(mat) if mat is not None else \
        _csr_from_pairs(np.concatenate(keys) if keys else np.zeros(0, np.int64), n_c, n_p)
    exact = pw.exact and all(r.exact for r in reads) and not edge.via_view
    return indptr, indices, element_deps, exact, tuple(dict.fromkeys(notes))


def owner_map(ka: KernelAccesses, output: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Per flat element of output `output`, the block that writes it (-1: none, -2: an
    earlier nest, i.e. every block). Second value: (element, block) pairs sorted by element
    when some element has several writer blocks, else None."""
    numel = ka.params[output].numel
    owner = np.full(numel, _NONE, dtype=np.int64)
    pairs = []
    multi = False
    for blocks, flat in block_elements(ka, output, AccessKind.WRITE):
        if blocks is None:
            owner[flat] = _ALL
            continue
        pairs.append((flat, blocks))
        prev = owner[flat]
        clash = (prev >= 0) & (prev != blocks)
        owner[flat] = blocks
        multi |= bool(clash.any()) or bool((owner[flat] != blocks).any())
    if not multi:
        return owner, None
    flat = np.concatenate([f for f, _ in pairs])
    blk = np.concatenate([b for _, b in pairs])
    key = np.unique(flat * ka.grid.blocks + blk)
    return owner, np.stack([key // ka.grid.blocks, key % ka.grid.blocks], axis=1)


def exact_map(edge: EdgeInput, owner: tuple[np.ndarray, np.ndarray | None]) -> tuple[np.ndarray, np.ndarray, int]:
    """(indptr, indices, element_deps) from the producer's owner map and the consumer's
    exact read footprints."""
    own, multi = owner
    n_c, n_p = edge.consumer_ka.grid.blocks, edge.producer_ka.grid.blocks
    numel = len(own)
    mat = np.zeros((n_c, n_p), dtype=bool) if n_c * n_p <= _MATRIX_CELLS else None
    keys: list[np.ndarray] = []
    all_rows = np.zeros(n_c, dtype=bool)
    element_deps = 0
    read_everywhere: list[np.ndarray] = []
    for param in edge.params:
        if edge.consumer_ka.params[param].numel != numel:
            raise ValueError("view with a different element count")
        for blocks, flat in block_elements(edge.consumer_ka, param, AccessKind.READ):
            if blocks is None:
                read_everywhere.append(flat)
                continue
            key = np.unique(blocks * numel + flat)
            blocks, flat = key // numel, key % numel
            element_deps += len(key)
            _mark(blocks, flat, own, multi, n_p, mat, keys, all_rows)
    if read_everywhere:
        flat = np.unique(np.concatenate(read_everywhere))
        element_deps += len(flat) * n_c
        for c0 in range(0, n_c, max(1, (1 << 22) // max(len(flat), 1))):
            c = np.arange(c0, min(n_c, c0 + max(1, (1 << 22) // max(len(flat), 1))))
            _mark(np.repeat(c, len(flat)), np.tile(flat, len(c)), own, multi, n_p, mat, keys, all_rows)
    if mat is not None:
        mat[all_rows] = True
        indptr, indices = _csr_from_matrix(mat)
    else:
        keys.extend(c * n_p + np.arange(n_p) for c in np.nonzero(all_rows)[0])
        indptr, indices = _csr_from_pairs(np.concatenate(keys) if keys else np.zeros(0, np.int64), n_c, n_p)
    return indptr, indices, element_deps


def _mark(blocks, flat, own, multi, n_p, mat, keys, all_rows):
    o = own[flat]
    all_rows[blocks[o == _ALL]] = True
    if multi is None:
        hit = o >= 0
        b, p = blocks[hit], o[hit]
    else:
        lo = np.searchsorted(multi[:, 0], flat, side="left")
        hi = np.searchsorted(multi[:, 0], flat, side="right")
        cnt = hi - lo
        b = np.repeat(blocks, cnt)
        start = np.repeat(lo - np.cumsum(cnt) + cnt, cnt) + np.arange(cnt.sum())
        p = multi[start, 1]
    if mat is not None:
        mat[b, p] = True
    else:
        keys.append(np.unique(b * n_p + p))


def build_map(edge: EdgeInput, method: Method, few_bound: int, owner_cache: dict) -> EdgeBlockMap:
    """The EdgeBlockMap of one edge. `owner_cache` (producer func, output) -> owner map is
    shared across edges of one analysis (a producer with several consumers)."""
    indptr, indices, elems, exact, notes = fast_map(edge)
    used = Method.FAST
    if method is Method.EXACT or (method is Method.AUTO and not exact):
        key = (edge.producer.func, edge.output)
        if key not in owner_cache:
            owner_cache[key] = owner_map(edge.producer_ka, edge.output)
        indptr, indices, elems = exact_map(edge, owner_cache[key])
        used = Method.EXACT
        notes = tuple(n for n in notes if not n.startswith("reshape view: boxes"))
        if edge.via_view:
            notes += ("reshape view: compared as flat element offsets",)
    cls = classify(indptr, indices, edge.producer_ka.grid.blocks, few_bound)
    return EdgeBlockMap(edge.producer, edge.consumer, edge.producer_ka.grid, edge.consumer_ka.grid,
                        used, cls, indptr, indices, elems, few_bound, exact, edge.via_view, notes)
