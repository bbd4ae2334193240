"""`workbench blockdeps`: block-level dependencies between the kernels of a scheduled model."""

from __future__ import annotations

import json

from engine.blockdeps.facts import DEFAULT_FEW_BOUND, Method
from engine.graphviz import render_svg
from workbench.args import add_target_arguments, positive_int, session_from_args
from workbench.present.blockdeps import edge_detail_lines, edge_json, edge_line, model_json, model_lines


def register(sub, model_cmd) -> None:
    p = model_cmd("blockdeps", "block-level dependencies between kernels (BlockDepend)")
    add_target_arguments(p, blocks=True)
    p.add_argument("--edge", metavar="PRODUCER:CONSUMER",
                   help="one edge; kernels by id (k3), PrimFunc, var or op label (fire2/squeeze1x1)")
    p.add_argument("--method", choices=[m.value for m in Method], default=Method.AUTO.value,
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
    edge = None
    if args.edge:
        # names resolve on the fast analysis of all edges (cheap); the chosen edge uses --method
        deps, edge = session.block_edge(args.edge, args.target, args.arch, args.method, args.few)
    else:
        deps = session.block_deps(args.target, args.arch, args.method, args.few)
    if args.svg:
        path = render_svg(session.block_graph_dot(deps, edge, args.blocks), args.svg)
    if args.json:
        print(json.dumps(edge_json(edge, detail=True) if edge else model_json(deps), indent=1))
        return 0
    print("\n".join([edge_line(edge), *edge_detail_lines(edge, args.blocks or 8)] if edge else model_lines(deps)))
    if args.svg:
        print(f"svg        {path}")
    return 0
