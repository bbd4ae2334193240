"""Parallel structure detection: fork/join regions whose branches can run in one launch.

For every value read by two or more kernels (a fork: a kernel output or a model input),
each consumer starts a branch that follows single-producer, single-consumer edges until a
join (a kernel reading several kernels) or another fork. Branches are kept while they are
mutually independent: no dependency path between any of their kernels, proved twice, in
the kernel graph and in the ONNX operator graph (between the kernels' operators), so a
dependency the kernel graph missed still keeps two kernels apart. Stage s of a group is
the s-th kernel of every branch that long: the members of one horizontal kernel. Stage 0
members read the same fork value; later stages read different inputs.

    >>> [g.describe() for g in detect_parallel_groups(graph, kg, work)]   # fire_module
    ['fork squeeze1x1/relu: 2 branches [expand1x1/conv..] [expand3x3/conv..]']
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable

import networkx as nx

from engine.opgraph import OperatorGraph
from engine.parallel.kernel_graph import KernelGraph, ValueSource


@dataclass(frozen=True)
class MemberInfo:
    """One kernel of a group, with the facts the proposal shows."""

    kernel: int
    func: str
    ops: tuple[str, ...]
    labels: tuple[str, ...]
    op_types: tuple[str, ...]
    signature: str  # op types with conv/pool window sizes, e.g. "Conv3x3+Relu"
    out_shape: tuple[int, ...]
    flops: int
    chunks: int  # outer parallel iterations (llvm) or thread blocks (cuda); 0 = unknown


@dataclass(frozen=True)
class Legality:
    """Why the members of one stage may run in one launch."""

    no_kernel_path: bool  # no path between any two members in the kernel graph
    no_op_path: bool  # nor between their operators in the ONNX operator graph
    no_member_reads_another: bool
    launch_after: int  # last kernel (index) whose output any member reads; -1: model inputs only
    first_consumer: int  # first kernel reading any member's output; -1: none
    # launch_after >= first_consumer: no slot in the current order has every input ready
    # before the first consumer; the fused call then moves the independent kernels around
    # it (always possible when no path joins two members: contracting them keeps a DAG).
    reorder_needed: bool

    @property
    def no_path(self) -> bool:
        """No dependency path between any two members, in either graph."""
        return self.no_kernel_path and self.no_op_path

    @property
    def legal(self) -> bool:
        return self.no_path and self.no_member_reads_another


@dataclass(frozen=True)
class Stage:
    """The s-th kernels of the group's branches: one horizontal kernel candidate."""

    index: int
    members: tuple[MemberInfo, ...]
    legality: Legality

    @property
    def heterogeneous(self) -> bool:
        return len({m.signature for m in self.members}) > 1

    @property
    def same_input(self) -> bool:
        return self.index == 0


@dataclass(frozen=True)
class ParallelGroup:
    """A fork and its independent branches (chains of kernels), with per-stage evidence."""

    fork: ValueSource  # producer kernel index or model input name
    fork_label: str
    branches: tuple[tuple[int, ...], ...]  # kernel indices per branch, in order
    stages: tuple[Stage, ...]

    def describe(self) -> str:
        parts = " ".join(f"[{s}..]" for s in (self.branch_label(b) for b in self.branches))
        return f"fork {self.fork_label}: {len(self.branches)} branches {parts}"

    def branch_label(self, branch: tuple[int, ...]) -> str:
        for st in self.stages:
            for m in st.members:
                if m.kernel == branch[0]:
                    return m.labels[0] if m.labels else m.func
        return str(branch[0])


WorkFn = Callable[[int], int]  # kernel index -> chunks


def member_info(graph: OperatorGraph, kg: KernelGraph, k: int, chunks: WorkFn) -> MemberInfo:
    kc = kg.kernels[k]
    nodes = [graph.node(o) for o in kc.ops]
    return MemberInfo(k, kc.func, tuple(kc.ops), tuple(n.label for n in nodes),
                      tuple(n.op for n in nodes), _signature(nodes), kc.out_shape,
                      sum(n.flops for n in nodes), chunks(k))


def _signature(nodes) -> str:
    parts = []
    for n in nodes:
        window = n.attr("kernel_shape")
        parts.append(n.op + ("x".join(str(d) for d in window) if window else ""))
    return "+".join(dict.fromkeys(parts)) or "?"


