"""Graph layout in character cells: Graphviz `dot -Tplain` positions mapped onto a terminal grid.

Every node gets a fixed box size in cells for the level of detail, which is passed to dot
as inches (one column = 0.1 in, one row = 0.2 in, a terminal cell is about twice as tall
as wide); dot's positions and edge splines are read back from `-Tplain` and converted to
cells. Clusters (fused kernels, parallel groups) are laid out by dot as subgraphs; their
boxes are the bounds of their members plus a margin (plain output does not carry them).

    >>> layout = layout_graph(graph, Detail.OP)      # doctest: +SKIP
    >>> layout.boxes["n0"]                            # doctest: +SKIP
    Box(x=3, y=1, w=6, h=3)
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from engine.graphviz import format_shape, quote, run_dot
from workbench.present.opgraph import GraphPort, graph_ports, op_labels, weight_count

COL_IN = 0.1  # inches per terminal column
ROW_IN = 0.2  # inches per terminal row


class Detail(enum.IntEnum):
    """Levels of detail, from zoomed in to zoomed out."""

    FULL = 0  # op, output shape and label
    OP = 1  # op type only
    DOTS = 2  # one cell per node


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
    edges: list[tuple[str, str, list[tuple[float, float]]]]  # (src, dst, points in cells)
    clusters: list[tuple[ClusterSpec, Box]] = field(default_factory=list)

    def node_at(self, x: int, y: int) -> str | None:
        for node_id, box in self.boxes.items():
            if box.contains(x, y):
                return node_id
        return None


def node_lines(node, detail: Detail, label: str | None = None) -> tuple[str, ...]:
    """The text inside a node's box at a level of detail: `Conv 1x64x56x56 +2w` (output shape,
    weight inputs), then the label (`label`: a unique one, see present.opgraph.op_labels)."""
    if detail is Detail.DOTS:
        return ()
    if detail is Detail.OP:
        return (node.op,)
    shape = format_shape(node.outputs[0].shape) if node.outputs else ""
    weights = weight_count(node)
    label = label or node.label
    label = label if len(label) <= 28 else "…" + label[-27:]
    return (f"{node.op} {shape}".strip() + (f" +{weights}w" if weights else ""), label)


def port_lines(port: GraphPort, detail: Detail) -> tuple[str, ...]:
    """A graph input's or output's box: `input data_0` over its shape."""
    if detail is Detail.DOTS:
        return ()
    name = port.tensor if len(port.tensor) <= 20 else "…" + port.tensor[-19:]
    word = "input" if port.is_input else "output"
    if detail is Detail.OP:
        return (f"{word} {name}",)
    return (f"{word} {name}", format_shape(port.shape))


def box_size(lines: Sequence[str]) -> tuple[int, int]:
    if not lines:
        return 1, 1
    return max(len(line) for line in lines) + 4, len(lines) + 2


def layout_dot(graph, detail: Detail, clusters: Sequence[ClusterSpec] = (),
               only: Iterable[str] | None = None, ports: bool = False) -> tuple[str, dict[str, tuple[str, ...]]]:
    """DOT text with fixed-size nodes for the level of detail, and each node's text. `ports`:
    the graph's inputs and outputs are nodes too (`in:NAME`, `out:NAME`, see graph_ports)."""
    keep = set(only) if only is not None else None
    nodes = [n for n in graph.nodes if keep is None or n.id in keep]
    labels = op_labels(graph)
    texts = {n.id: node_lines(n, detail, labels[n.id]) for n in nodes}
    port_edges = []
    if ports:
        ids = {n.id for n in nodes}
        for port in graph_ports(graph):
            ops = [o for o in port.ops if o in ids]
            if ops:
                texts[port.id] = port_lines(port, detail)
                port_edges += [(port.id, o) if port.is_input else (o, port.id) for o in ops]
    ranksep, nodesep = (0.4, 0.2) if detail is not Detail.DOTS else (0.2, 0.1)
    lines = ["digraph G {", f"  graph [rankdir=TB, ranksep={ranksep}, nodesep={nodesep}, splines=true];",
             "  node [shape=box, fixedsize=true, label=\"\"];", "  edge [arrowsize=0.5];"]
    placed: set[str] = set()
    for k, (spec, children) in enumerate(_cluster_tree(drawn_clusters(clusters, texts))):
        lines.extend(_cluster_lines(spec, children, texts, placed, f"c{k}", "  "))
    for n in nodes:
        if n.id not in placed:
            lines.append("  " + _node_decl(n.id, texts[n.id]))
    ids = {n.id for n in nodes}
    lines.extend("  " + _node_decl(i, t) for i, t in texts.items() if i not in ids)  # ports, in order
    lines.extend(f"  {quote(e.src)} -> {quote(e.dst)};" for e in graph.edges
                 if e.src in ids and e.dst in ids)
    lines.extend(f"  {quote(a)} -> {quote(b)};" for a, b in port_edges)
    lines.append("}")
    return "\n".join(lines), texts


