"""Block-level dependencies of a scheduled model: every kernel's grid, every kernel edge's
block map, and the model-wide summaries (simplification, parallelism).

>>> # deps = analyze_model(Session("fire_module").scheduled("cuda"))
>>> # deps.class_counts()[EdgeClass.ONE_TO_ONE]  -> 1 (squeeze -> expand1x1)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

import numpy as np
import tvm

from engine.errors import BlockDepsError

from .block_map import DEFAULT_FEW_BOUND, EdgeInput, build_map
from .facts import EdgeBlockMap, EdgeClass, KernelGrid, KernelRef, Method, ModelBlockDeps
from .index_eval import Unsupported
from .kernel_access import KernelAccesses, kernel_accesses, kernel_grid
from .kernel_edges import KernelInput, Launch, kernel_inputs
from .model_graph import parallelism, simplification


def kernel_refs(launches: Iterable[Launch], kernels=(), labels: Mapping[str, str] | None = None) -> tuple[KernelRef, ...]:
    """KernelRefs for `main`'s launches; operators from the CompileResult's KernelCalls
    (matched in order by PrimFunc name), labels from an OperatorGraph's op labels."""
    calls = list(kernels)
    refs, j = [], 0
    for launch in launches:
        ops: tuple[str, ...] = ()
        for jj in range(j, len(calls)):
            if calls[jj].func == launch.func:
                ops, j = tuple(calls[jj].ops), jj + 1
                break
        labs = tuple(labels[o] for o in ops if labels and o in labels)
        refs.append(KernelRef(launch.index, launch.var, launch.func, ops, labs))
    return tuple(refs)


@dataclass(frozen=True)
class _Unreadable:
    """A kernel whose accesses the analysis cannot read: its grid, and why."""

    grid: KernelGrid
    reason: str


@dataclass(frozen=True)
class _Unanalysed:
    """A kernel edge with an unreadable side: mapped conservatively, with the reason."""

    producer: KernelRef
    consumer: KernelRef
    producer_grid: KernelGrid
    consumer_grid: KernelGrid
    reason: str


def _accesses(mod: tvm.IRModule, launches: tuple[Launch, ...]) -> dict[str, KernelAccesses | _Unreadable]:
    out: dict[str, KernelAccesses | _Unreadable] = {}
    for launch in launches:
        if launch.func not in out:
            try:
                out[launch.func] = kernel_accesses(mod[launch.func], launch.func, launch.n_inputs)
            except Unsupported as err:
                out[launch.func] = _Unreadable(kernel_grid(mod[launch.func], launch.func),
                                               f"kernel {launch.func}: {err}")
    return out


def _edge_inputs(refs, accesses, launches, inputs: Iterable[KernelInput]) -> list[EdgeInput | _Unanalysed]:
    grouped: dict[tuple[int, int, int], list[KernelInput]] = {}
    for i in inputs:
        grouped.setdefault((i.producer, i.consumer, i.output), []).append(i)
    edges: list[EdgeInput | _Unanalysed] = []
    for (p, c, o), ins in sorted(grouped.items(), key=lambda kv: (kv[0][1], kv[0][0], kv[0][2])):
        pka, cka = accesses[launches[p].func], accesses[launches[c].func]
        bad = [x.reason for x in (pka, cka) if isinstance(x, _Unreadable)]
        if bad:
            edges.append(_Unanalysed(refs[p], refs[c], pka.grid, cka.grid, "; ".join(dict.fromkeys(bad))))
            continue
        out_param = launches[p].n_inputs + o
        edges.append(EdgeInput(refs[p], refs[c], pka, cka, out_param, tuple(i.param for i in ins),
                               any(i.view_shape is not None and i.view_shape != pka.params[out_param].shape
                                   for i in ins)))
    return edges


class _Prepared:
    """What every edge analysis of one module shares."""

    def __init__(self, scheduled, labels=None):
        mod = scheduled.module
        if mod is None:
            raise BlockDepsError("the compile result has no module (stopped before scheduling?)")
        self.launches, inputs, self.notes = kernel_inputs(mod)
        self.refs = kernel_refs(self.launches, scheduled.kernels, labels)
        self.accesses = _accesses(mod, self.launches)
        self.edges = _edge_inputs(self.refs, self.accesses, self.launches, inputs)
        self.grids = tuple(self.accesses[l.func].grid for l in self.launches)