class Paths:
    """Dependency paths between kernels, in the kernel graph and between their operators in
    the operator graph. An operator several kernels list (a Sum whose broadcasts FuseOps
    fused into each producer) is split between them: a path into it is not a path into any
    one of them, so only the operators a kernel alone computes are path ends. Operator
    reachability is computed once per operator, on first use.

        >>> Paths(graph, kg).joined(0, 1)   # fire_module: squeeze -> expand1x1
        True
    """

    def __init__(self, graph: OperatorGraph, kg: KernelGraph):
        self.graph, self.kg = graph, kg
        listed = Counter(o for k in kg.kernels for o in set(k.ops))
        self._own = [{o for o in k.ops if listed[o] == 1} for k in kg.kernels]
        self._below: dict[str, set] = {}  # op id -> its descendants

    def op_path(self, a: int, b: int) -> bool:
        """Some operator of kernel a reaches an operator kernel b alone computes (a != b)."""
        return a != b and any(self._own[b] & self._descendants(o) for o in self.kg.kernels[a].ops)

    def joined(self, a: int, b: int) -> bool:
        """A path a -> b or b -> a in either graph."""
        return (self.kg.has_path(a, b) or self.kg.has_path(b, a)
                or self.op_path(a, b) or self.op_path(b, a))

    def _descendants(self, op: str) -> set:
        if op not in self._below:
            self._below[op] = nx.descendants(self.graph.dag, op) if op in self.graph.dag else set()
        return self._below[op]


def legality(paths: Paths, members: tuple[int, ...]) -> Legality:
    kg = paths.kg
    pairs = [(a, b) for i, a in enumerate(members) for b in members[i + 1:]]
    reads_member = any(p in members for k in members for p in kg.producers(k))
    after = max((p for k in members for p in kg.producers(k)), default=-1)
    consumers = [c for k in members for c in kg.consumers(k)]
    first = min(consumers, default=-1)
    return Legality(kg.independent(members),
                    not any(paths.op_path(a, b) or paths.op_path(b, a) for a, b in pairs),
                    not reads_member, after, first, first != -1 and after >= first)


def _branch(kg: KernelGraph, start: int, taken: set[int]) -> tuple[int, ...]:
    chain = [start]
    while True:
        nxt = kg.consumers(chain[-1])
        if len(nxt) != 1 or nxt[0] in taken or nxt[0] in chain or len(kg.producers(nxt[0])) != 1:
            return tuple(chain)
        chain.append(nxt[0])


def _fork_label(graph: OperatorGraph, kg: KernelGraph, fork: ValueSource) -> str:
    if isinstance(fork, str):  # a graph input: "graph input 'x'", not "input x" (reads as "input input")
        return f"graph input '{fork}'"
    ops = kg.kernels[fork].ops
    return graph.node(ops[-1]).label if ops else kg.kernels[fork].func


def detect_parallel_groups(graph: OperatorGraph, kg: KernelGraph,
                           chunks: WorkFn = lambda k: 0) -> tuple[ParallelGroup, ...]:
    """Every fork with at least two independent branches, in program order. A kernel is
    in at most one group (the first fork that reaches it)."""
    sources: list[ValueSource] = [s for s in dict.fromkeys(s for ins in kg.inputs_of for s in ins)]
    paths = Paths(graph, kg)
    taken: set[int] = set()
    groups = []
    for fork in sources:
        starts = [c for c in kg.consumers(fork) if c not in taken]
        branches: list[tuple[int, ...]] = []
        for c in starts:
            br = _branch(kg, c, taken)
            if not any(paths.joined(a, b) for other in branches for a in other for b in br):
                branches.append(br)
        if len(branches) < 2:
            continue
        stages = []
        for s in range(max(len(b) for b in branches)):
            members = tuple(b[s] for b in branches if len(b) > s)
            if len(members) >= 2:
                stages.append(Stage(s, tuple(member_info(graph, kg, k, chunks) for k in members),
                                    legality(paths, members)))
        if not stages:
            continue
        taken.update(k for b in branches for k in b)
        groups.append(ParallelGroup(fork, _fork_label(graph, kg, fork), tuple(branches), tuple(stages)))
    return tuple(groups)
