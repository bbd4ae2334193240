"""Graph layout in character cells: Graphviz `dot -Tjson` positions mapped onto a terminal grid.

Every node gets a fixed box size in cells for the level of detail, which is passed to dot
as inches (one column = 0.1 in, one row = 0.2 in, a terminal cell is about twice as tall
as wide). Clusters (fused kernels, fusion decisions) are laid out by dot with the graph, as
subgraphs whose titles dot makes room for; node and cluster boxes are read back from
`-Tjson`, and edges are routed on the cells around them (workbench.tui.routing).

    >>> layout = layout_graph(graph, Detail.OP)      # doctest: +SKIP
    >>> layout.boxes["n0"]                            # doctest: +SKIP
    Box(x=3, y=1, w=6, h=3)
"""

from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from engine.graphviz import format_shape, quote, run_dot
from workbench.present.opgraph import GraphPort, graph_ports, op_labels, weight_count
from workbench.tui.routing import route_edges

COL_IN = 0.1  # inches per terminal column
ROW_IN = 0.2  # inches per terminal row


class Detail(enum.IntEnum):
    """Levels of detail, from zoomed in to zoomed out."""

    FULL = 0  # op, output shape and label
    OP = 1  # op type only
    COMPACT = 2  # one line per node: its op type


@dataclass(frozen=True)
class Box:
    x: int
    y: int
    w: int
    h: int

    def contains(self, x: int, y: int) -> bool:
        return self.x <= x < self.x + self.w and self.y <= y < self.y + self.h

    @property
    def center(self) -> tuple[int, int]:
        return self.x + self.w // 2, self.y + self.h // 2


@dataclass(frozen=True)
class ClusterSpec:
    """A group of ops drawn inside one dashed box."""

    label: str
    members: tuple[str, ...]
    kind: str = "kernel"  # "kernel" (fused kernel) or "group" (parallel group)


@dataclass(frozen=True)
class NodeText:
    id: str
    lines: tuple[str, ...]  # text drawn inside the box, per level of detail


@dataclass
class Layout:
    detail: Detail
    width: int
    height: int
    boxes: dict[str, Box]
    texts: dict[str, tuple[str, ...]]
    edges: list[tuple[str, str, list[tuple[int, int]]]]  # (src, dst, routed cells: under src .. the arrow above dst)
    clusters: list[tuple[ClusterSpec, Box]] = field(default_factory=list)

    def node_at(self, x: int, y: int) -> str | None:
        for node_id, box in self.boxes.items():
            if box.contains(x, y):
                return node_id
        return None


def node_lines(node, detail: Detail, label: str | None = None) -> tuple[str, ...]:
    """The text inside a node's box at a level of detail: `Conv 1x64x56x56 +2w` (output shape,
    weight inputs), then the label (`label`: a unique one, see present.opgraph.op_labels)."""
    if detail is not Detail.FULL:
        return (node.op,)
    shape = format_shape(node.outputs[0].shape) if node.outputs else ""
    weights = weight_count(node)
    label = label or node.label
    label = label if len(label) <= 28 else "…" + label[-27:]
    return (f"{node.op} {shape}".strip() + (f" +{weights}w" if weights else ""), label)


def port_lines(port: GraphPort, detail: Detail) -> tuple[str, ...]:
    """A graph input's or output's box: `input data_0` over its shape."""
    name = port.tensor if len(port.tensor) <= 20 else "…" + port.tensor[-19:]
    word = "input" if port.is_input else "output"
    if detail is not Detail.FULL:
        return (f"{word} {name}",)
    return (f"{word} {name}", format_shape(port.shape))


def box_size(lines: Sequence[str], detail: Detail = Detail.FULL) -> tuple[int, int]:
    """Cells a node's box takes: its text in a border, or `[text]` on one line when compact."""
    if not lines:
        return 1, 1
    if detail is Detail.COMPACT:
        return max(len(line) for line in lines) + 2, 1
    return max(len(line) for line in lines) + 4, len(lines) + 2


