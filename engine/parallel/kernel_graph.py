"""The kernel-level dependency graph of a scheduled module's `main` (facts, no choices).

Nodes are the `call_tir` launch sites (KernelCall.index); an edge p -> c means kernel c
reads the tensor kernel p writes. Relax Vars are matched by identity (names repeat), and
Var-to-Var aliases (`lv = lv1`) are looked through.

    >>> g = kernel_graph(session.scheduled("llvm").module, kernels)   # fire_module
    >>> g.consumers(0)
    (1, 2)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx
import tvm
from tvm import relax

from engine.kernels import KernelCall

# A fork point: a kernel index, or the name of a model input.
ValueSource = int | str


def main_bindings(mod: tvm.IRModule) -> list:
    return [b for block in mod["main"].body.blocks for b in block.bindings]


def is_call_tir(value) -> bool:
    return isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op) \
        and value.op.name == "relax.call_tir"


def call_args(call) -> list:
    args = call.args[1]
    return list(args.fields) if isinstance(args, relax.Tuple) else [args]


def key(var) -> int:
    return var.__chandle__()


def alias_roots(bindings) -> dict[int, int]:
    """key of every Var-to-Var alias (`lv = lv1`, chains included) -> key of the Var it names."""
    roots: dict[int, int] = {}
    for b in bindings:
        if isinstance(b.value, relax.Var):
            roots[key(b.var)] = roots.get(key(b.value), key(b.value))
    return roots


@dataclass(frozen=True, eq=False)
class KernelGraph:
    """Kernels and their producer -> consumer edges; `inputs_of[k]` names the values
    (producer kernel indices or model input names) kernel k reads."""

    kernels: tuple[KernelCall, ...]
    inputs_of: tuple[tuple[ValueSource, ...], ...]
    dag: nx.DiGraph = field(repr=False)

    def consumers(self, source: ValueSource) -> tuple[int, ...]:
        return tuple(k for k, ins in enumerate(self.inputs_of) if source in ins)

    def producers(self, k: int) -> tuple[int, ...]:
        return tuple(s for s in self.inputs_of[k] if isinstance(s, int))

    def has_path(self, a: int, b: int) -> bool:
        return a != b and nx.has_path(self.dag, a, b)

    def independent(self, members) -> bool:
        """No dependency path between any two of `members`."""
        members = list(members)
        return all(not self.has_path(a, b) and not self.has_path(b, a)
                   for i, a in enumerate(members) for b in members[i + 1:])


def kernel_graph(mod: tvm.IRModule, kernels: tuple[KernelCall, ...]) -> KernelGraph:
    """Build the graph from `main` (kernels are the call_tir bindings, in order)."""
    producer: dict[int, ValueSource] = {key(p): p.name for p in mod["main"].params}
    inputs_of: list[tuple[ValueSource, ...]] = []
    for b in main_bindings(mod):
        if isinstance(b.value, relax.Var) and key(b.value) in producer:
            producer[key(b.var)] = producer[key(b.value)]
        elif is_call_tir(b.value):
            srcs: list[ValueSource] = []
            for a in call_args(b.value):
                if isinstance(a, relax.Var) and key(a) in producer and producer[key(a)] not in srcs:
                    srcs.append(producer[key(a)])
            producer[key(b.var)] = len(inputs_of)
            inputs_of.append(tuple(srcs))
    dag = nx.DiGraph()
    dag.add_nodes_from(range(len(inputs_of)))
    for k, srcs in enumerate(inputs_of):
        dag.add_edges_from((s, k) for s in srcs if isinstance(s, int))
    return KernelGraph(tuple(kernels), tuple(inputs_of), dag)
