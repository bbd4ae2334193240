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

from engine.blockdeps.index_eval import Unsupported

from .facts import DEFAULT_FEW_BOUND, AccessKind, EdgeBlockMap, EdgeClass, KernelRef, Method
from .footprints import BoxSet, block_boxes, block_elements
from .kernel_access import KernelAccesses

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


def unique_sorted(a: np.ndarray) -> np.ndarray:
    """np.unique by sorting (numpy's hash-based unique is far slower on big int arrays)."""
    if len(a) == 0:
        return a
    a = np.sort(a)
    keep = np.empty(len(a), dtype=bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


def _csr_from_pairs(keys: np.ndarray, n_c: int, n_p: int) -> tuple[np.ndarray, np.ndarray]:
    keys = unique_sorted(keys)
    rows, cols = keys // n_p, keys % n_p
    indptr = np.zeros(n_c + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_c), out=indptr[1:])
    return indptr, cols.astype(np.int64)


def fast_map(edge: EdgeInput) -> tuple[np.ndarray, np.ndarray, int, bool, tuple[str, ...]]:
    """(indptr, indices, element_deps upper bound, boxes exact, notes).

    A consumer block depends on a producer block when the consumer's read box overlaps the
    producer's write box and, as boxes may be loose, their flat element ranges overlap too
    (both are supersets of the real footprints, so the test stays conservative)."""
    pka, cka = edge.producer_ka, edge.consumer_ka
    pw = block_boxes(pka, edge.output, AccessKind.WRITE)
    out_param = pka.params[edge.output]
    p_flat = pw.flat_intervals(out_param.strides)
    notes: list[str] = []
    n_c, n_p = cka.grid.blocks, pka.grid.blocks
    element_deps, rows, cols, exact = 0, [], [], pw.exact and not edge.via_view
    for param in edge.params:
        r = block_boxes(cka, param, AccessKind.READ)
        exact &= r.exact
        element_deps += int(r.volumes.sum())
        r_flat = r.flat_intervals(cka.params[param].strides)
        if cka.params[param].shape != out_param.shape:
            notes.append("reshape view: boxes compared as flat element ranges")
            rr, cc = overlap_pairs(r_flat, p_flat, r_flat, p_flat)
        else:
            rr, cc = overlap_pairs(r, pw, r_flat, p_flat)
        rows.append(rr)
        cols.append(cc)
    indptr, indices = _csr_from_pairs(np.concatenate(rows) * n_p + np.concatenate(cols), n_c, n_p)
    return indptr, indices, element_deps, exact, tuple(dict.fromkeys(notes))


# Candidate (consumer, producer) block pairs one edge may compare: ~10 s of numpy work.
# Grids of 10^5 blocks whose ranges are not ordered (shufflenet's channel shuffle on cuda:
# 351232 blocks a side) would otherwise take hours; such an edge is mapped all-to-all, with the reason.
MAX_CANDIDATE_PAIRS = 1 << 27


def overlap_pairs(c_box: BoxSet, p_box: BoxSet, c_flat: BoxSet, p_flat: BoxSet) -> tuple[np.ndarray, np.ndarray]:
    """(consumer, producer) block pairs whose boxes and flat ranges both overlap.

    Candidates come from a sweep over flat ranges when the producer's ranges, sorted by
    start, also have sorted ends (blocks write ordered, disjoint-ish ranges: the usual
    case); else from all pairs, in chunks."""
    c_ids = np.nonzero(c_box.nonempty)[0]
    p_ids = np.nonzero(p_box.nonempty)[0]
    if not len(c_ids) or not len(p_ids):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    p_lo, p_hi = p_flat.lo[p_ids, 0], p_flat.hi[p_ids, 0]
    order = np.argsort(p_lo, kind="stable")
    lo_s, hi_s, p_sorted = p_lo[order], p_hi[order], p_ids[order]
    c_lo, c_hi = c_flat.lo[c_ids, 0], c_flat.hi[c_ids, 0]
    if np.all(np.diff(hi_s) >= 0):
        start = np.searchsorted(hi_s, c_lo, side="right")
        stop = np.searchsorted(lo_s, c_hi, side="left")
    else:
        start = np.zeros(len(c_ids), np.int64)
        stop = np.full(len(c_ids), len(p_ids), np.int64)
    count = np.maximum(stop - start, 0)
    candidates = int(count.sum())
    if candidates > MAX_CANDIDATE_PAIRS:
        raise Unsupported(f"{len(c_ids)} x {len(p_ids)} blocks give {candidates:.2e} block pairs to compare, "
                          f"over the analysis budget of {MAX_CANDIDATE_PAIRS:.1e}")
    rows_out, cols_out = [], []
    # Dimensions where some box is not full-extent (extent-1 dims never separate boxes).
    span = np.maximum(c_box.hi.max(axis=0), p_box.hi.max(axis=0))
    dims = [d for d in range(c_box.lo.shape[1]) if span[d] > 1]
    limit = 1 << 23
    bounds = np.searchsorted(np.cumsum(count), np.arange(limit, int(count.sum()) + limit, limit))
    first = 0
    for last in list(bounds) + [len(c_ids)]:
        last = min(max(last, first + 1), len(c_ids))
        if last <= first:
            continue
        cnt = count[first:last]
        rows = np.repeat(np.arange(first, last), cnt)
        offs = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        cand = start[first:last].repeat(cnt) + offs
        ci, pi = c_ids[rows], p_sorted[cand]
        keep = (c_flat.lo[ci, 0] < p_flat.hi[pi, 0]) & (p_flat.lo[pi, 0] < c_flat.hi[ci, 0])
        for d in dims:
            keep &= (c_box.lo[ci, d] < p_box.hi[pi, d]) & (p_box.lo[pi, d] < c_box.hi[ci, d])
        rows_out.append(ci[keep])
        cols_out.append(pi[keep])
        first = last
        if first >= len(c_ids):
            break
    return np.concatenate(rows_out), np.concatenate(cols_out)


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
    key = unique_sorted(flat * ka.grid.blocks + blk)
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
            key = unique_sorted(blocks * numel + flat)
            blocks, flat = key // numel, key % numel
            element_deps += len(key)
            _mark(blocks, flat, own, multi, n_p, mat, keys, all_rows)
    if read_everywhere:
        flat = unique_sorted(np.concatenate(read_everywhere))
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
        keys.append(unique_sorted(b * n_p + p))


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
