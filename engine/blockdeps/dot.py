"""Graphviz DOT of block dependencies: blocks as nodes in one cluster per kernel, for one
edge or the whole model. Big grids are sampled (at most `max_blocks` per kernel, evenly
spaced, the blocks a shown consumer block needs first) and the cluster label says so; a
whole model with big grids is drawn kernel by kernel instead (model_summary_dot).
An all-to-all edge is drawn as one barrier node. One edge whose grids are larger than
`max_blocks` is summarised instead (edge_summary_dot): both grids as heat maps (fan-in,
fan-out), the consumer blocks in classes by fan-in with their ranges, a legend. Render with
engine.graphviz.render_svg.

>>> # dot = block_graph_dot(deps, edge=deps.edges[0]); render_svg(dot, "edge.svg")
"""

from __future__ import annotations

import numpy as np

from engine.graphviz import quote

from .facts import EdgeBlockMap, EdgeClass, ModelBlockDeps

_CLASS_COLOR = {EdgeClass.INDEPENDENT: "#9e9e9e", EdgeClass.ONE_TO_ONE: "#2e7d32",
                EdgeClass.ONE_TO_FEW: "#1565c0", EdgeClass.PARTIAL: "#ef6c00",
                EdgeClass.ALL_TO_ALL: "#c62828"}


def _spread(n: int, k: int) -> list[int]:
    if n <= k:
        return list(range(n))
    return sorted({int(round(i * (n - 1) / (k - 1))) for i in range(k)}) if k > 1 else [0]


def block_graph_dot(deps: ModelBlockDeps, edge: EdgeBlockMap | None = None, max_blocks: int | None = None) -> str:
    """DOT text for one edge (`edge`) or the whole model (default). A model with a grid of
    more than 16 blocks is summarised kernel by kernel (model_summary_dot)."""
    edges = [edge] if edge is not None else list(deps.edges)
    cap = max_blocks or (16 if edge is not None else 6)
    if edge is not None and max(edge.producer_grid.blocks, edge.consumer_grid.blocks) > cap:
        return edge_summary_dot(deps, edge)
    if edge is None and max((g.blocks for g in deps.grids), default=0) > 16:
        return model_summary_dot(deps)
    kernels = sorted({e.producer.index for e in edges} | {e.consumer.index for e in edges}) \
        if edge is not None else [k.index for k in deps.kernels]
    shown: dict[int, list[int]] = {}
    for k in kernels:
        shown[k] = _spread(deps.grids[k].blocks, cap)
    if edge is not None:  # show first the producer blocks the shown consumer blocks need
        need = sorted({p for c in shown[edge.consumer.index] for p in edge.producers_of(c)})
        rest = [b for b in shown[edge.producer.index] if b not in need]
        shown[edge.producer.index] = sorted((need[:cap] + rest)[:max(cap, 1)])
    lines = ["digraph blocks {", "  rankdir=LR; newrank=true; graph [fontname=\"Helvetica\", fontsize=11];",
             "  node [shape=box, style=\"rounded,filled\", fillcolor=\"#f4f4f4\", fontname=\"Helvetica\", fontsize=9];"]
    title = f"{deps.model} ({deps.target}): block dependencies"
    if edge is not None:
        title += f" of {edge.producer.describe()} -> {edge.consumer.describe()}"
    lines.append(f"  label={quote(title)}; labelloc=t; fontsize=14;")
    lines.append(f"  legend [shape=plaintext, style=\"\", label=<{_legend(edges)}>];")
    for k in kernels:
        ref, grid = deps.kernels[k], deps.grids[k]
        label = f"{ref.describe()} {ref.func}\n{grid.describe()}"
        if len(shown[k]) < grid.blocks:
            label += f"\nshowing {len(shown[k])} of {grid.blocks} blocks"
        lines.append(f"  subgraph cluster_k{k} {{ label={quote(label)}; style=dashed; color=\"#3a7bd5\";")
        lines.extend(f"    {quote(_node(k, b))} [label={quote(f'b{b}')}];" for b in shown[k])
        lines.append("  }")
    for e in edges:
        p, c = e.producer.index, e.consumer.index
        color = _CLASS_COLOR[e.edge_class]
        tag = f"{e.edge_class.value}, fan-in {e.fan_in_mean:.1f}/{e.fan_in_max}, {e.method.value}"
        if e.edge_class is EdgeClass.ALL_TO_ALL:
            bar = f"bar_{p}_{c}"
            lines.append(f"  {quote(bar)} [shape=diamond, label={quote('all-to-all')}, fillcolor=\"#ffcdd2\"];")
            lines.append(f"  {quote(_node(p, shown[p][-1]))} -> {quote(bar)} [color={quote(color)}, "
                         f"label={quote(f'{e.producer_grid.blocks} blocks')}];")
            lines.append(f"  {quote(bar)} -> {quote(_node(c, shown[c][0]))} [color={quote(color)}, "
                         f"label={quote(tag)}];")
            continue
        shown_p = set(shown[p])
        first = True
        hidden = 0
        for cb in shown[c]:
            for pb in e.producers_of(cb):
                if pb in shown_p:
                    attrs = f"color={quote(color)}"
                    if first:
                        attrs += f", label={quote(tag)}"
                        first = False
                    lines.append(f"  {quote(_node(p, pb))} -> {quote(_node(c, cb))} [{attrs}];")
                else:
                    hidden += 1
        if first:  # nothing drawn: say what the edge is on an invisible-ish edge
            lines.append(f"  {quote(_node(p, shown[p][0]))} -> {quote(_node(c, shown[c][0]))} "
                         f"[style=dotted, color={quote(color)}, label={quote(tag)}];")
        if hidden:
            lines.append(f"  // {hidden} dependencies on producer blocks not shown")
    lines.append("}")
    return "\n".join(lines)


