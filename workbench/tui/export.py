"""Export (no UI): the operator graph and the block graph as Graphviz SVGs, the timing charts
with matplotlib. Called from the app's export worker; returns what it wrote and skipped."""

from __future__ import annotations

from pathlib import Path

from engine.graphviz import Box, operator_graph_dot, render_svg
from engine.parallel.plan import DecisionStatus
from workbench.present.opgraph import graph_ports, opgraph_legend, opgraph_title
from workbench.tui.facts import PlanState, Unavailable
from workbench.tui.graph_canvas import heat_color
from workbench.tui.layout import ClusterSpec


def export_views(out_dir: Path, graph, clusters: tuple[ClusterSpec, ...], op_ms: dict[str, float],
                 block_dot: str | Unavailable | None, runs: dict[str, object], plan: PlanState | None = None
                 ) -> tuple[list[Path], list[str]]:
    """Write opgraph.svg, blockgraph.svg and timing.svg/.png (one chart: before and after
    the plan on one axis) under `out_dir`."""
    from workbench.plots import timing_chart
    from workbench.present.timing import chart_rows

    written: list[Path] = []
    skipped: list[str] = []
    out_dir.mkdir(parents=True, exist_ok=True)
    written.append(render_svg(opgraph_dot(graph, clusters, op_ms, plan), out_dir / "opgraph.svg"))
    if isinstance(block_dot, Unavailable):
        skipped.append(f"block graph: {block_dot.reason}")
    elif block_dot:
        written.append(render_svg(block_dot, out_dir / "blockgraph.svg"))
    else:
        skipped.append("block graph: no edge selected")
    after = runs.get("after")
    rows, series, note = chart_rows(getattr(after, "fusion", None) if after is not None else None,
                                    {label: r.kernel_times for label, r in
                                     (("before the plan (c)", runs.get("before")), ("with the plan (C)", after))
                                     if r is not None},
                                    {op: f"k{k.index}" for k in after.kernels for op in k.ops} if after else None)
    if rows:
        model = next(r for r in runs.values() if r is not None)
        written += timing_chart(rows, f"{model.model} on {model.target}: time per kernel, before and after the plan",
                                out_dir / "timing", series, note)
    else:
        skipped.append("timing chart: nothing timed yet (c: compile)")
    return written, skipped


KERNEL_BOX = ("dashed", "#3a7bd5", "fused kernel (as last compiled)")
DECISION_BOXES = {DecisionStatus.APPROVED: ("bold", "#2e7d32", "fusion decision: approved"),
                  DecisionStatus.PROPOSED: ("dashed", "#ef6c00", "fusion decision: proposed (undecided)"),
                  DecisionStatus.REJECTED: ("dotted", "#9e9e9e", "fusion decision: rejected")}


def opgraph_dot(graph, clusters: tuple[ClusterSpec, ...], op_ms: dict[str, float], plan: PlanState | None) -> str:
    """The operator graph for a report: a title, fused kernels and the plan's decisions as boxes
    around all their members (nested where one holds another), ops filled by their kernel's
    time, and a legend for every colour and box."""
    top = max(op_ms.values(), default=0.0) or 1.0
    colors = {op: heat_color(ms / top).name for op, ms in op_ms.items()}
    boxes = [Box(c.label, tuple(c.members), KERNEL_BOX[1], KERNEL_BOX[0]) for c in clusters if c.kind == "kernel"]
    if plan is not None:
        for r in plan.rows:
            style, color, _ = DECISION_BOXES.get(r.status, DECISION_BOXES[DecisionStatus.PROPOSED])
            boxes.append(Box(f"{r.id} {r.kind} [{r.status.value}]", tuple(r.members), color, style))
    else:
        style, color, _ = DECISION_BOXES[DecisionStatus.PROPOSED]
        boxes += [Box(c.label, tuple(c.members), color, style) for c in clusters if c.kind != "kernel"]
    legend = [("fill", heat_color(x).name, f"kernel median {x * top:.3f} ms" + (" (the slowest)" if x == 1 else ""))
              for x in (0.0, 0.5, 1.0)] if op_ms else []
    legend += [("fill", "#f4f4f4", "not timed")] if op_ms else []
    legend += opgraph_legend()
    legend += [(KERNEL_BOX[0], KERNEL_BOX[1], KERNEL_BOX[2])]
    legend += [(style, color, what) for style, color, what in DECISION_BOXES.values()]
    title = opgraph_title(graph) + "\nboxes: fused kernels and fusion decisions; fill: time of the op's kernel per inference"
    return operator_graph_dot(graph, boxes, colors, title=title, legend=legend, ports=graph_ports(graph))
