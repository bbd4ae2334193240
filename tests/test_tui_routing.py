"""Edges of the graph canvas: routed around node boxes and cluster titles, into clusters only
to reach a member, each ending in its own arrow just above the node it feeds."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.session import Session
from workbench.tui.layout import ClusterSpec, Detail, layout_graph, title_text
from workbench.tui.raster import Cell, decode, rasterise
from workbench.tui.synthetic import synthetic_graph

SAMPLES = Path(__file__).resolve().parent.parent / "sample_models"


def _inside(box, x, y) -> bool:
    return box.x <= x < box.x + box.w and box.y <= y < box.y + box.h


def _on_border(box, x, y) -> bool:
    return _inside(box, x, y) and (x in (box.x, box.x + box.w - 1) or y in (box.y, box.y + box.h - 1))


def check_routes(layout) -> None:
    """Every rule the router keeps, checked cell by cell."""
    arrows = {}
    for src, dst, path in layout.edges:
        where = f"{src} -> {dst}"
        assert path, where
        for (x0, y0), (x1, y1) in zip(path, path[1:]):
            assert abs(x1 - x0) + abs(y1 - y0) == 1, f"{where}: a gap at {(x0, y0)}"
        s, d = layout.boxes[src], layout.boxes[dst]
        assert path[0] == (path[0][0], s.y + s.h) and s.x <= path[0][0] < s.x + s.w, f"{where}: not from under {src}"
        ax, ay = path[-1]
        assert ay == d.y - 1 and d.x <= ax < d.x + d.w, f"{where}: the arrow is not on top of {dst}"
        assert (ax, ay) not in arrows, f"{where}: shares its arrow with {arrows[(ax, ay)]}"
        arrows[(ax, ay)] = where
        for x, y in path:
            for node, box in layout.boxes.items():
                assert not _inside(box, x, y), f"{where}: runs through {node} at {(x, y)}"
        for spec, box in layout.clusters:
            title = {(box.x + k, box.y) for k in range(1, len(title_text(spec, layout.detail)) + 4)}
            assert not title & set(path), f"{where}: runs through the title of {spec.label}"
            crossings = sum(1 for x, y in path if _on_border(box, x, y))
            must = (src in spec.members) != (dst in spec.members)
            assert crossings == (1 if must else 0), f"{where}: crosses {spec.label}'s border {crossings} times"


@pytest.fixture(scope="module")
def graph():
    return synthetic_graph(40)


def _clusters(graph):
    ids = [n.id for n in graph.nodes]
    return (ClusterSpec("k0 k0_conv", tuple(ids[1:3])), ClusterSpec("d0 horizontal", tuple(ids[1:6]), "group"),
            ClusterSpec("k5 k5_conv", tuple(ids[7:9])))


@pytest.mark.parametrize("detail", list(Detail))
def test_routes_keep_out_of_boxes_and_titles_with_and_without_clusters(graph, detail):
    with_clusters = layout_graph(graph, detail, _clusters(graph), ports=True)
    assert len(with_clusters.clusters) == 3
    check_routes(with_clusters)
    check_routes(layout_graph(graph, detail, (), ports=True))  # `b`: clusters off


def test_clusters_contain_their_members_with_room_and_do_not_touch(graph):
    layout = layout_graph(graph, Detail.FULL, _clusters(graph), ports=True)
    for spec, box in layout.clusters:
        for m in spec.members:
            b = layout.boxes[m]
            assert box.x < b.x - 1 and b.x + b.w < box.x + box.w - 1, f"{m} touches {spec.label}"
            assert box.y < b.y - 1 and b.y + b.h < box.y + box.h - 1, f"{m} touches {spec.label}"
    (_, a), (_, b) = [c for c in layout.clusters if c[0].label != "d0 horizontal"]
    assert a.x + a.w <= b.x or b.x + b.w <= a.x or a.y + a.h <= b.y or b.y + b.h <= a.y


def test_each_projection_of_attention_has_its_own_arrow_into_qk_matmul():
    """mha_block: q and k reach attn/qk_matmul on two arrows that lead back to their transposes."""
    graph = Session(str(SAMPLES / "mha_block.onnx")).graph
    by_label = {n.label: n.id for n in graph.nodes}
    qk = by_label["attn/qk_matmul"]
    kernel = ClusterSpec("k6 fused_matmul1_multiply", (qk, by_label["attn/scale"]))
    layout = layout_graph(graph, Detail.FULL, (kernel,), ports=True)
    check_routes(layout)
    grid = rasterise(layout)
    into = {}
    for index, (src, dst, path) in enumerate(layout.edges):
        if dst == qk:
            ch, value = grid.cell(*path[-1])
            assert ch == "▼" and decode(value) == (Cell.ARROW, index)
            into[graph.node(src).label] = path
    assert set(into) == {"q_proj/transpose", "k_proj/transpose"}
    q, k = into.values()
    assert not set(q) & set(k)  # no cell in common: each arrow traces back to one producer