def layout_dot(graph, detail: Detail, clusters: Sequence[ClusterSpec] = (),
               only: Iterable[str] | None = None, ports: bool = False) -> tuple[str, dict[str, tuple[str, ...]]]:
    """DOT text with fixed-size nodes for the level of detail, and each node's text. `ports`:
    the graph's inputs and outputs are nodes too (`in:NAME`, `out:NAME`, see graph_ports).
    Each node is given to dot a cell larger on every side than it is drawn, so the cell an
    edge leaves from and the arrow cell above it are never on a cluster's border."""
    keep = set(only) if only is not None else None
    nodes = [n for n in graph.nodes if keep is None or n.id in keep]
    labels = op_labels(graph)
    texts = {n.id: node_lines(n, detail, labels[n.id]) for n in nodes}
    ids = {n.id for n in nodes}
    for port in graph_ports(graph) if ports else ():
        if any(o in ids for o in port.ops):
            texts[port.id] = port_lines(port, detail)
    ranksep, nodesep = (0.2, 0.2) if detail is not Detail.COMPACT else (0.2, 0.2)
    lines = ["digraph G {", f"  graph [rankdir=TB, ranksep={ranksep}, nodesep={nodesep}];",
             "  node [shape=box, fixedsize=true, label=\"\"];"]
    placed: set[str] = set()
    for k, (spec, children) in enumerate(_cluster_tree(drawn_clusters(clusters, texts))):
        lines.extend(_cluster_lines(spec, children, texts, placed, f"c{k}", "  ", detail))
    for n in nodes:
        if n.id not in placed:
            lines.append("  " + _node_decl(n.id, texts[n.id], detail))
    lines.extend("  " + _node_decl(i, t, detail) for i, t in texts.items() if i not in ids)  # ports, in order
    lines.extend(f"  {quote(a)} -> {quote(b)};" for a, b in layout_edges(graph, texts))
    lines.append("}")
    return "\n".join(lines), texts


def layout_edges(graph, texts: dict[str, tuple[str, ...]]) -> list[tuple[str, str]]:
    """The edges drawn among the nodes in `texts`: the graph's, then those of its ports."""
    edges = [(e.src, e.dst) for e in graph.edges if e.src in texts and e.dst in texts]
    for port in graph_ports(graph):
        if port.id in texts:
            edges += [(port.id, o) if port.is_input else (o, port.id) for o in port.ops if o in texts]
    return edges


def _node_decl(node_id: str, text: tuple[str, ...], detail: Detail) -> str:
    w, h = box_size(text, detail)
    return f"{quote(node_id)} [width={(w + 2) * COL_IN:.2f}, height={(h + 2) * ROW_IN:.2f}];"


def _cluster_tree(clusters: Sequence[ClusterSpec]) -> list[tuple[ClusterSpec, list]]:
    """Nest clusters by containment, in the given order of priority: a cluster overlapping an
    earlier one without nesting is dropped (a node can be in one cluster only)."""
    roots: list[tuple[ClusterSpec, list]] = []

    def insert(level: list, spec: ClusterSpec) -> bool:
        members = set(spec.members)
        for other, children in level:
            if members <= set(other.members):
                return insert(children, spec)
        inside = [item for item in level if set(item[0].members) <= members]
        if any(set(o.members) & members for o, _ in level if (o, _) not in inside):
            return False
        for item in inside:
            level.remove(item)
        level.append((spec, inside))
        return True

    for spec in clusters:
        if len(spec.members) >= 1:
            insert(roots, spec)
    return roots


def _cluster_lines(spec, children, texts, placed, name, indent, detail) -> list[str]:
    out = [f"{indent}subgraph cluster_{name} {{ margin=22; fontname=Courier; fontsize=14; "
           f"label={quote(title_text(spec, detail))};"]
    for k, (child, grand) in enumerate(children):
        out.extend(_cluster_lines(child, grand, texts, placed, f"{name}_{k}", indent + "  ", detail))
    for m in spec.members:
        if m in texts and m not in placed:
            placed.add(m)
            out.append(f"{indent}  {_node_decl(m, texts[m], detail)}")
    out.append(f"{indent}}}")
    return out


def title_text(spec: ClusterSpec, detail: Detail = Detail.FULL) -> str:
    """A cluster's title as drawn on its top border: its id alone when compact (`k15`)."""
    label = spec.label.replace("\n", " ")
    if detail is Detail.COMPACT:
        return label.split()[0] if label.split() else label
    return label if len(label) <= 40 else label[:39] + "…"


