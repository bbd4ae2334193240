"""The operator graph (engine.opgraph) as the TUI's labels and properties: unique labels,
a node's properties (attributes, tensors, work), the graph's inputs and outputs.

    op_labels(graph)["Squeeze_12"]      ->  "attn/squeeze (Squeeze_12)"   (two ops named attn/squeeze)
    op_properties(graph, "n0")[0]       ->  ("op", "Conv  n0  conv1/7x7_s2")
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from engine.graphviz import PORT_FILL, format_shape

Figures = tuple[tuple[str, str], ...]  # (label, value) rows of a properties panel


def op_labels(graph) -> dict[str, str]:
    """Op id -> its label, with the op id added where two ops share a label (torch exports
    name both squeezes of a block `attn/squeeze`): every op is named once."""
    counts = Counter(n.label for n in graph.nodes)
    return {n.id: n.label if counts[n.label] == 1 or n.label == n.id else f"{n.label} ({n.id})"
            for n in graph.nodes}


@dataclass(frozen=True)
class GraphPort:
    """A graph input or output tensor, drawn as a node of its own."""

    id: str  # "in:NAME" / "out:NAME": never an op id (op ids come from ONNX node names)
    tensor: str
    shape: tuple
    dtype: str
    ops: tuple[str, ...]  # the ops reading the input / the op writing the output
    is_input: bool


def graph_ports(graph) -> tuple[GraphPort, ...]:
    """The graph's inputs (non-constant tensors no op produces) and outputs (the outputs of
    ops none of whose outputs is read), in graph order: inputs first.

        >>> [p.id for p in graph_ports(conv_relu_graph)]        # doctest: +SKIP
        ['in:input', 'out:output']
    """
    produced = {t.name for n in graph.nodes for t in n.outputs}
    read = {t.name for n in graph.nodes for t in n.inputs}
    inputs: dict[str, tuple] = {}
    outputs: list[GraphPort] = []
    for n in graph.nodes:
        for t in n.inputs:
            if not t.constant and t.name not in produced:
                shape, dtype, ops = inputs.get(t.name, (t.shape, t.dtype, ()))
                inputs[t.name] = (shape, dtype, ops + (n.id,))
        if not any(t.name in read for t in n.outputs):  # an unread second output (Dropout's mask) is no graph output
            outputs += [GraphPort(f"out:{t.name}", t.name, t.shape, t.dtype, (n.id,), False) for t in n.outputs]
    return tuple(GraphPort(f"in:{name}", name, shape, dtype, ops, True)
                 for name, (shape, dtype, ops) in inputs.items()) + tuple(outputs)


def opgraph_title(graph) -> str:
    """The first line of an exported operator graph."""
    s = graph.summary()
    return f"{graph.model}: operator graph ({s.ops} operators, {s.total_flops / 1e9:.2f} GFLOP)"


def opgraph_legend() -> list[tuple[str, str, str]]:
    """Legend rows (kind, colour, meaning) every exported operator graph has."""
    return [("fill", "#f4f4f4", "op: type, output shape, +Nw: N weights; its name below"),
            ("fill", PORT_FILL, "graph input / output tensor")]


def weight_count(node) -> int:
    """Constant inputs of an op (weights, biases, folded shapes)."""
    return sum(1 for t in node.inputs if t.constant)


def op_properties(graph, op_id: str, kernel: str = "", ms: float | None = None) -> Figures:
    """The properties panel of one op: type, label, attributes, each input and output tensor
    (name, shape, dtype; weights marked), FLOPs and bytes, the kernel computing it."""
    n = graph.node(op_id)
    rows = [("op", f"{n.op}  {n.id}"), ("label", op_labels(graph)[n.id])]
    rows += [(f"  {name}", _attr(value)) for name, value in n.attrs]
    for k, t in enumerate(n.inputs):
        rows.append((f"in {k}" + (" (weight)" if t.constant else ""),
                     f"{format_shape(t.shape)} {t.dtype}  {t.name}"))
    for k, t in enumerate(n.outputs):
        rows.append((f"out {k}", f"{format_shape(t.shape)} {t.dtype}  {t.name}"))
    rows.append(("work", f"{n.flops / 1e6:.2f} MFLOP, {n.bytes / 1024:.0f} KiB moved (estimated)"))
    preds = list(graph.dag.predecessors(op_id))
    succs = list(graph.dag.successors(op_id))
    rows.append(("from / to", f"{', '.join(preds) or 'graph input'}  ->  {', '.join(succs) or 'graph output'}"))
    rows.append(("level", str(n.level)))
    if kernel:
        rows.append(("kernel", kernel + (f"  {ms:.3f} ms" if ms is not None else "")))
    return tuple(rows)


def port_properties(port: GraphPort) -> Figures:
    return (("graph " + ("input" if port.is_input else "output"), port.tensor),
            ("tensor", f"{format_shape(port.shape)} {port.dtype}"),
            ("read by" if port.is_input else "written by", ", ".join(port.ops)))


def _attr(value) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)
