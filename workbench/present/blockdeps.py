"""Block dependencies (engine.blockdeps.facts) as lines, JSON and label/value figures.

    edge_line(e)  ->  "#0 squeeze1x1/conv -> #1 expand1x1/conv  grids 25 -> 25  one-to-one  fan-in 1.00/1  exact"
"""

from __future__ import annotations

from engine.blockdeps.facts import EdgeBlockMap, KernelGrid, KernelRef, ModelBlockDeps

Figures = tuple[tuple[str, str], ...]  # (label, value) rows of a details panel


def edge_line(e: EdgeBlockMap) -> str:
    """One edge on one line: kernels, grids, class, fan-in mean/max, method, notes."""
    return (f"{e.producer.describe()} -> {e.consumer.describe()}  grids {e.producer_grid.blocks} -> "
            f"{e.consumer_grid.blocks}  {e.edge_class.value}  fan-in {e.fan_in_mean:.2f}/{e.fan_in_max}  "
            f"{e.method.value}" + (f"  ({'; '.join(e.notes)})" if e.notes else ""))


def edge_detail_lines(e: EdgeBlockMap, n: int) -> list[str]:
    """Grids, pairs, early start, then `n` sampled consumer blocks and the producer blocks they read."""
    lines = [f"producer   {e.producer.func} ({e.producer.var})  grid {e.producer_grid.describe()}",
             f"consumer   {e.consumer.func} ({e.consumer.var})  grid {e.consumer_grid.describe()}",
             f"pairs      {e.block_pairs} of {e.producer_grid.blocks * e.consumer_grid.blocks}  "
             f"fan-out max {e.fan_out_max}  element deps {e.element_deps}",
             f"early      {e.early_blocks} of {e.consumer_grid.blocks} consumer blocks need only part of the "
             f"producer's blocks: with readiness flags they could start before it ends ({e.early_fraction:.0%})"]
    last = e.earliest_start()
    step = max(1, e.consumer_grid.blocks // n)
    for c in list(range(0, e.consumer_grid.blocks, step))[:n]:
        prods = e.producers_of(c)
        shown = ", ".join(str(p) for p in prods[:12]) + (f", ... ({len(prods)})" if len(prods) > 12 else "")
        lines.append(f"  block {c:>5} <- [{shown}]  starts after producer block {last[c]}")
    return lines


def model_lines(deps: ModelBlockDeps) -> list[str]:
    """A header, one line per edge, then the summary."""
    head = (f"model {deps.model}  target {deps.target}  {len(deps.kernels)} kernels  {len(deps.edges)} edges  "
            f"method {deps.method.value} (fan-in: mean/max producer blocks per consumer block)")
    return [head, *(edge_line(e) for e in deps.edges), *summary_lines(deps)]


def summary_lines(deps: ModelBlockDeps) -> list[str]:
    """Edge classes and methods, what the block view simplifies, the parallelism it finds."""
    s, par = deps.simplification, deps.parallelism
    counts = ", ".join(f"{c.value} {n}" for c, n in deps.class_counts().items())
    methods = ", ".join(f"{m.value} {n}" for m, n in deps.method_counts().items())
    early = par.early
    frac = sum(x.early_blocks for x in early) / max(sum(x.consumer_blocks for x in early), 1)
    return [
        f"classes    {counts}",
        f"methods    {methods}",
        f"simplify   {s.kernel_edges} kernel edges (barriers): {s.barriers_relaxed} need not wait "
        f"for the whole producer; {s.chain_edges} one-to-one/few edges form {s.chains} block-local "
        f"chains over {s.kernels_in_chains} kernels",
        f"           block pairs ordered by barriers {s.implied_block_pairs}, needed "
        f"{s.needed_block_pairs}, removed {s.removed_block_pairs}; "
        f"{s.element_deps} element deps {'(exact)' if s.element_deps_exact else '(upper bound)'} "
        f"summarised by {s.needed_block_pairs} block edges; block graph {s.graph_nodes} nodes, "
        f"{s.graph_edges} edges",
        f"parallel   {len(par.independent_pairs)} independent kernel pairs (could share one launch); "
        f"{par.early_blocks} consumer blocks on {len(early)} not-all-to-all edges could start "
        f"before their producer ends ({frac:.0%})",
        *(f"note       {n}" for n in deps.notes),
    ]


def edge_figures(e: EdgeBlockMap) -> Figures:
    """The details panel of one edge."""
    p, c = e.producer_grid.blocks, e.consumer_grid.blocks
    figures = [
        ("method", e.method.value + (" (boxes exact)" if e.boxes_exact else "")),
        ("grids", f"producer {e.producer_grid.describe()}, consumer {e.consumer_grid.describe()}"),
        ("fan-in (producer blocks per consumer block)", f"mean {e.fan_in_mean:.2f}, max {e.fan_in_max}"),
        ("fan-out max (consumer blocks per producer block)", str(e.fan_out_max)),
        ("block pairs needed / ordered by the kernel barrier", f"{e.block_pairs} / {p * c}"),
        ("consumer blocks that could start early", f"{e.early_blocks} ({e.early_fraction:.0%})"),
        ("element dependencies", str(e.element_deps)),
    ]
    if e.via_view:
        figures.append(("reads", "a reshape view of the producer's output"))
    figures.extend(("note", n) for n in e.notes)
    return tuple(figures)


def model_figures(deps: ModelBlockDeps) -> Figures:
    """The details panel of the whole model: edges, classes present, simplification."""
    s = deps.simplification
    out = [("edges", str(len(deps.edges)))]
    counts = {c: n for c, n in deps.class_counts().items() if n}
    if counts:
        out.append(("classes", ", ".join(f"{c.value} {n}" for c, n in counts.items())))
    out += [("block pairs needed / implied", f"{s.needed_block_pairs} / {s.implied_block_pairs}"),
            ("barriers relaxed", f"{s.barriers_relaxed} of {s.kernel_edges}"),
            ("block-local chains", f"{s.chains} ({s.kernels_in_chains} kernels)")]
    return tuple(out)


def edge_json(e: EdgeBlockMap, detail: bool = False) -> dict:
    """`detail`: also every consumer block's producer blocks and its earliest start."""
    out = {"producer": _ref(e.producer), "consumer": _ref(e.consumer),
           "producer_grid": _grid(e.producer_grid), "consumer_grid": _grid(e.consumer_grid),
           "class": e.edge_class.value, "method": e.method.value, "fan_in_mean": e.fan_in_mean,
           "fan_in_max": e.fan_in_max, "fan_out_max": e.fan_out_max, "block_pairs": e.block_pairs,
           "element_deps": e.element_deps, "early_blocks": e.early_blocks,
           "boxes_exact": e.boxes_exact, "via_view": e.via_view, "notes": list(e.notes)}
    if detail:
        out["producers_of"] = [list(e.producers_of(c)) for c in range(e.consumer_grid.blocks)]
        out["earliest_start"] = e.earliest_start().tolist()
    return out


def model_json(deps: ModelBlockDeps) -> dict:
    s, par = deps.simplification, deps.parallelism
    return {
        "model": deps.model, "target": deps.target, "method": deps.method.value, "few_bound": deps.few_bound,
        "kernels": [dict(_ref(k), grid=_grid(g)) for k, g in zip(deps.kernels, deps.grids)],
        "edges": [edge_json(e) for e in deps.edges],
        "class_counts": {c.value: n for c, n in deps.class_counts().items()},
        "simplification": dict(vars(s)),
        "parallelism": {"independent_pairs": [list(p) for p in par.independent_pairs],
                        "early": [dict(vars(x), fraction=x.fraction) for x in par.early]},
        "notes": list(deps.notes),
    }


def _ref(k: KernelRef) -> dict:
    return {"index": k.index, "func": k.func, "var": k.var, "ops": list(k.ops), "labels": list(k.labels)}


def _grid(g: KernelGrid) -> dict:
    return {"blocks": g.blocks, "axis": g.axis.value, "dims": [[d.name, d.extent] for d in g.dims],
            "phases": g.phases}
