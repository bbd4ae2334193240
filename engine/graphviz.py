"""Graphviz: DOT text for the engine's graphs and rendering through the `dot` program."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Iterable, Mapping

from engine.errors import BlockwiseError
from engine.files import write_atomic


def quote(text: str) -> str:
    """A DOT string literal; newlines become DOT's centred line breaks."""
    escaped = str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def format_shape(shape) -> str:
    return "x".join(str(d) for d in shape) if shape else "scalar"


def operator_graph_dot(graph, clusters: Mapping[str, Iterable[str]] | None = None,
                       colors: Mapping[str, str] | None = None) -> str:
    """DOT for an OperatorGraph: one box per op labelled with op type and output shape.

    `clusters` maps a label (a parallel group, a fused kernel) to member op ids;
    `colors` maps op ids to fill colours (kernel time heat)."""
    colors = colors or {}
    lines = ["digraph G {", "  rankdir=TB; graph [fontname=\"Helvetica\", fontsize=11]; node [shape=box, style=\"rounded,filled\", "
             "fillcolor=\"#f4f4f4\", fontname=\"Helvetica\", fontsize=10];"]
    clustered: set[str] = set()
    for k, (label, members) in enumerate((clusters or {}).items()):
        members = list(members)
        clustered.update(members)
        lines.append(f"  subgraph cluster_{k} {{ label={quote(label)}; style=dashed; color=\"#3a7bd5\";")
        lines.extend(f"    {_node_line(graph.node(m), colors)}" for m in members)
        lines.append("  }")
    lines.extend(f"  {_node_line(n, colors)}" for n in graph.nodes if n.id not in clustered)
    lines.extend(f"  {quote(e.src)} -> {quote(e.dst)};" for e in graph.edges)
    lines.append("}")
    return "\n".join(lines)


def _node_line(node, colors) -> str:
    shape = format_shape(node.outputs[0].shape) if node.outputs else ""
    label = f"{node.op} {shape}\n{node.label}"
    fill = colors.get(node.id, "#f4f4f4")
    return f"{quote(node.id)} [label={quote(label)}, fillcolor={quote(fill)}];"


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
