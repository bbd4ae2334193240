"""The kernel-level dependency graph of a scheduled module's `main` (facts, no choices).

Nodes are the `call_tir` launch sites (KernelCall.index); an edge p -> c means kernel c
reads a value computed from what kernel p writes. Relax Vars are matched by identity
(names repeat). Every binding of `main` is followed, not only the launch sites: a binding
that is not a `call_tir` (an alias `lv = lv1`, a view `R.reshape(lv, ...)` left by
RewriteDataflowReshape, `R.memory.view`, `R.call_pure_packed`, a `relax.Tuple`) depends on
every producer of every Var it mentions, and `t[i]` of a kernel's tuple output (a Split)
on that kernel (of a constructed tuple: on the producers of field i only).

    >>> g = kernel_graph(session.scheduled("llvm").module, kernels)   # fire_module
    >>> g.consumers(0)
    (1, 2)
    >>> g = kernel_graph(...)   # vit_block: split -> q*scale, k^T; v is a view of t[2]
    >>> g.consumers(2)          # the Split kernel
    (3, 4, 7)
"""

from __future__ import annotations

from collections import Counter
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


def use_counts(mod: tvm.IRModule) -> Counter[int]:
    """key of every value of `main` (aliases looked through: counted on the Var they name) ->
    how many bindings, and the model's output, read it; a binding reading it twice counts once."""
    bindings = main_bindings(mod)
    roots = alias_roots(bindings)
    uses: Counter[int] = Counter()
    for value in [b.value for b in bindings if not isinstance(b.value, relax.Var)] + [mod["main"].body.body]:
        uses.update({roots.get(key(v), key(v)) for v in relax.analysis.free_vars(value)})
    return uses


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
    inputs_of = [tuple(srcs) for srcs in _kernel_reads(main_bindings(mod), mod["main"].params)]
    dag = nx.DiGraph()
    dag.add_nodes_from(range(len(inputs_of)))
    for k, srcs in enumerate(inputs_of):
        dag.add_edges_from((s, k) for s in srcs if isinstance(s, int))
    return KernelGraph(tuple(kernels), tuple(inputs_of), dag)


Sources = dict[ValueSource, None]  # an ordered set: the producers a value is computed from


def _kernel_reads(bindings, params) -> list[Sources]:
    """For each call_tir binding, in order, the producers of everything its arguments mention.

    `sources` maps every Var bound so far to its producers; `fields` keeps, for a Var bound
    to a constructed tuple (or an alias of one), the producers of each field, so that `t[i]`
    depends on field i only."""
    sources: dict[int, Sources] = {key(p): {p.name: None} for p in params}
    fields: dict[int, tuple[Sources, ...]] = {}

    def reads(expr) -> Sources:
        out: Sources = {}
        for v in relax.analysis.free_vars(expr):
            out.update(sources.get(key(v), {}))
        return out

    kernel_reads: list[Sources] = []
    for b in bindings:
        value, var = b.value, key(b.var)
        if is_call_tir(value):
            kernel_reads.append(reads(value.args[1]))
            sources[var] = {len(kernel_reads) - 1: None}
        elif isinstance(value, relax.Tuple):
            fields[var] = tuple(reads(f) for f in value.fields)
            sources[var] = reads(value)
        elif isinstance(value, relax.TupleGetItem) and \
                (built := _tuple_fields(value.tuple_value, fields, reads)) is not None:
            sources[var] = built[value.index]
        else:  # aliases, views, packed and other calls, and t[i] of a kernel's tuple
            # output (it mentions t, which that kernel made): everything they mention
            if isinstance(value, relax.Var) and key(value) in fields:
                fields[var] = fields[key(value)]
            sources[var] = reads(value)
    return kernel_reads


def _tuple_fields(expr, fields, reads) -> tuple[Sources, ...] | None:
    """Per-field producers of a constructed tuple (a Var bound to one, or one inline)."""
    if isinstance(expr, relax.Var):
        return fields.get(key(expr))
    if isinstance(expr, relax.Tuple):
        return tuple(reads(f) for f in expr.fields)
    return None