def _node(kernel: int, block: int) -> str:
    return f"k{kernel}_b{block}"


def model_summary_dot(deps: ModelBlockDeps) -> str:
    """The whole model one kernel a node (its grid), one kernel edge an arrow coloured by its
    class and labelled with its fan-in: readable at any grid size, unlike sampled blocks."""
    lines = ["digraph blocks {", "  rankdir=TB; graph [fontname=\"Helvetica\", fontsize=11];",
             "  node [shape=box, style=\"rounded,filled\", fillcolor=\"#f4f4f4\", fontname=\"Helvetica\", fontsize=10];",
             "  edge [fontname=\"Helvetica\", fontsize=9, penwidth=1.6];"]
    counts = ", ".join(f"{n} {c.value}" for c, n in deps.class_counts().items() if n)
    title = (f"{deps.model} ({deps.target}): block dependencies between kernels\n"
             f"{len(deps.kernels)} kernels, {len(deps.edges)} edges: {counts}")
    lines.append(f"  label={quote(title)}; labelloc=t; fontsize=14;")
    lines.append(f"  legend [shape=plaintext, style=\"\", label=<{_legend(deps.edges, kernels=True)}>];")
    for ref, grid in zip(deps.kernels, deps.grids):
        lines.append(f"  {quote(f'k{ref.index}')} [label={quote(f'{ref.describe()}{chr(10)}{ref.func}{chr(10)}{grid.describe()}')}];")
    for e in deps.edges:
        tag = f"{e.edge_class.value}\nfan-in {e.fan_in_mean:.1f}/{e.fan_in_max}"
        lines.append(f"  {quote(f'k{e.producer.index}')} -> {quote(f'k{e.consumer.index}')} "
                     f"[color={quote(_CLASS_COLOR[e.edge_class])}, fontcolor={quote(_CLASS_COLOR[e.edge_class])}, "
                     f"label={quote(tag)}];")
    lines.append("}")
    return "\n".join(lines)


# --- one edge of big grids, summarised ----------------------------------------------------

_HEAT_MAX_CELLS = 32  # per side of a heat map: larger grids are binned (mean per bin)


