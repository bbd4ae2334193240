"""Facts of the block-level dependency analysis: enums and frozen dataclasses, no logic
beyond small derived properties.

A *block* is one thread block (cuda: one value of the blockIdx loops) or one iteration of
the outermost parallel loop(s) (llvm). Blocks are numbered by their *launch order*: the
linear block index, C order over the grid shape (cuda: x fastest, then y, then z).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

DEFAULT_FEW_BOUND = 9  # largest fan-in called one-to-few: a 3x3 neighbourhood of tiles, or a halo of up to 4 row tiles each side


class Method(enum.Enum):
    """How a block map was computed. Maps carry FAST or EXACT; AUTO is only a request:
    FAST where the boxes are provably exact, EXACT elsewhere."""

    FAST = "fast"  # per-block boxes (block index fixed, other loops relaxed), box overlap
    EXACT = "exact"  # per-element owner map of the producer, footprints of the consumer
    AUTO = "auto"


class EdgeClass(enum.Enum):
    """Shape of the consumer-block -> producer-blocks map of one kernel edge (by fan-in)."""

    INDEPENDENT = "independent"  # no consumer block reads anything a producer block wrote
    ONE_TO_ONE = "one-to-one"  # every consumer block needs at most one producer block
    ONE_TO_FEW = "one-to-few"  # at most `few_bound` producer blocks (halo rows)
    PARTIAL = "partial"  # more than few, but not every dependent block needs them all
    ALL_TO_ALL = "all-to-all"  # every dependent consumer block needs every producer block

    @property
    def is_local(self) -> bool:
        """True when the consumer can run block-locally after a few producer blocks."""
        return self in (EdgeClass.ONE_TO_ONE, EdgeClass.ONE_TO_FEW)


class AccessKind(enum.Enum):
    READ = "read"
    WRITE = "write"


class BlockAxis(enum.Enum):
    BLOCK_IDX = "blockIdx"  # cuda thread blocks
    PARALLEL_LOOP = "parallel loop"  # llvm: iterations of the outer parallel loop(s)
    SINGLE = "single block"  # no parallel loop: the whole kernel is one block


@dataclass(frozen=True)
class GridDim:
    name: str  # blockIdx.x, or the parallel loop's variable name
    extent: int


@dataclass(frozen=True)
class KernelGrid:
    """The grid of one PrimFunc. `dims` slowest first; `shape` is what CUDA calls
    (gridDim.z, gridDim.y, gridDim.x).

    >>> KernelGrid("add", BlockAxis.BLOCK_IDX, (GridDim("blockIdx.y", 2), GridDim("blockIdx.x", 3))).blocks
    6
    """

    func: str
    axis: BlockAxis
    dims: tuple[GridDim, ...]
    phases: int = 1  # top-level loop nests; blocks of the grid nest wait for all earlier ones

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(d.extent for d in self.dims) or (1,)

    @property
    def blocks(self) -> int:
        n = 1
        for d in self.dims:
            n *= d.extent
        return n

    def describe(self) -> str:
        if not self.dims:
            return "1 block"
        return f"{self.blocks} ({'x'.join(str(d.extent) for d in self.dims)} {self.axis.value})"


@dataclass(frozen=True)
class BlockRegion:
    """The box of one buffer one block reads or writes: [start, stop) per dimension.
    From the fast method, an over-approximation unless the kernel's boxes are exact."""

    func: str
    block: int
    buffer: str
    kind: AccessKind
    start: tuple[int, ...]
    stop: tuple[int, ...]

    @property
    def empty(self) -> bool:
        return any(b <= a for a, b in zip(self.start, self.stop))

    @property
    def volume(self) -> int:
        n = 1
        for a, b in zip(self.start, self.stop):
            n *= max(b - a, 0)
        return n


@dataclass(frozen=True)
class KernelRef:
    """A kernel launch of `main`: position among call_tir bindings, names, operators."""

    index: int
    var: str
    func: str
    ops: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()  # op labels when an OperatorGraph was given

    def describe(self) -> str:
        what = self.labels[0] if self.labels else self.func
        return f"k{self.index} {what}"  # the id the TUI and the plan use


