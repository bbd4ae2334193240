"""Operator graph: the model's ONNX operators as a networkx DAG with shapes, FLOPs and levels.

Operators whose inputs are all constants (weight reshapes left by the exporter) are folded
away, as the compiler folds them. IDs are the ONNX node names (unique, stable across loads);
unnamed nodes get `<OpType>_<index>`.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import NewType

import networkx as nx
import onnx

from engine.costs import estimate_bytes, estimate_flops
from engine.model import Model

OpId = NewType("OpId", str)


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    dtype: str
    constant: bool = False

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True)
class OpNode:
    id: OpId
    index: int  # position in the ONNX graph (a topological order)
    op: str  # ONNX op type
    label: str  # human name: the node's name, else derived from its weights' names
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    attrs: tuple[tuple[str, object], ...]
    flops: int
    bytes: int
    level: int  # longest path from a graph input, 0-based

    def attr(self, name: str, default=None):
        return dict(self.attrs).get(name, default)


@dataclass(frozen=True)
class Edge:
    src: OpId
    dst: OpId
    tensor: str


@dataclass(frozen=True)
class GraphSummary:
    ops: int
    edges: int
    depth: int
    max_width: int
    folded_constants: int
    histogram: tuple[tuple[str, int], ...]  # (op, count), most common first
    widest_levels: tuple[tuple[int, tuple[OpId, ...]], ...]  # (level, ops), widest first
    total_flops: int


@dataclass(frozen=True, eq=False)
class OperatorGraph:
    model: str
    nodes: tuple[OpNode, ...]
    edges: tuple[Edge, ...]
    folded_constants: int
    dag: nx.DiGraph = field(repr=False)

    def node(self, op_id: str) -> OpNode:
        return self.dag.nodes[op_id]["op"]

    def levels(self) -> dict[int, tuple[OpId, ...]]:
        out: dict[int, list[OpId]] = {}
        for n in self.nodes:
            out.setdefault(n.level, []).append(n.id)
        return {lvl: tuple(ids) for lvl, ids in sorted(out.items())}

    def summary(self, top_levels: int = 3) -> GraphSummary:
        levels = self.levels()
        widest = sorted(levels.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:top_levels]
        return GraphSummary(
            ops=len(self.nodes), edges=len(self.edges),
            depth=(max(levels) + 1) if levels else 0,
            max_width=max((len(v) for v in levels.values()), default=0),
            folded_constants=self.folded_constants,
            histogram=tuple(Counter(n.op for n in self.nodes).most_common()),
            widest_levels=tuple(widest),
            total_flops=sum(n.flops for n in self.nodes))

    def to_json(self) -> dict:
        return {
            "model": self.model,
            "nodes": [{"id": n.id, "op": n.op, "label": n.label, "level": n.level, "flops": n.flops,
                       "bytes": n.bytes,
                       "inputs": [{"name": t.name, "shape": list(t.shape), "dtype": t.dtype,
                                   "constant": t.constant} for t in n.inputs],
                       "outputs": [{"name": t.name, "shape": list(t.shape), "dtype": t.dtype}
                                   for t in n.outputs]} for n in self.nodes],
            "edges": [{"src": e.src, "dst": e.dst, "tensor": e.tensor} for e in self.edges],
        }


def build_operator_graph(model: Model) -> OperatorGraph:
    """Build the DAG. Example: a Conv->Relu model gives nodes [conv, relu], one edge, depth 2."""
    graph = model.proto.graph
    infos = _tensor_infos(model.proto)
    constants = {i.name for i in graph.initializer}
    ids = _node_ids(graph.node)
    producer: dict[str, OpId] = {}
    nodes: list[OpNode] = []
    edges: list[Edge] = []
    level: dict[OpId, int] = {}
    labels: dict[OpId, str] = {}
    folded = 0
    for index, node in enumerate(graph.node):
        if node.op_type == "Constant" or all(n in constants for n in node.input if n):
            constants.update(node.output)
            folded += 1
            continue
        op_id = ids[index]
        ins = tuple(_info(infos, n, n in constants) for n in node.input if n)
        outs = tuple(_info(infos, n, False) for n in node.output if n)
        preds = []
        for t in ins:
            if t.name in producer and producer[t.name] not in preds:
                preds.append(producer[t.name])
                edges.append(Edge(producer[t.name], op_id, t.name))
        level[op_id] = 1 + max((level[p] for p in preds), default=-1)
        attrs = tuple((a.name, _attr_value(a)) for a in node.attribute)
        label, labels[op_id] = _label(node, op_id, ins, preds, labels)
        op = OpNode(op_id, index, node.op_type, label, ins, outs, attrs,
                    flops=estimate_flops(node.op_type, ins, outs, dict(attrs)),
                    bytes=estimate_bytes(ins, outs), level=level[op_id])
        nodes.append(op)
        for t in outs:
            producer[t.name] = op_id
    nodes = _branch_labels(nodes, edges, labels)
    dag = nx.DiGraph()
    for n in nodes:
        dag.add_node(n.id, op=n)
    for e in edges:
        dag.add_edge(e.src, e.dst, tensor=e.tensor)
    return OperatorGraph(model.name, tuple(nodes), tuple(edges), folded, dag)


def _branch_labels(nodes: list[OpNode], edges: list[Edge], bases: dict[OpId, str]) -> list[OpNode]:
    """A weightless op that starts a branch (its producer forks) is named after the layer
    of the branch it starts, not the layer it reads from: Inception's pool branch
    `maxpool -> inception_3a/pool_proj` becomes `inception_3a/maxpool`."""
    consumers: dict[OpId, list[OpId]] = {}
    producers: dict[OpId, list[OpId]] = {}
    for e in edges:
        consumers.setdefault(e.src, []).append(e.dst)
        producers.setdefault(e.dst, []).append(e.src)
    by_id = {n.id: n for n in nodes}
    out = []
    for n in nodes:
        preds = producers.get(n.id, [])
        derived = n.label == f"{bases.get(n.id, '')}/{n.op.lower()}" or n.label == n.id
        weighted_next = [bases[c] for c in consumers.get(n.id, []) if c in bases and
                         by_id[c].label == bases[c] and "/" in bases[c]]
        if derived and len(preds) == 1 and len(consumers.get(preds[0], [])) > 1 and weighted_next:
            group = os.path.commonprefix([b.rsplit("/", 1)[0] + "/" for b in weighted_next]).rstrip("/")
            if group:
                n = replace(n, label=f"{group}/{n.op.lower()}")
        out.append(n)
    return out


_GENERIC_NAME = re.compile(r"^[a-z]?\d+$")
_WEIGHT_SUFFIX = re.compile(r"(_[wb]_0|_w|_b|[._/](weight|bias|W|B))$")


def _label(node, op_id: str, ins, preds, bases) -> tuple[str, str]:
    """(label, base). Exporters that anonymise nodes (`n17`) still name weights after layers
    (`inception_3a/1x1_w_0`): use those, else the producers' layer name plus the op."""
    if node.name and not _GENERIC_NAME.match(node.name):
        return node.name, node.name
    weights = [t.name for t in ins if t.constant and len(t.shape) > 1]
    if weights:
        base = _WEIGHT_SUFFIX.sub("", weights[0])
        return base, base
    parents = [bases[p] for p in preds if p in bases]
    base = os.path.commonprefix(parents).rstrip("/_") if parents else ""
    return (f"{base}/{node.op_type.lower()}" if base else op_id), base


