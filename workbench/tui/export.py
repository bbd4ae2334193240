"""Export (no UI): the operator graph and the block graph as Graphviz SVGs, the timing charts
with matplotlib. Called from the app's export worker; returns what it wrote and skipped."""

from __future__ import annotations

from pathlib import Path

from engine.graphviz import operator_graph_dot, render_svg
from workbench.tui.facts import Unavailable
from workbench.tui.graph_canvas import heat_color
from workbench.tui.layout import ClusterSpec


def export_views(out_dir: Path, graph, clusters: tuple[ClusterSpec, ...], op_ms: dict[str, float],
                 block_dot: str | Unavailable | None, runs: dict[str, object]) -> tuple[list[Path], list[str]]:
    """Write opgraph.svg, blockgraph.svg and timing-<run>.svg/.png under `out_dir`."""
    from workbench.plots import timing_chart

    written: list[Path] = []
    skipped: list[str] = []
    out_dir.mkdir(parents=True, exist_ok=True)
    top = max(op_ms.values(), default=0.0) or 1.0
    colors = {op: heat_color(ms / top).name for op, ms in op_ms.items()}
    labelled = {}
    for c in clusters:  # the engine's DOT takes flat clusters: keep the first claim of an op
        taken = {m for ms in labelled.values() for m in ms}
        members = [m for m in c.members if m not in taken]
        if members:
            labelled[c.label] = members
    written.append(render_svg(operator_graph_dot(graph, clusters=labelled, colors=colors),
                              out_dir / "opgraph.svg"))
    if isinstance(block_dot, Unavailable):
        skipped.append(f"block graph: {block_dot.reason}")
    elif block_dot:
        written.append(render_svg(block_dot, out_dir / "blockgraph.svg"))
    else:
        skipped.append("block graph: no edge selected")
    for name, result in runs.items():
        if result is not None and result.kernel_times:
            written += timing_chart(result.kernel_times, f"{result.model} on {result.target}: "
                                    f"per-kernel time ({name} the plan)", out_dir / f"timing-{name}")
    if not any(r is not None and r.kernel_times for r in runs.values()):
        skipped.append("timing plot: nothing timed yet (c: compile)")
    return written, skipped
