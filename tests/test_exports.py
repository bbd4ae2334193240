"""Exports fit for a report: the block graph of one edge of big grids summarised (classes,
ranges, heat maps, a legend), the operator graph with a title, a legend and decision boxes
around all their members (nested around the kernels they hold), the timing chart."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from engine.blockdeps.dot import block_graph_dot, fan_in_classes
from engine.blockdeps.facts import (BlockAxis, EdgeBlockMap, EdgeClass, GridDim, KernelGrid, KernelRef, Method,
                                    ModelBlockDeps)
from engine.graphviz import Box, nest_boxes, operator_graph_dot, run_dot
from engine.timing import Spread
from tests.test_timing_model import _graph
from workbench.present.timing import ChartRow, chart_totals


def _stencil(n: int = 16) -> ModelBlockDeps:
    """consumer block c reads producer blocks c-1..c+1 (a 3-tap stencil over n blocks)."""
    needs = [[p for p in (c - 1, c, c + 1) if 0 <= p < n] for c in range(n)]
    indptr = np.cumsum([0] + [len(x) for x in needs])
    grid = KernelGrid("k", BlockAxis.BLOCK_IDX, (GridDim("blockIdx.x", n),))
    p, c = KernelRef(0, "lv0", "conv_a", ("a",), ("a/conv",)), KernelRef(1, "lv1", "conv_b", ("b",), ("b/conv",))
    edge = EdgeBlockMap(p, c, grid, grid, Method.EXACT, EdgeClass.ONE_TO_FEW, indptr, np.concatenate(needs),
                        element_deps=0, few_bound=4, boxes_exact=True)
    return ModelBlockDeps("m", "cuda", Method.AUTO, 4, (p, c), (grid, grid), (edge,), None, None)


def test_fan_in_classes_group_consumer_blocks_by_how_many_producer_blocks_they_need():
    deps = _stencil(16)
    assert fan_in_classes(deps.edges[0]) == [(3, [(1, 14)], 1), (2, [(0, 0), (15, 15)], 0)]


def test_an_edge_of_big_grids_is_summarised_not_drawn_block_by_block():
    deps = _stencil(64)
    dot = block_graph_dot(deps, edge=deps.edges[0])
    assert "k0_b" not in dot  # no node per block
    assert "block dependencies of k0 a/conv -> k1 b/conv" in dot and "summarised (64 consumer blocks)" in dot
    assert "consumer blocks by fan-in" in dot and "62: c1–c62" in dot and "c1 ← p0–p2" in dot
    assert "fan-in per block: 2–3" in dot and "<B>legend</B>" in dot and "one-to-few (this graph)" in dot
    assert b"<svg" in run_dot(dot, "svg")  # Graphviz takes it
    small = block_graph_dot(_stencil(8), edge=_stencil(8).edges[0])
    assert '"k0_b3"' in small and "<B>legend</B>" in small  # a small grid keeps its blocks, and gets a legend


def test_a_whole_model_of_big_grids_is_drawn_kernel_by_kernel():
    big = block_graph_dot(_stencil(32))
    assert "between kernels" in big and "1 one-to-few" in big and "cluster_k" not in big
    assert '"k0" -> "k1"' in big and "fan-in 2.9/3" in big and "<B>legend</B>" in big
    assert b"<svg" in run_dot(big, "svg")
    assert "cluster_k1" in block_graph_dot(_stencil(8))  # small grids keep their blocks


def test_boxes_nest_and_a_box_crossing_another_is_named_not_drawn():
    tree, crossing = nest_boxes([Box("k1", ("a", "b")), Box("d0", ("a", "b", "c")), Box("d1", ("c", "d")),
                                 Box("hfused", ("a", "b"))])
    # the same ops: the later box inside the earlier, each drawn in its own style
    assert tree.children == {None: [1], 1: [0], 0: [3]} and tree.owner == {"a": 3, "b": 3, "c": 1}
    assert tree.labels[3] == "hfused" and crossing == ["d1"]


def test_operator_graph_has_a_title_a_legend_and_decisions_around_all_their_members():
    g = _graph()
    dot = operator_graph_dot(g, [Box("k0 fused", ("conv", "relu")), Box("d0 horizontal [approved]", ("conv",))],
                             title="m: operator graph", legend=[("fill", "#2e7d32", "kernel median 0 ms"),
                                                                 ("dashed", "#3a7bd5", "fused kernel")])
    assert 'label="m: operator graph"' in dot and "<B>legend</B>" in dot and "fused kernel" in dot
    outer, inner = dot.index('label="k0 fused"'), dot.index('label="d0 horizontal [approved]"')
    assert outer < inner < dot.index('"conv" [label=') and dot.index('"relu" [label=') > inner
    assert b"<svg" in run_dot(dot, "svg")


def test_a_decision_crossing_a_kernel_outlines_its_ops_and_ports_are_drawn():
    """fire_module's d1 (squeeze conv -> expand conv) crosses the kernels: its ops are outlined
    in its colour and named, not dropped; graph inputs and outputs are nodes of their own."""
    g = _graph()
    port = SimpleNamespace(id="in:x", tensor="x", shape=(1, 3, 8, 8), ops=("conv",), is_input=True)
    dot = operator_graph_dot(g, [Box("k0 fused", ("conv", "relu")), Box("d1 vertical", ("relu", "add"), "#ef6c00")],
                             ports=[port])
    assert "crossing another box, drawn as outlined ops named [id]: d1" in dot and 'subgraph cluster_1' not in dot
    relu = next(line for line in dot.splitlines() if line.strip().startswith('"relu" ['))
    assert "[d1]" in relu and 'color="#ef6c00"' in relu
    assert '"in:x" -> "conv";' in dot and "input x" in dot
    assert b"<svg" in run_dot(dot, "svg")


def test_chart_totals_carry_the_noise_of_the_speedup():
    rows = [ChartRow("a", Spread(1.0, 0.9, 1.1), Spread(0.5, 0.45, 0.55)), ChartRow("b", Spread(1.0, 1.0, 1.0), None)]
    assert chart_totals(rows, ("before", "after")) == "kernel totals: before 2.000 ms"
    assert chart_totals(rows[:1], ("before: unfused", "after: fused")) == \
        "kernel totals: before 1.000 ms, after 0.500 ms: 2.00x ±0.80 speedup"