@dataclass(frozen=True, eq=False)
class EdgeBlockMap:
    """consumer block -> producer blocks it depends on, for one producer->consumer kernel edge.

    CSR layout: producer blocks of consumer block c are indices[indptr[c]:indptr[c+1]], sorted.
    `element_deps`: element-level dependencies behind the map: for each consumer block, the
    producer-output elements it reads (EXACT: counted; FAST: box volumes, an upper bound).
    """

    producer: KernelRef
    consumer: KernelRef
    producer_grid: KernelGrid
    consumer_grid: KernelGrid
    method: Method
    edge_class: EdgeClass
    indptr: np.ndarray = field(repr=False)
    indices: np.ndarray = field(repr=False)
    element_deps: int
    few_bound: int
    boxes_exact: bool  # the fast boxes are provably exact (AUTO then keeps FAST)
    via_view: bool = False  # the consumer reads a reshape view of the producer's output
    notes: tuple[str, ...] = ()

    @property
    def fan_in(self) -> np.ndarray:
        return np.diff(self.indptr)

    @property
    def fan_in_mean(self) -> float:
        return float(self.fan_in.mean()) if len(self.indptr) > 1 else 0.0

    @property
    def fan_in_max(self) -> int:
        return int(self.fan_in.max()) if len(self.indptr) > 1 else 0

    @property
    def fan_out_max(self) -> int:
        if not len(self.indices):
            return 0
        return int(np.bincount(self.indices, minlength=self.producer_grid.blocks).max())

    @property
    def block_pairs(self) -> int:
        """Dependent (consumer block, producer block) pairs."""
        return int(len(self.indices))

    def producers_of(self, block: int) -> tuple[int, ...]:
        return tuple(int(p) for p in self.indices[self.indptr[block]:self.indptr[block + 1]])

    def earliest_start(self) -> np.ndarray:
        """Per consumer block, the last producer block (launch order) it waits for; -1: none."""
        last = np.full(self.consumer_grid.blocks, -1, dtype=np.int64)
        nonempty = self.fan_in > 0
        last[nonempty] = self.indices[self.indptr[1:][nonempty] - 1]
        return last

    @property
    def early_blocks(self) -> int:
        """Consumer blocks that need only part of the producer's blocks: with a readiness flag
        per producer block they could start before the producer ends. Blocks of a GPU
        kernel (or chunks of a thread pool) finish in no guaranteed order, so this counts
        the blocks that do not need *every* producer block, not the ones whose last
        producer block comes before the last in launch order."""
        return int((self.fan_in < self.producer_grid.blocks).sum())

    @property
    def early_fraction(self) -> float:
        return self.early_blocks / max(self.consumer_grid.blocks, 1)

    def as_sets(self) -> list[frozenset[int]]:
        return [frozenset(self.producers_of(c)) for c in range(self.consumer_grid.blocks)]

    def is_within(self, other: "EdgeBlockMap") -> bool:
        """Every dependency of this map is also one of `other` (this one is no looser)."""
        if other.consumer_grid.blocks != self.consumer_grid.blocks:
            return False
        n_p = max(self.producer_grid.blocks, 1)
        mine = np.repeat(np.arange(self.consumer_grid.blocks), self.fan_in) * n_p + self.indices
        theirs = np.repeat(np.arange(other.consumer_grid.blocks), other.fan_in) * n_p + other.indices
        return bool(np.isin(mine, theirs).all())

    def same_map(self, other: "EdgeBlockMap") -> bool:
        return np.array_equal(self.indptr, other.indptr) and np.array_equal(self.indices, other.indices)


@dataclass(frozen=True)
class Simplification:
    """What the block view removes or simplifies, summed over kernel edges.

    - kernel_edges: operator-level dependencies after fusion (producer->consumer kernel
      pairs); launch by launch, each is a full barrier.
    - implied_block_pairs: sum of P*C over kernel edges: the block pairs those barriers order.
    - needed_block_pairs: sum of fan-in: pairs with a real data dependency.
    - removed_block_pairs = implied - needed: orderings the block view drops.
    - barriers_relaxed: kernel edges that are not all-to-all (the consumer need not wait
      for the whole producer).
    - chain_edges: one-to-one/one-to-few kernel edges; they collapse into `chains` (maximal
      groups of kernels linked by such edges, >= 2 kernels) that can run block-locally.
    - element_deps: element-level dependencies (sum over edges and consumer blocks of
      producer elements read), summarised by `needed_block_pairs` block edges.
    - graph_edges: edges of the block dependency graph, where an all-to-all kernel edge
      becomes one barrier node (P + C edges instead of P*C).
    """

    kernel_edges: int
    implied_block_pairs: int
    needed_block_pairs: int
    removed_block_pairs: int
    barriers_relaxed: int
    chain_edges: int
    chains: int
    kernels_in_chains: int
    element_deps: int
    element_deps_exact: bool
    graph_nodes: int
    graph_edges: int


@dataclass(frozen=True)
class EarlyStart:
    """Consumer blocks of one (not all-to-all) edge that could start before the producer ends."""

    producer: int
    consumer: int
    early_blocks: int
    consumer_blocks: int

    @property
    def fraction(self) -> float:
        return self.early_blocks / max(self.consumer_blocks, 1)


@dataclass(frozen=True)
class Parallelism:
    """Independent kernel pairs (no path either way: their blocks could share one launch)
    and, per edge that is not all-to-all, the consumer blocks that could start early."""

    independent_pairs: tuple[tuple[int, int], ...]
    early: tuple[EarlyStart, ...]

    @property
    def early_blocks(self) -> int:
        return sum(e.early_blocks for e in self.early)


@dataclass(frozen=True, eq=False)
class ModelBlockDeps:
    model: str
    target: str
    method: Method  # what was requested
    few_bound: int
    kernels: tuple[KernelRef, ...]
    grids: tuple[KernelGrid, ...]  # by kernel index
    edges: tuple[EdgeBlockMap, ...]
    simplification: Simplification
    parallelism: Parallelism
    notes: tuple[str, ...] = ()

    def class_counts(self) -> dict[EdgeClass, int]:
        counts = {c: 0 for c in EdgeClass}
        for e in self.edges:
            counts[e.edge_class] += 1
        return counts

    def method_counts(self) -> dict[Method, int]:
        counts = {Method.FAST: 0, Method.EXACT: 0}
        for e in self.edges:
            counts[e.method] += 1
        return counts

    def edge(self, producer: int, consumer: int) -> EdgeBlockMap:
        for e in self.edges:
            if e.producer.index == producer and e.consumer.index == consumer:
                return e
        raise KeyError((producer, consumer))
