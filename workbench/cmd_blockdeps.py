"""`workbench blockdeps`: block-level dependencies between the kernels of a scheduled model."""

from __future__ import annotations

import json

from engine.blockdeps import (DEFAULT_FEW_BOUND, EdgeBlockMap, Method, ModelBlockDeps,
                              analyze_edge, analyze_model, block_graph_dot, resolve_edge)
from engine.graphviz import render_svg
from workbench.cli import positive_int
from workbench.session_args import session_from_args


def register(sub, model_cmd) -> None:
    p = model_cmd("blockdeps", "block-level dependencies between kernels (BlockDepend)")
    p.add_argument("--target", choices=["llvm", "cuda"], default="llvm",
                   help="schedules to analyse: llvm (blocks = outer parallel loop chunks) or "
                        "cuda (dlight, blocks = blockIdx)")
    p.add_argument("--arch", help="target arch (cuda: sm_90 default, sm_80, or a tag)")
    p.add_argument("--edge", metavar="PRODUCER:CONSUMER",
                   help="one edge; kernels by index (#3), PrimFunc, var or op label (fire2/squeeze1x1)")
    p.add_argument("--method", choices=[m.value for m in Method], default="auto",
                   help="fast (boxes), exact (element owners), auto (exact where boxes over-approximate)")
    p.add_argument("--few", type=positive_int, default=DEFAULT_FEW_BOUND,
                   help=f"largest fan-in called one-to-few (default {DEFAULT_FEW_BOUND})")
    p.add_argument("--blocks", type=positive_int, default=None,
                   help="consumer blocks to list with --edge (default 8); SVG blocks per kernel")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--svg", metavar="FILE", help="write the block graph (sampled) as SVG")
    p.set_defaults(run=blockdeps)


def blockdeps(args) -> int:
    session = session_from_args(args)
    scheduled = session.scheduled(args.target, args.arch)
    labels = {n.id: n.label for n in session.graph.nodes}
    method = Method(args.method)
    if args.edge:
        # Resolve names on the fast analysis of all edges (cheap), then redo the chosen one.
        fast = analyze_model(scheduled, Method.FAST, args.few, labels=labels)
        chosen = resolve_edge(fast, args.edge)
        edge = analyze_edge(scheduled, chosen.producer.index, chosen.consumer.index, method, args.few, labels)
        deps = fast
        if args.svg:
            path = render_svg(block_graph_dot(deps, edge=edge, max_blocks=args.blocks), args.svg)
        if args.json:
            print(json.dumps(edge_json(edge, detail=True), indent=1))
            return 0
        print(edge_line(edge))
        print_edge_detail(edge, args.blocks or 8)
        if args.svg:
            print(f"svg        {path}")
        return 0
    deps = analyze_model(scheduled, method, args.few, labels=labels)
    if args.svg:
        path = render_svg(block_graph_dot(deps, max_blocks=args.blocks), args.svg)
    if args.json:
        print(json.dumps(model_json(deps), indent=1))
        return 0
    print(f"model {deps.model}  target {deps.target}  {len(deps.kernels)} kernels  "
          f"{len(deps.edges)} edges  method {method.value} (fan-in: mean/max producer blocks per consumer block)")
    for e in deps.edges:
        print(edge_line(e))
    print_summary(deps)
    if args.svg:
        print(f"svg        {path}")
    return 0


def edge_line(e: EdgeBlockMap) -> str:
    return (f"{e.producer.describe()} -> {e.consumer.describe()}  grids {e.producer_grid.blocks} -> "
            f"{e.consumer_grid.blocks}  {e.edge_class.value}  fan-in {e.fan_in_mean:.2f}/{e.fan_in_max}  "
            f"{e.method.value}" + (f"  ({'; '.join(e.notes)})" if e.notes else ""))


def print_edge_detail(e: EdgeBlockMap, n: int) -> None:
    print(f"producer   {e.producer.func} ({e.producer.var})  grid {e.producer_grid.describe()}")
    print(f"consumer   {e.consumer.func} ({e.consumer.var})  grid {e.consumer_grid.describe()}")
    print(f"pairs      {e.block_pairs} of {e.producer_grid.blocks * e.consumer_grid.blocks}  "
          f"fan-out max {e.fan_out_max}  element deps {e.element_deps}")
    print(f"early      {e.early_blocks} of {e.consumer_grid.blocks} consumer blocks could start "
          f"before the producer's last block ({e.early_fraction:.0%})")
    last = e.earliest_start()
    step = max(1, e.consumer_grid.blocks // n)
    for c in list(range(0, e.consumer_grid.blocks, step))[:n]:
        prods = e.producers_of(c)
        shown = ", ".join(str(p) for p in prods[:12]) + (f", ... ({len(prods)})" if len(prods) > 12 else "")
        print(f"  block {c:>5} <- [{shown}]  starts after producer block {last[c]}")


def print_summary(deps: ModelBlockDeps) -> None:
    s, par = deps.simplification, deps.parallelism
    counts = ", ".join(f"{c.value} {n}" for c, n in deps.class_counts().items())
    methods = ", ".join(f"{m.value} {n}" for m, n in deps.method_counts().items())
    print(f"classes    {counts}")
    print(f"methods    {methods}")
    print(f"simplify   {s.kernel_edges} kernel edges (barriers): {s.barriers_relaxed} need not wait "
          f"for the whole producer; {s.chain_edges} one-to-one/few edges form {s.chains} block-local "
          f"chains over {s.kernels_in_chains} kernels")
    print(f"           block pairs ordered by barriers {s.implied_block_pairs}, needed "
          f"{s.needed_block_pairs}, removed {s.removed_block_pairs}; "
          f"{s.element_deps} element deps {'(exact)' if s.element_deps_exact else '(upper bound)'} "
          f"summarised by {s.needed_block_pairs} block edges; block graph {s.graph_nodes} nodes, "
          f"{s.graph_edges} edges")
    not_all = [x for x in par.early]
    frac = (sum(x.early_blocks for x in not_all) / max(sum(x.consumer_blocks for x in not_all), 1))
    print(f"parallel   {len(par.independent_pairs)} independent kernel pairs (could share one launch); "
          f"{par.early_blocks} consumer blocks on {len(not_all)} not-all-to-all edges could start "
          f"before their producer ends ({frac:.0%})")
    for n in deps.notes:
        print(f"note       {n}")


def edge_json(e: EdgeBlockMap, detail: bool = False) -> dict:
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


def _ref(k) -> dict:
    return {"index": k.index, "func": k.func, "var": k.var, "ops": list(k.ops), "labels": list(k.labels)}


def _grid(g) -> dict:
    return {"blocks": g.blocks, "axis": g.axis.value, "dims": [[d.name, d.extent] for d in g.dims],
            "phases": g.phases}


__all__ = ["register"]