# Cluster titles are given to dot in 14 pt Courier (8.4 pt a character, a column is 7.2 pt):
# the room dot makes for a title is then a little wider than the title drawn.


def parse_json(text: str, texts: dict[str, tuple[str, ...]], detail: Detail,
               clusters: Sequence[ClusterSpec], edges: Sequence[tuple[str, str]]) -> Layout:
    """Convert `dot -Tjson` (points, y up) into cell boxes and cluster boxes, then route the
    edges on the cells (see routing)."""
    data = json.loads(text)
    height_pt = float(data["bb"].split(",")[3])
    boxes: dict[str, Box] = {}
    bbs: dict[str, Box] = {}
    for obj in data.get("objects", ()):
        if "bb" in obj and obj["name"].startswith("cluster_"):
            # the cells wholly inside the box: clusters that touch in dot's points stay apart
            x0, y0, x1, y1 = (float(v) for v in obj["bb"].split(","))
            left, top = math.ceil(x0 / 72 / COL_IN), math.ceil((height_pt - y1) / 72 / ROW_IN)
            right, bottom = math.floor(x1 / 72 / COL_IN), math.floor((height_pt - y0) / 72 / ROW_IN)
            bbs[obj["name"]] = Box(left, top, right - left, bottom - top)
        elif "pos" in obj:
            x, y = (float(v) for v in obj["pos"].split(","))
            wc, hc = box_size(texts.get(obj["name"], ()), detail)
            cx, cy = x / 72 / COL_IN, (height_pt - y) / 72 / ROW_IN
            boxes[obj["name"]] = Box(round(cx - wc / 2), round(cy - hc / 2), wc, hc)
    layout = Layout(detail, 0, 0, boxes, dict(texts), [])
    names = _cluster_names(clusters, texts)
    for spec in clusters:
        box = bbs.get(names.get(spec))
        if box is not None:
            layout.clusters.append((spec, box))
    layout.clusters.sort(key=lambda cb: -(cb[1].w * cb[1].h))
    right = max([b.x + b.w for b in boxes.values()] + [b.x + b.w for _, b in layout.clusters], default=0)
    bottom = max([b.y + b.h for b in boxes.values()] + [b.y + b.h for _, b in layout.clusters], default=0)
    routed = route_edges(boxes, [(frozenset(s.members), b, len(title_text(s, detail))) for s, b in layout.clusters],
                         edges, right, bottom)
    layout.edges = [(a, b, path) for (a, b), path in zip(edges, routed)]
    cells = [c for _, _, path in layout.edges for c in path]
    layout.width = max([right] + [x + 1 for x, _ in cells]) + 2
    layout.height = max([bottom] + [y + 1 for _, y in cells]) + 1
    return layout


def _cluster_names(clusters: Sequence[ClusterSpec], texts) -> dict[ClusterSpec, str]:
    """Each drawn cluster's subgraph name in layout_dot's DOT text."""
    names: dict[ClusterSpec, str] = {}

    def walk(level, prefix):
        for k, (spec, children) in enumerate(level):
            names[spec] = f"cluster_{prefix}{k}"
            walk(children, f"{prefix}{k}_")

    walk(_cluster_tree(list(clusters)), "c")
    return names


def layout_graph(graph, detail: Detail, clusters: Sequence[ClusterSpec] = (),
                 only: Iterable[str] | None = None, ports: bool = False) -> Layout:
    """Lay out an OperatorGraph (or the ops in `only`) with dot for a level of detail;
    `ports`: with the graph's input and output tensors as nodes."""
    dot, texts = layout_dot(graph, detail, clusters, only, ports)
    drawn = drawn_clusters(clusters, texts)
    return parse_json(run_dot(dot, "json").decode(), texts, detail, drawn, layout_edges(graph, texts))


def drawn_clusters(clusters: Sequence[ClusterSpec], present: Iterable[str]) -> list[ClusterSpec]:
    """The clusters dot draws: restricted to present ops, nested or disjoint."""
    keep = set(present)
    specs = [ClusterSpec(c.label, tuple(m for m in c.members if m in keep), c.kind) for c in clusters]
    out: list[ClusterSpec] = []

    def walk(level):
        for spec, children in level:
            out.append(spec)
            walk(children)

    walk(_cluster_tree([c for c in specs if c.members]))
    return out
