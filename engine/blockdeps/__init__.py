"""BlockDepend: block-level dependency analysis between the kernels of a scheduled model.

    deps = analyze_model(Session("zoo:squeezenet").scheduled("cuda"))
    for e in deps.edges: print(e.producer.describe(), e.consumer.describe(), e.edge_class)

A block is a CUDA thread block or one iteration of an llvm kernel's outer parallel loop.
Per kernel edge, the map consumer block -> producer blocks comes from the fast method
(boxes) or the exact method (element owner map); `Method.AUTO` uses exact where the boxes
are not provably exact. See facts.py for the result types: they load without TVM; the
analyses load it on first access.
"""

import importlib

from engine.errors import BlockDepsError
from engine.blockdeps.facts import (DEFAULT_FEW_BOUND, AccessKind, BlockAxis, BlockRegion, EarlyStart,
                                    EdgeBlockMap, EdgeClass, GridDim, KernelGrid, KernelRef, Method,
                                    ModelBlockDeps, Parallelism, Simplification)

_LAZY = {
    "analyze_model": "analysis", "analyze_edge": "analysis", "analyze_edges": "analysis",
    "kernel_grids": "analysis", "classify": "block_map", "block_graph_dot": "dot",
    "block_dependency_graph": "model_graph", "chain_groups": "model_graph", "kernel_dag": "model_graph",
    "block_regions": "regions", "resolve_edge": "resolve", "resolve_kernel": "resolve",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f"engine.blockdeps.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'engine.blockdeps' has no attribute '{name}'")


__all__ = [*_LAZY, "BlockDepsError", "DEFAULT_FEW_BOUND", "AccessKind", "BlockAxis", "BlockRegion",
           "EarlyStart", "EdgeBlockMap", "EdgeClass", "GridDim", "KernelGrid", "KernelRef", "Method",
           "ModelBlockDeps", "Parallelism", "Simplification"]