def analyze_model(scheduled, method: Method = Method.AUTO, few_bound: int = DEFAULT_FEW_BOUND,
                  labels: Mapping[str, str] | None = None,
                  progress: Callable[[int, int], None] | None = None) -> ModelBlockDeps:
    """Block dependencies of every kernel edge of a scheduled CompileResult
    (`Session.scheduled(target)`). `labels` maps op ids to labels (OperatorGraph)."""
    prep = _Prepared(scheduled, labels)
    owner_cache: dict = {}
    maps: list[EdgeBlockMap] = []
    for n, edge in enumerate(prep.edges):
        maps.append(_build(edge, method, few_bound, owner_cache))
        if progress:
            progress(n + 1, len(prep.edges))
    notes = list(prep.notes)
    unanalysed = sum(1 for m in maps if m.notes and m.notes[0].startswith(NOT_ANALYSED))
    if unanalysed:
        notes.append(f"{unanalysed} of {len(maps)} edges {NOT_ANALYSED} (see each edge's note)")
    return assemble(scheduled.model, scheduled.target, method, few_bound, prep.refs, prep.grids,
                    tuple(maps), tuple(notes))


def _build(edge: EdgeInput | _Unanalysed, method: Method, few_bound: int, owner_cache: dict) -> EdgeBlockMap:
    """The edge's block map; an edge the analysis cannot read (an unreadable kernel, a
    data-dependent index) is mapped all-to-all, the conservative answer, with the reason."""
    if isinstance(edge, _Unanalysed):
        return conservative_map(edge.producer, edge.consumer, edge.producer_grid, edge.consumer_grid,
                                few_bound, edge.reason)
    try:
        return build_map(edge, method, few_bound, owner_cache)
    except (Unsupported, ValueError) as err:
        return conservative_map(edge.producer, edge.consumer, edge.producer_ka.grid, edge.consumer_ka.grid,
                                few_bound, str(err), edge.via_view)


NOT_ANALYSED = "not analysed, assumed all-to-all"
MAX_DENSE_PAIRS = 1 << 26  # pairs of a conservative all-to-all map (8 bytes each)


def conservative_map(producer: KernelRef, consumer: KernelRef, pgrid: KernelGrid, cgrid: KernelGrid,
                     few_bound: int, reason: str, via_view: bool = False) -> EdgeBlockMap:
    """Every consumer block depends on every producer block (what the kernel barrier orders).
    Raises BlockDepsError when that map would not fit in memory (it lists every pair)."""
    n_p, n_c = pgrid.blocks, cgrid.blocks
    if n_p * n_c > MAX_DENSE_PAIRS:
        raise BlockDepsError(f"edge {producer.func} -> {consumer.func}: {n_p} x {n_c} blocks could not be "
                             f"analysed ({reason}) and an all-to-all map that size does not fit in memory")
    indptr = np.arange(n_c + 1, dtype=np.int64) * n_p
    indices = np.tile(np.arange(n_p, dtype=np.int64), n_c)
    return EdgeBlockMap(producer, consumer, pgrid, cgrid, Method.FAST, EdgeClass.ALL_TO_ALL, indptr, indices,
                        element_deps=0, few_bound=few_bound, boxes_exact=False, via_view=via_view,
                        notes=(f"{NOT_ANALYSED} ({reason})",))


def assemble(model: str, target: str, method: Method, few_bound: int, refs: tuple[KernelRef, ...],
             grids: tuple[KernelGrid, ...], maps: tuple[EdgeBlockMap, ...], notes=()) -> ModelBlockDeps:
    return ModelBlockDeps(model, target, method, few_bound, refs, grids, maps,
                          simplification(grids, maps), parallelism(len(refs), maps), tuple(notes))


def analyze_edge(scheduled, producer: int, consumer: int, method: Method = Method.AUTO,
                 few_bound: int = DEFAULT_FEW_BOUND, labels: Mapping[str, str] | None = None) -> EdgeBlockMap:
    """The block map of the edge between kernel indices `producer` -> `consumer`."""
    prep = _Prepared(scheduled, labels)
    for edge in prep.edges:
        if edge.producer.index == producer and edge.consumer.index == consumer:
            return _build(edge, method, few_bound, {})
    raise BlockDepsError(f"no edge from kernel k{producer} to kernel k{consumer}")


def analyze_edges(scheduled, keep: Callable[[KernelRef, KernelRef], bool], method: Method = Method.AUTO,
                  few_bound: int = DEFAULT_FEW_BOUND) -> tuple[EdgeBlockMap, ...]:
    """The block maps of the kernel edges (producer, consumer) that `keep` accepts; edges
    the analysis cannot read come back all-to-all with a note (see `is_analysed`), or are
    left out when even that map would be too large."""
    prep = _Prepared(scheduled)
    owner_cache: dict = {}
    maps = []
    for edge in prep.edges:
        if keep(edge.producer, edge.consumer):
            try:
                maps.append(_build(edge, method, few_bound, owner_cache))
            except BlockDepsError:
                continue
    return tuple(maps)


def is_analysed(edge: EdgeBlockMap) -> bool:
    return not (edge.notes and edge.notes[0].startswith(NOT_ANALYSED))


def kernel_grids(scheduled) -> tuple[KernelGrid, ...]:
    """The grid of every launch of `main`, in launch order."""
    return _Prepared(scheduled).grids
