"""Block-level dependencies of a scheduled model: every kernel's grid, every kernel edge's
block map, and the model-wide summaries (simplification, parallelism).

>>> # deps = analyze_model(Session("fire_module").scheduled("cuda"))
>>> # deps.class_counts()[EdgeClass.ONE_TO_ONE]  -> 1 (squeeze -> expand1x1)
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping

import tvm

from engine.errors import BlockDepsError

from .block_map import DEFAULT_FEW_BOUND, EdgeInput, build_map
from .facts import EdgeBlockMap, KernelGrid, KernelRef, Method, ModelBlockDeps
from .index_eval import Unsupported
from .kernel_access import KernelAccesses, kernel_accesses
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


def _accesses(mod: tvm.IRModule, launches: tuple[Launch, ...]) -> dict[str, KernelAccesses]:
    out = {}
    for launch in launches:
        if launch.func not in out:
            try:
                out[launch.func] = kernel_accesses(mod[launch.func], launch.func, launch.n_inputs)
            except Unsupported as err:
                raise BlockDepsError(f"kernel {launch.func}: {err}") from None
    return out


def _edge_inputs(refs, accesses, launches, inputs: Iterable[KernelInput]) -> list[EdgeInput]:
    grouped: dict[tuple[int, int, int], list[KernelInput]] = {}
    for i in inputs:
        grouped.setdefault((i.producer, i.consumer, i.output), []).append(i)
    edges = []
    for (p, c, o), ins in sorted(grouped.items(), key=lambda kv: (kv[0][1], kv[0][0], kv[0][2])):
        pka, cka = accesses[launches[p].func], accesses[launches[c].func]
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
    return assemble(scheduled.model, scheduled.target, method, few_bound, prep.refs, prep.grids,
                    tuple(maps), prep.notes)


def _build(edge: EdgeInput, method: Method, few_bound: int, owner_cache: dict) -> EdgeBlockMap:
    try:
        return build_map(edge, method, few_bound, owner_cache)
    except (Unsupported, ValueError) as err:
        raise BlockDepsError(f"edge {edge.producer.describe()} -> {edge.consumer.describe()}: {err}") from None


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
    raise BlockDepsError(f"no edge from kernel #{producer} to kernel #{consumer}")


def analyze_edges(scheduled, keep: Callable[[KernelRef, KernelRef], bool], method: Method = Method.AUTO,
                  few_bound: int = DEFAULT_FEW_BOUND) -> tuple[EdgeBlockMap, ...]:
    """The block maps of the kernel edges (producer, consumer) that `keep` accepts; edges
    whose kernels the analysis cannot read are left out."""
    prep = _Prepared(scheduled)
    owner_cache: dict = {}
    out = []
    for edge in prep.edges:
        if keep(edge.producer, edge.consumer):
            try:
                out.append(_build(edge, method, few_bound, owner_cache))
            except BlockDepsError:
                continue
    return tuple(out)


def kernel_grids(scheduled) -> tuple[KernelGrid, ...]:
    """The grid of every launch of `main`, in launch order."""
    return _Prepared(scheduled).grids