def edge_summary_dot(deps: ModelBlockDeps, edge: EdgeBlockMap) -> str:
    """One edge without a node per block: the producer grid coloured by fan-out (consumer
    blocks reading each block), the consumer grid by fan-in (producer blocks each needs), the
    consumer blocks in classes by fan-in with their block ranges and an example, a legend."""
    fan_in = np.asarray(edge.fan_in)
    fan_out = np.bincount(edge.indices, minlength=edge.producer_grid.blocks) if len(edge.indices) \
        else np.zeros(edge.producer_grid.blocks, dtype=int)
    color = _CLASS_COLOR[edge.edge_class]
    p, c = edge.producer, edge.consumer
    title = (f"{deps.model} ({deps.target}): block dependencies of {p.describe()} -> {c.describe()}\n"
             f"{edge.edge_class.value}: fan-in mean {edge.fan_in_mean:.1f}, max {edge.fan_in_max} of "
             f"{edge.producer_grid.blocks} producer blocks; {edge.method.value} map; summarised "
             f"({edge.consumer_grid.blocks} consumer blocks)")
    lines = ["digraph blocks {", "  rankdir=LR; graph [fontname=\"Helvetica\", fontsize=11];",
             "  node [shape=plaintext, fontname=\"Helvetica\", fontsize=9];",
             f"  label={quote(title)}; labelloc=t; fontsize=14;",
             f"  producer [label=<{_grid_table(f'producer {p.describe()} {p.func}', edge.producer_grid, fan_out, 'fan-out')}>];",
             f"  consumer [label=<{_grid_table(f'consumer {c.describe()} {c.func}', edge.consumer_grid, fan_in, 'fan-in')}>];",
             f"  producer -> consumer [color={quote(color)}, penwidth=2, label={quote(edge.edge_class.value)}];",
             f"  classes [label=<{_classes_table(edge)}>];",
             "  consumer -> classes [style=invis];",
             f"  legend [label=<{_legend([edge], heat=True)}>];",
             "}"]
    return "\n".join(lines)


def fan_in_classes(edge: EdgeBlockMap) -> list[tuple[int, list[tuple[int, int]], int]]:
    """(fan-in, consumer block ranges [(first, last)], an example block) per fan-in value,
    most blocks first.

        >>> fan_in_classes(edge_of_a_3_tap_stencil_over_16_blocks)
        [(3, [(1, 14)], 1), (2, [(0, 0), (15, 15)], 0)]
    """
    fan_in = np.asarray(edge.fan_in)
    out = []
    for value in np.unique(fan_in):
        blocks = np.flatnonzero(fan_in == value)
        out.append((int(value), _runs(blocks), int(blocks[0])))
    return sorted(out, key=lambda t: -sum(b - a + 1 for a, b in t[1]))


def _runs(blocks) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for b in (int(x) for x in blocks):
        if runs and runs[-1][1] == b - 1:
            runs[-1] = (runs[-1][0], b)
        else:
            runs.append((b, b))
    return runs


def _ranges_text(runs: list[tuple[int, int]], prefix: str, limit: int = 4) -> str:
    parts = [f"{prefix}{a}" if a == b else f"{prefix}{a}–{prefix}{b}" for a, b in runs[:limit]]
    return ", ".join(parts) + (f", … ({len(runs) - limit} more ranges)" if len(runs) > limit else "")


def _classes_table(edge: EdgeBlockMap) -> str:
    rows = ['<TR><TD COLSPAN="3"><B>consumer blocks by fan-in</B></TD></TR>',
            "<TR><TD><I>fan-in</I></TD><TD><I>consumer blocks</I></TD><TD><I>example: needs</I></TD></TR>"]
    classes = fan_in_classes(edge)
    for value, runs, example in classes[:8]:
        count = sum(b - a + 1 for a, b in runs)
        needs = _ranges_text(_runs(edge.producers_of(example)), "p")
        rows.append(f"<TR><TD>{value}</TD><TD ALIGN=\"LEFT\">{count}: {_html(_ranges_text(runs, 'c'))}</TD>"
                    f"<TD ALIGN=\"LEFT\">c{example} ← {_html(needs) or 'none'}</TD></TR>")
    if len(classes) > 8:
        rows.append(f'<TR><TD COLSPAN="3">… {len(classes) - 8} more fan-in values</TD></TR>')
    return '<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="3">' + "".join(rows) + "</TABLE>"


