"""BlockDepend: block-level dependency analysis between the kernels of a scheduled model.

    deps = analyze_model(Session("zoo:squeezenet").scheduled("cuda"))
    for e in deps.edges: print(e.producer.describe(), e.consumer.describe(), e.edge_class)

A block is a CUDA thread block or one iteration of an llvm kernel's outer parallel loop.
Per kernel edge, the map consumer block -> producer blocks comes from the fast method
(boxes) or the exact method (element owner map); `Method.AUTO` uses exact where the boxes
are not provably exact. See facts.py for the result types.
"""

from .analysis import BlockDepsError, analyze_edge, analyze_edges, analyze_model, kernel_grids
from .block_map import DEFAULT_FEW_BOUND, classify
from .dot import block_graph_dot
from .facts import (AccessKind, BlockAxis, BlockRegion, EarlyStart, EdgeBlockMap, EdgeClass, GridDim,
                    KernelGrid, KernelRef, Method, ModelBlockDeps, Parallelism, Simplification)
from .model_graph import block_dependency_graph, chain_groups, kernel_dag
from .regions import block_regions
from .resolve import resolve_edge, resolve_kernel

__all__ = [
    "analyze_model", "analyze_edge", "analyze_edges", "kernel_grids", "block_regions", "block_dependency_graph",
    "block_graph_dot", "resolve_edge", "resolve_kernel", "classify", "chain_groups", "kernel_dag",
    "BlockDepsError", "DEFAULT_FEW_BOUND", "AccessKind", "BlockAxis", "BlockRegion", "EarlyStart",
    "EdgeBlockMap", "EdgeClass", "GridDim", "KernelGrid", "KernelRef", "Method", "ModelBlockDeps",
    "Parallelism", "Simplification",
]
