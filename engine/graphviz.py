"""Graphviz: DOT text for the engine's graphs and rendering through the `dot` program."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from engine.errors import BlockwiseError
from engine.files import write_atomic


def quote(text: str) -> str:
    """A DOT string literal; newlines become DOT's centred line breaks."""
    escaped = str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def format_shape(shape) -> str:
    return "x".join(str(d) for d in shape) if shape else "scalar"


@dataclass(frozen=True)
class Box:
    """A box drawn around operators: a fused kernel, a fusion decision. Boxes nest when one
    holds all of another's operators; one that crosses another's border cannot be drawn."""

    label: str
    members: tuple[str, ...]
    color: str = "#3a7bd5"
    style: str = "dashed"  # Graphviz cluster style: dashed, solid, dotted, bold


PORT_FILL = "#c8e6c9"  # graph inputs and outputs


def operator_graph_dot(graph, clusters: Mapping[str, Iterable[str]] | Sequence[Box] | None = None,
                       colors: Mapping[str, str] | None = None, title: str = "",
                       legend: Sequence[tuple[str, str, str]] = (), ports: Sequence = ()) -> str:
    """DOT for an OperatorGraph: one box per op labelled with op type, output shape and its
    weights (+Nw: N constant inputs).

    `clusters`: Boxes (or label -> member op ids: dashed blue boxes), nested where one holds
    another, each op drawn in the smallest box holding it; `colors` maps op ids to fill
    colours (kernel time heat); `title` goes on top; `legend`: (kind, colour, what) rows,
    kind "fill" (a node colour) or a cluster style ("dashed", "solid", ...), drawn as a table;
    `ports`: the graph's input and output tensors, drawn as green nodes (objects with id,
    tensor, shape, ops, is_input: workbench.present.opgraph.GraphPort).

        >>> operator_graph_dot(g, [Box("d0", ("a", "b")), Box("k", ("a",))], title="m")
        'digraph G { ... subgraph cluster_0 { label="d0"; ... subgraph cluster_1 { label="k"; ... "a" ... } "b" ...'
    """
    colors = colors or {}
    boxes = list(clusters) if isinstance(clusters, Sequence) else \
        [Box(label, tuple(members)) for label, members in (clusters or {}).items()]
    tree, crossing = nest_boxes(boxes)
    lines = ["digraph G {", "  rankdir=TB; graph [fontname=\"Helvetica\", fontsize=11]; node [shape=box, "
             "style=\"rounded,filled\", fillcolor=\"#f4f4f4\", fontname=\"Helvetica\", fontsize=10];"]
    if title or crossing:
        ids = [c.split()[0] for c in crossing]
        rows = [", ".join(ids[k:k + 12]) for k in range(0, len(ids), 12)]
        text = title + (f"\nboxes crossing another box, drawn as outlined ops named [id]: " + ",\n".join(rows)
                        if crossing else "")
        lines.append(f"  labelloc=t; fontsize=14; label={quote(text)};")
    if legend:
        lines.append(f"  legend [shape=plaintext, style=\"\", label=<{_legend_table(legend)}>];")

    marks: dict[str, list[Box]] = {}  # op -> the boxes that could not be drawn around it
    for box in boxes:
        if box.label in crossing:
            for op in box.members:
                marks.setdefault(op, []).append(box)
    inside: dict = {}
    for n in graph.nodes:  # graph order within each box
        inside.setdefault(tree.owner.get(n.id), []).append(n)

    def emit(index: int | None, depth: int) -> None:
        pad = "  " * depth
        for child in tree.children.get(index, ()):
            box = boxes[child]
            lines.append(f"{pad}subgraph cluster_{child} {{ label={quote(tree.labels[child])}; "
                         f"style={quote(box.style)}; color={quote(box.color)}; fontcolor={quote(box.color)};")
            emit(child, depth + 1)
            lines.append(f"{pad}}}")
        lines.extend(f"{pad}{_node_line(n, colors, marks.get(n.id, ()))}" for n in inside.get(index, ()))

    emit(None, 1)
    for p in ports:
        word = "input" if p.is_input else "output"
        lines.append(f"  {quote(p.id)} [shape=box, style=filled, label={quote(f'{word} {p.tensor}' + chr(10) + format_shape(p.shape))}, "
                     f"fillcolor={quote(PORT_FILL)}];")
        lines.extend(f"  {quote(p.id)} -> {quote(o)};" if p.is_input else f"  {quote(o)} -> {quote(p.id)};"
                     for o in p.ops)
    lines.extend(f"  {quote(e.src)} -> {quote(e.dst)};" for e in graph.edges)
    lines.append("}")
    return "\n".join(lines)