def _grid_table(title: str, grid, values: np.ndarray, what: str) -> str:
    """A kernel's grid as a heat map of `values` per block (binned past _HEAT_MAX_CELLS a side)."""
    shape = grid.shape
    n = len(values)
    cols = shape[-1] if len(shape) > 1 else min(n, max(8, int(np.ceil(np.sqrt(n)))))  # 1-D: wrapped
    rows = -(-n // max(cols, 1))
    table = np.pad(values.astype(float), (0, rows * cols - n), constant_values=np.nan).reshape(rows, cols)
    bin_r, bin_c = -(-rows // _HEAT_MAX_CELLS), -(-cols // _HEAT_MAX_CELLS)
    if bin_r > 1 or bin_c > 1:
        pad_r, pad_c = -rows % bin_r, -cols % bin_c
        padded = np.pad(table, ((0, pad_r), (0, pad_c)), constant_values=np.nan)
        table = np.nanmean(padded.reshape(padded.shape[0] // bin_r, bin_r, padded.shape[1] // bin_c, bin_c),
                           axis=(1, 3))
    top = float(np.nanmax(table)) if table.size else 0.0
    low = float(values.min()) if n else 0.0
    binned = f"; each cell {bin_r}×{bin_c} blocks (mean)" if bin_r > 1 or bin_c > 1 else ""
    wrapped = f"; drawn {cols} a row" if len(shape) <= 1 and rows > 1 else ""
    head = (f"<B>{_html(title)}</B><BR/>{_html(grid.describe())}"
            f"<BR/>{what} per block: {low:.0f}–{float(values.max()) if n else 0:.0f}{_html(binned + wrapped)}")
    body = "".join("<TR>" + "".join(f'<TD BGCOLOR="{_heat(v, top)}" BORDER="1" COLOR="#bbbbbb" FIXEDSIZE="TRUE" '
                                    'WIDTH="12" HEIGHT="12"></TD>' if v == v else "<TD></TD>" for v in row)
                   + "</TR>" for row in table)
    width, height = table.shape[1] * 13 + 1, table.shape[0] * 13 + 1
    heat = (f'<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="1" CELLPADDING="0" FIXEDSIZE="TRUE" WIDTH="{width}" '
            f'HEIGHT="{height}">{body}</TABLE>')
    return f'<TABLE BORDER="0" CELLBORDER="0"><TR><TD>{head}</TD></TR><TR><TD>{heat}</TD></TR></TABLE>'


def _heat(value: float, top: float) -> str:
    """White (0) to dark blue (the largest value)."""
    t = 0.0 if top <= 0 or value != value else min(value / top, 1.0)
    r, g, b = (int(round(255 + (c - 255) * t)) for c in (0x0d, 0x47, 0xa1))
    return f"#{r:02x}{g:02x}{b:02x}"


def _legend(edges, heat: bool = False, kernels: bool = False) -> str:
    present = {e.edge_class for e in edges}
    rows = ['<TR><TD COLSPAN="2"><B>legend</B></TD></TR>']
    for cls, color in _CLASS_COLOR.items():
        mark = " (this graph)" if cls in present else ""
        rows.append(f'<TR><TD BGCOLOR="{color}" WIDTH="20"> </TD><TD ALIGN="LEFT">{cls.value}{mark}</TD></TR>')
    if kernels:
        rows.append('<TR><TD>#3</TD><TD ALIGN="LEFT">kernel 3: its first op, PrimFunc, grid of blocks</TD></TR>')
        rows.append('<TR><TD>3/8</TD><TD ALIGN="LEFT">fan-in: producer blocks a consumer block needs, mean / max '
                    '(blocks: workbench blockdeps --edge)</TD></TR>')
    elif heat:
        rows.append(f'<TR><TD BGCOLOR="{_heat(0, 1)}" WIDTH="20"> </TD><TD ALIGN="LEFT">0 (white)</TD></TR>')
        rows.append(f'<TR><TD BGCOLOR="{_heat(1, 1)}" WIDTH="20"> </TD><TD ALIGN="LEFT">the largest value</TD></TR>')
    else:
        rows.append('<TR><TD>b3</TD><TD ALIGN="LEFT">block 3 of a kernel (boxes: kernels)</TD></TR>')
        rows.append('<TR><TD>◆</TD><TD ALIGN="LEFT">all-to-all: every consumer block waits for all producer '
                    "blocks</TD></TR>")
    return '<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="2" CELLPADDING="3">' + "".join(rows) + "</TABLE>"


def _html(text: str) -> str:
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
