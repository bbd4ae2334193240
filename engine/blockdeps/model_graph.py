"""Model-wide views of the block maps: the block dependency graph (networkx), what the block
view simplifies, and the parallelism it exposes.

Block graph: one node per block, ("block", kernel, block). An all-to-all kernel edge becomes
one barrier node ("barrier", producer, consumer) with P + C edges instead of P*C; every other
edge is kept block to block. Edges of one-to-one/one-to-few maps are `local`: the weakly
connected groups they form (`chains`) can run block-locally, without a kernel barrier.

>>> # g = block_dependency_graph(deps); g.number_of_nodes()
"""

from __future__ import annotations

from typing import Sequence

import networkx as nx
import numpy as np

from .facts import EarlyStart, EdgeBlockMap, EdgeClass, KernelGrid, Method, ModelBlockDeps, Parallelism, Simplification


def kernel_dag(n_kernels: int, maps: Sequence[EdgeBlockMap]) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(range(n_kernels))
    g.add_edges_from((m.producer.index, m.consumer.index) for m in maps)
    return g


def chain_groups(n_kernels: int, maps: Sequence[EdgeBlockMap]) -> list[set[int]]:
    """Groups of >= 2 kernels linked by one-to-one/one-to-few edges.

    >>> chain_groups(3, [])
    []
    """
    g = nx.Graph()
    g.add_nodes_from(range(n_kernels))
    g.add_edges_from((m.producer.index, m.consumer.index) for m in maps if m.edge_class.is_local)
    return [c for c in nx.connected_components(g) if len(c) > 1]


def simplification(grids: Sequence[KernelGrid], maps: Sequence[EdgeBlockMap]) -> Simplification:
    """Counts defined in facts.Simplification."""
    implied = sum(m.producer_grid.blocks * m.consumer_grid.blocks for m in maps)
    needed = sum(m.block_pairs for m in maps)
    groups = chain_groups(len(grids), maps)
    nodes = sum(g.blocks for g in grids)
    edges = 0
    for m in maps:
        if m.edge_class is EdgeClass.ALL_TO_ALL:
            nodes += 1
            edges += m.producer_grid.blocks + int((m.fan_in > 0).sum())
        else:
            edges += m.block_pairs
    return Simplification(
        kernel_edges=len(maps), implied_block_pairs=implied, needed_block_pairs=needed,
        removed_block_pairs=implied - needed,
        barriers_relaxed=sum(m.edge_class is not EdgeClass.ALL_TO_ALL for m in maps),
        chain_edges=sum(m.edge_class.is_local for m in maps), chains=len(groups),
        kernels_in_chains=sum(len(g) for g in groups),
        element_deps=sum(m.element_deps for m in maps),
        element_deps_exact=all(m.method is Method.EXACT or m.boxes_exact for m in maps),
        graph_nodes=nodes, graph_edges=edges)


def parallelism(n_kernels: int, maps: Sequence[EdgeBlockMap]) -> Parallelism:
    """Kernel pairs with no path either way, and early-start blocks per non-all-to-all edge.

    >>> parallelism(2, []).independent_pairs
    ((0, 1),)
    """
    g = kernel_dag(n_kernels, maps)
    desc = {k: nx.descendants(g, k) for k in g.nodes}
    pairs = tuple((a, b) for a in range(n_kernels) for b in range(a + 1, n_kernels)
                  if b not in desc[a] and a not in desc[b])
    early = tuple(EarlyStart(m.producer.index, m.consumer.index, m.early_blocks, m.consumer_grid.blocks)
                  for m in maps if m.edge_class is not EdgeClass.ALL_TO_ALL)
    return Parallelism(pairs, early)


def block_dependency_graph(deps: ModelBlockDeps) -> nx.DiGraph:
    """The block dependency graph (see the module docstring). Node attrs: kernel, block
    (blocks) or edge (barriers); edge attrs: local (bool), edge_class."""
    g = nx.DiGraph()
    for ref, grid in zip(deps.kernels, deps.grids):
        g.add_nodes_from((("block", ref.index, b) for b in range(grid.blocks)), kernel=ref.index)
    for m in deps.edges:
        p, c = m.producer.index, m.consumer.index
        if m.edge_class is EdgeClass.ALL_TO_ALL:
            bar = ("barrier", p, c)
            g.add_node(bar, edge=(p, c))
            g.add_edges_from(((("block", p, b), bar) for b in range(m.producer_grid.blocks)),
                             local=False, edge_class=m.edge_class)
            waiting = np.nonzero(m.fan_in > 0)[0]
            g.add_edges_from(((bar, ("block", c, int(b))) for b in waiting),
                             local=False, edge_class=m.edge_class)
        else:
            rows = np.repeat(np.arange(m.consumer_grid.blocks), m.fan_in)
            g.add_edges_from(((("block", p, int(pb)), ("block", c, int(cb)))
                              for cb, pb in zip(rows, m.indices)),
                             local=m.edge_class.is_local, edge_class=m.edge_class)
    return g