def _node_ids(nodes) -> list[OpId]:
    counts = Counter(n.name for n in nodes if n.name)
    return [OpId(n.name if n.name and counts[n.name] == 1 else f"{n.op_type}_{i}")
            for i, n in enumerate(nodes)]


def _tensor_infos(proto: onnx.ModelProto) -> dict[str, tuple[tuple[int, ...], str]]:
    out = {}
    for vi in list(proto.graph.input) + list(proto.graph.value_info) + list(proto.graph.output):
        tt = vi.type.tensor_type
        if tt.elem_type:
            shape = tuple(d.dim_value for d in tt.shape.dim)
            out[vi.name] = (shape, onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type).name)
    for init in proto.graph.initializer:
        out[init.name] = (tuple(init.dims), onnx.helper.tensor_dtype_to_np_dtype(init.data_type).name)
    return out


def _info(infos, name: str, constant: bool) -> TensorInfo:
    shape, dtype = infos.get(name, ((), "unknown"))
    return TensorInfo(name, shape, dtype, constant)


def _attr_value(attr: onnx.AttributeProto):
    value = onnx.helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, (list, tuple)):
        return tuple(v.decode(errors="replace") if isinstance(v, bytes) else v for v in value)
    if isinstance(value, (int, float, str)):
        return value
    return type(value).__name__  # tensors and graphs: not needed for costing
