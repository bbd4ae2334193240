"""Graphviz DOT of block dependencies: blocks as nodes in one cluster per kernel, for one
edge or the whole model. Big grids are sampled (at most `max_blocks` per kernel, evenly
spaced, the blocks a shown consumer block needs first) and the cluster label says so.
An all-to-all edge is drawn as one barrier node. Render with engine.graphviz.render_svg.

>>> # dot = block_graph_dot(deps, edge=deps.edges[0]); render_svg(dot, "edge.svg")
"""

from __future__ import annotations


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
    """DOT text for one edge (`edge`) or the whole model (default)."""
    edges = [edge] if edge is not None else list(deps.edges)
    cap = max_blocks or (16 if edge is not None else 6)
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
    lines.append(f"  label={quote(title)}; labelloc=t;")
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
