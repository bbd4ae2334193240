"""`workbench inspect`: the operator graph's facts, as text, JSON or SVG."""

from __future__ import annotations

import json

from engine.graphviz import format_shape, operator_graph_dot, render_svg
from workbench.args import session_from_args
from workbench.present.opgraph import graph_ports, opgraph_legend, opgraph_title


def register(sub, model_cmd) -> None:
    p = model_cmd("inspect", "print the operator graph's facts")
    p.add_argument("--json", action="store_true", help="print the graph as JSON")
    p.add_argument("--svg", metavar="FILE", help="write the graph as an SVG laid out by Graphviz")
    p.set_defaults(run=inspect)


def inspect(args) -> int:
    session = session_from_args(args)
    graph = session.graph
    if args.svg:
        dot = operator_graph_dot(graph, title=opgraph_title(graph), legend=opgraph_legend(), ports=graph_ports(graph))
        path = render_svg(dot, args.svg)
    if args.json:
        print(json.dumps(graph.to_json(), indent=1))
        return 0
    s = graph.summary()
    model = session.model
    print(f"model        {model.name}  ({model.source})")
    print("inputs       " + ", ".join(f"{i.name}: {format_shape(i.shape)} {i.dtype}" for i in model.inputs))
    print(f"operators    {s.ops}   edges {s.edges}   depth {s.depth}   max width {s.max_width}")
    print(f"work         {s.total_flops / 1e9:.3f} GFLOP")
    if s.folded_constants or model.weights_replaced:
        print(f"constants    {s.folded_constants} constant ops folded, "
              f"{model.weights_replaced} ConstantOfShape weights replaced by seeded random ones")
    if model.upgraded_from is not None:
        print(f"opset        ai.onnx {model.upgraded_from} upgraded to {model.upgraded_to} by onnx's version converter "
              "(onnxruntime runs no older opset)")
    if model.folded_nodes:
        print(f"shape ops    {model.folded_nodes} shape-arithmetic nodes folded into constants "
              "(verified against the model as given)")
    print("op histogram " + ", ".join(f"{op} {n}" for op, n in s.histogram))
    print("widest parallel levels:")
    for level, ops in s.widest_levels:
        names = ", ".join(f"{graph.node(o).label} ({graph.node(o).op})" for o in ops[:8])
        more = f", +{len(ops) - 8} more" if len(ops) > 8 else ""
        print(f"  level {level:>3}  width {len(ops)}: {names}{more}")
    if args.svg:
        print(f"svg          {path}")
    return 0