def _node_decl(node_id: str, text: tuple[str, ...]) -> str:
    w, h = box_size(text)
    return f"{quote(node_id)} [width={w * COL_IN:.2f}, height={h * ROW_IN:.2f}];"


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


def _cluster_lines(spec, children, texts, placed, name, indent) -> list[str]:
    out = [f"{indent}subgraph cluster_{name} {{ margin={14 + 14 * bool(children)};"]
    for k, (child, grand) in enumerate(children):
        out.extend(_cluster_lines(child, grand, texts, placed, f"{name}_{k}", indent + "  "))
    for m in spec.members:
        if m in texts and m not in placed:
            placed.add(m)
            out.append(f"{indent}  {_node_decl(m, texts[m])}")
    out.append(f"{indent}}}")
    return out


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|\S+')


def parse_plain(text: str, texts: dict[str, tuple[str, ...]], detail: Detail,
                clusters: Sequence[ClusterSpec] = ()) -> Layout:
    """Convert `dot -Tplain` output (inches, y up) into cell boxes and edge polylines."""
    height_in = 0.0
    boxes: dict[str, Box] = {}
    edges: list[tuple[str, str, list[tuple[float, float]]]] = []
    for line in text.splitlines():
        if line.startswith("graph "):
            height_in = float(line.split()[3])
        elif line.startswith("node "):
            tok = _TOKEN.findall(line)
            node_id = _unquote(tok[1])
            x, y, w, h = (float(v) for v in tok[2:6])
            wc, hc = box_size(texts.get(node_id, ()))
            cx, cy = x / COL_IN, (height_in - y) / ROW_IN
            boxes[node_id] = Box(round(cx - wc / 2), round(cy - hc / 2), wc, hc)
        elif line.startswith("edge "):
            tok = _TOKEN.findall(line)
            n = int(tok[3])
            pts = [(float(tok[4 + 2 * i]) / COL_IN, (height_in - float(tok[5 + 2 * i])) / ROW_IN)
                   for i in range(n)]
            edges.append((_unquote(tok[1]), _unquote(tok[2]), sample_bspline(pts)))
    width = max((b.x + b.w for b in boxes.values()), default=0) + 2
    height = max((b.y + b.h for b in boxes.values()), default=0) + 1
    layout = Layout(detail, width, height, boxes, dict(texts), edges)
    for spec in clusters:
        members = [boxes[m] for m in spec.members if m in boxes]
        if members:
            # Outer clusters get wider margins than the clusters nested in them.
            depth = sum(1 for c in clusters if c is not spec and set(c.members) < set(spec.members))
            mx, my = 2 + 2 * min(depth, 1), 1 + min(depth, 1)
            x0 = min(b.x for b in members) - mx
            y0 = min(b.y for b in members) - my
            x1 = max(b.x + b.w for b in members) + mx
            y1 = max(b.y + b.h for b in members) + my
            layout.clusters.append((spec, Box(max(x0, 0), max(y0, 0), x1 - max(x0, 0), y1 - max(y0, 0))))
    layout.clusters.sort(key=lambda cb: -(cb[1].w * cb[1].h))
    return layout


def sample_bspline(pts: list[tuple[float, float]], steps: int = 4) -> list[tuple[float, float]]:
    """Points along dot's piecewise cubic Bezier (1 + 3k control points)."""
    if len(pts) < 4:
        return pts
    out = [pts[0]]
    for i in range(0, len(pts) - 3, 3):
        p0, p1, p2, p3 = pts[i:i + 4]
        for s in range(1, steps + 1):
            t = s / steps
            a, b, c, d = (1 - t) ** 3, 3 * t * (1 - t) ** 2, 3 * t * t * (1 - t), t ** 3
            out.append((a * p0[0] + b * p1[0] + c * p2[0] + d * p3[0],
                        a * p0[1] + b * p1[1] + c * p2[1] + d * p3[1]))
    return out


def _unquote(token: str) -> str:
    if token.startswith('"') and token.endswith('"'):
        return token[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return token


def layout_graph(graph, detail: Detail, clusters: Sequence[ClusterSpec] = (),
                 only: Iterable[str] | None = None, ports: bool = False) -> Layout:
    """Lay out an OperatorGraph (or the ops in `only`) with dot for a level of detail;
    `ports`: with the graph's input and output tensors as nodes."""
    dot, texts = layout_dot(graph, detail, clusters, only, ports)
    plain = run_dot(dot, "plain").decode()
    return parse_plain(plain, texts, detail, drawn_clusters(clusters, texts))


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
