"""A synthetic operator graph of any size (Inception-like modules), for the speed bench and tests.

    >>> g = synthetic_graph(40)
    >>> len(g.nodes), g.nodes[0].op
    (40, 'Conv')
"""

from __future__ import annotations

import networkx as nx

from engine.opgraph import Edge, OperatorGraph, OpId, OpNode, TensorInfo

_BRANCHES = (("Conv", "Relu"), ("Conv", "Relu", "Conv", "Relu"), ("MaxPool", "Conv", "Relu"), ("Conv",))


def synthetic_graph(n_nodes: int, name: str = "synthetic") -> OperatorGraph:
    """Modules of four parallel branches joined by a Concat, until `n_nodes` ops."""
    nodes: list[OpNode] = []
    edges: list[Edge] = []
    level: dict[str, int] = {}

    def add(op: str, preds: list[str], channels: int, label: str) -> str:
        op_id = OpId(f"n{len(nodes)}")
        shape = (1, channels, 28, 28)
        ins = tuple(TensorInfo(f"t{p}", shape, "float32") for p in preds) or \
            (TensorInfo("input", (1, 3, 224, 224), "float32"),)
        out = (TensorInfo(f"t{op_id}", shape, "float32"),)
        level[op_id] = 1 + max((level[p] for p in preds), default=-1)
        flops = 2 * channels * 28 * 28 * 64 if op == "Conv" else channels * 28 * 28
        nodes.append(OpNode(op_id, len(nodes), op, label, ins, out, (), flops, 4 * channels * 784 * 2,
                            level[op_id]))
        edges.extend(Edge(OpId(p), op_id, f"t{p}") for p in preds)
        return op_id

    tail = add("Conv", [], 64, "stem/conv")
    module = 0
    while len(nodes) < n_nodes:
        module += 1
        ends = []
        for b, ops in enumerate(_BRANCHES):
            prev = tail
            for k, op in enumerate(ops):
                if len(nodes) >= n_nodes - 1:
                    break
                prev = add(op, [prev], 32 * (b + 1), f"m{module}/b{b}/{op.lower()}{k}")
            if prev != tail:
                ends.append(prev)
        if len(nodes) >= n_nodes or not ends:
            break
        tail = add("Concat", ends, 256, f"m{module}/concat")
    dag = nx.DiGraph()
    for n in nodes:
        dag.add_node(n.id, op=n)
    for e in edges:
        dag.add_edge(e.src, e.dst, tensor=e.tensor)
    return OperatorGraph(name, tuple(nodes), tuple(edges), 0, dag)