@dataclass(frozen=True)
class BoxTree:
    children: dict  # box index (None: the graph) -> indices of the boxes directly inside it
    owner: dict  # op -> the index of the smallest box holding it
    labels: dict  # box index -> its label


def nest_boxes(boxes: Sequence[Box]) -> tuple[BoxTree, list[str]]:
    """Each op in the smallest box holding it, each box inside the smallest box holding all
    its ops; a box whose ops lie in different boxes crosses a border (returned by label, not
    drawn). Of boxes with the same ops the later is drawn inside the earlier, each in its own
    style (a kernel box and the approved decision that made it).

        >>> tree, crossing = nest_boxes([Box("d0", ("a", "b", "c")), Box("k1", ("a", "b"))])
        >>> tree.children, sorted(tree.owner.items()), crossing
        ({None: [0], 0: [1]}, [('a', 1), ('b', 1), ('c', 0)], [])
    """
    owner: dict[str, int] = {}
    children: dict = {}
    labels: dict[int, str] = {}
    crossing: list[str] = []
    for i in sorted(range(len(boxes)), key=lambda i: -len(set(boxes[i].members))):
        members = frozenset(boxes[i].members)
        if not members:
            continue
        parents = {owner.get(op) for op in members}
        if len(parents) > 1:
            crossing.append(boxes[i].label)
            continue
        labels[i] = boxes[i].label
        children.setdefault(parents.pop(), []).append(i)
        owner.update((op, i) for op in members)
    return BoxTree(children, owner, labels), crossing


def _legend_table(rows: Sequence[tuple[str, str, str]]) -> str:
    """An HTML-like Graphviz table: a swatch (a filled cell, or a bordered one for a box
    style) and what it means, per row."""
    cells = ['<TR><TD COLSPAN="2"><B>legend</B></TD></TR>']
    for kind, color, what in rows:
        if kind == "fill":
            swatch = f'<TD BGCOLOR="{color}" WIDTH="24"> </TD>'
        else:
            style = ' STYLE="dashed"' if kind in ("dashed", "dotted") else ""
            swatch = f'<TD BORDER="2" COLOR="{color}"{style} WIDTH="24"> </TD>'
        cells.append(f'<TR>{swatch}<TD ALIGN="LEFT">{_html(what)}</TD></TR>')
    return '<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="3" CELLPADDING="3">' + "".join(cells) + "</TABLE>"


def _html(text: str) -> str:
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _node_line(node, colors, marks: Sequence[Box] = ()) -> str:
    """An op's node; `marks`: boxes that cross another and so are drawn as its outline and
    a `[d1]` line instead."""
    shape = format_shape(node.outputs[0].shape) if node.outputs else ""
    weights = sum(1 for t in node.inputs if t.constant)
    label = f"{node.op} {shape}" + (f" +{weights}w" if weights else "") + f"\n{node.label}"
    if marks:
        label += "\n[" + ", ".join(b.label.split()[0] for b in marks) + "]"
    fill = colors.get(node.id, "#f4f4f4")
    outline = f", color={quote(marks[0].color)}, penwidth=2.5" if marks else ""
    return f"{quote(node.id)} [label={quote(label)}, fillcolor={quote(fill)}{outline}];"


def dot_program() -> str:
    path = shutil.which("dot")
    if path is None:
        raise BlockwiseError("Graphviz 'dot' program not found; install it (Debian: apt-get install graphviz)")
    return path


def run_dot(dot_text: str, fmt: str, timeout: float = 120.0) -> bytes:
    """Run `dot -T<fmt>` on DOT text and return its output."""
    proc = subprocess.run([dot_program(), f"-T{fmt}"], input=dot_text.encode(),
                          capture_output=True, timeout=timeout)
    if proc.returncode != 0:
        first = proc.stderr.decode(errors="replace").strip().splitlines()[:1]
        raise BlockwiseError(f"Graphviz dot failed: {first[0] if first else proc.returncode}")
    return proc.stdout


def render_svg(dot_text: str, path: str | os.PathLike) -> Path:
    return write_atomic(path, run_dot(dot_text, "svg"))
