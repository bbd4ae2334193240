"""Rasterise a Layout into a sparse character grid: each cell holds a character and a code
saying what it belongs to (a node's border or text, an edge, a cluster), so the canvas can
style cells at render time (selection, search hits, kernel-time heat) without redrawing.

    >>> grid = rasterise(layout)                      # doctest: +SKIP
    >>> grid.rows[3][10]                              # doctest: +SKIP
    ('│', 16777221)                                   # an edge cell of edge 5
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from workbench.tui.layout import Box, Detail, Layout, title_text

UP, DOWN, LEFT, RIGHT = 1, 2, 4, 8
_LINE = {UP: "│", DOWN: "│", UP | DOWN: "│", LEFT: "─", RIGHT: "─", LEFT | RIGHT: "─",
         DOWN | RIGHT: "╭", DOWN | LEFT: "╮", UP | RIGHT: "╰", UP | LEFT: "╯",
         UP | DOWN | RIGHT: "├", UP | DOWN | LEFT: "┤", DOWN | LEFT | RIGHT: "┬",
         UP | LEFT | RIGHT: "┴", UP | DOWN | LEFT | RIGHT: "┼"}
_ARROW = {DOWN: "▼", UP: "▲", RIGHT: "▶", LEFT: "◀"}
_SHIFT = 24
_MASK = (1 << _SHIFT) - 1


class Cell(enum.IntEnum):
    EMPTY = 0
    EDGE = 1
    ARROW = 2
    BORDER = 3
    TEXT = 4
    DOT = 5
    CLUSTER = 6
    CLUSTER_LABEL = 7


def code(kind: Cell, owner: int) -> int:
    return (int(kind) << _SHIFT) | owner


def decode(value: int) -> tuple[Cell, int]:
    return Cell(value >> _SHIFT), value & _MASK


@dataclass
class Grid:
    width: int
    height: int
    rows: list[dict[int, tuple[str, int]]]
    node_ids: list[str]  # node index -> op id (owner of BORDER/TEXT/DOT cells)
    edge_ends: list[tuple[str, str]]  # edge index -> (src, dst)
    cluster_kinds: list[str]  # cluster index -> kind

    def cell(self, x: int, y: int) -> tuple[str, int] | None:
        if 0 <= y < self.height:
            return self.rows[y].get(x)
        return None


def rasterise(layout: Layout) -> Grid:
    """Draw clusters, then edges, then nodes (later layers overwrite earlier ones)."""
    rows: list[dict[int, tuple[str, int]]] = [{} for _ in range(layout.height)]
    grid = Grid(layout.width, layout.height, rows, list(layout.boxes), [], [])
    for index, (spec, box) in enumerate(layout.clusters):
        grid.cluster_kinds.append(spec.kind)
        _draw_cluster(rows, box, index)
    for index, (src, dst, path) in enumerate(layout.edges):
        grid.edge_ends.append((src, dst))
        _draw_edge(rows, path, index)
    for index, (spec, box) in enumerate(layout.clusters):
        _draw_cluster_label(rows, box, title_text(spec, layout.detail), index)
    for index, node_id in enumerate(grid.node_ids):
        _draw_node(rows, layout.boxes[node_id], layout.texts.get(node_id, ()), index, layout.detail)
    for src, _, path in layout.edges:  # where an edge leaves its producer's box
        if path and layout.detail is not Detail.COMPACT:
            x, y = path[0]
            if rows[y - 1].get(x, ("", 0))[0] == "─":
                rows[y - 1][x] = ("┬", rows[y - 1][x][1])
    return grid


def _put(rows, x: int, y: int, ch: str, value: int) -> None:
    if 0 <= y < len(rows) and x >= 0:
        rows[y][x] = (ch, value)


def _draw_cluster(rows, box: Box, index: int) -> None:
    v = code(Cell.CLUSTER, index)
    x1, y1 = box.x + box.w - 1, box.y + box.h - 1
    for x in range(box.x + 1, x1):
        _put(rows, x, box.y, "┄", v)
        _put(rows, x, y1, "┄", v)
    for y in range(box.y + 1, y1):
        _put(rows, box.x, y, "┆", v)
        _put(rows, x1, y, "┆", v)
    for x, y, ch in ((box.x, box.y, "┌"), (x1, box.y, "┐"), (box.x, y1, "└"), (x1, y1, "┘")):
        _put(rows, x, y, ch, v)


def _draw_cluster_label(rows, box: Box, label: str, index: int) -> None:
    text = f" {label} "[: max(box.w - 3, 0)]
    lv = code(Cell.CLUSTER_LABEL, index)
    for k, ch in enumerate(text):
        _put(rows, box.x + 2 + k, box.y, ch, lv)


def _draw_edge(rows, path, index: int) -> None:
    """A routed path (routing.route_edges) as box-drawing lines: it leaves its producer's box
    downwards and ends in ▼ on the cell above its consumer. Where edges meet, the lines join
    (a shared fan-out trunk forks with ┬ ├ ┤, a crossing is ┼)."""
    if not path:
        return
    bits: dict[tuple[int, int], int] = {path[0]: UP}
    for (x0, y0), (x1, y1) in zip(path, path[1:]):
        if x1 > x0:
            d0, d1 = RIGHT, LEFT
        elif x1 < x0:
            d0, d1 = LEFT, RIGHT
        elif y1 > y0:
            d0, d1 = DOWN, UP
        else:
            d0, d1 = UP, DOWN
        bits[(x0, y0)] = bits.get((x0, y0), 0) | d0
        bits[(x1, y1)] = bits.get((x1, y1), 0) | d1
    v = code(Cell.EDGE, index)
    for (x, y), b in bits.items():
        if 0 <= y < len(rows) and (x, y) != path[-1]:
            old = rows[y].get(x)
            if old is not None and old[1] >> _SHIFT == Cell.EDGE:
                b |= _BITS_OF.get(old[0], 0)
            rows[y][x] = (_LINE.get(b, "·"), v)
    _put(rows, *path[-1], "▼", code(Cell.ARROW, index))


_BITS_OF = {ch: b for b, ch in _LINE.items() if b not in (UP, DOWN, LEFT, RIGHT)}


def _draw_node(rows, box: Box, lines, index: int, detail: Detail) -> None:
    if not lines:
        _put(rows, box.x, box.y, "●", code(Cell.DOT, index))
        return
    b, t = code(Cell.BORDER, index), code(Cell.TEXT, index)
    if detail is Detail.COMPACT:  # [Conv]
        _put(rows, box.x, box.y, "[", b)
        _put(rows, box.x + box.w - 1, box.y, "]", b)
        for j, ch in enumerate(lines[0][:box.w - 2]):
            _put(rows, box.x + 1 + j, box.y, ch, t)
        return
    x1, y1 = box.x + box.w - 1, box.y + box.h - 1
    for x in range(box.x + 1, x1):
        _put(rows, x, box.y, "─", b)
        _put(rows, x, y1, "─", b)
    _put(rows, box.x, box.y, "╭", b)
    _put(rows, x1, box.y, "╮", b)
    _put(rows, box.x, y1, "╰", b)
    _put(rows, x1, y1, "╯", b)
    inner = box.w - 2
    for k, line in enumerate(lines):
        y = box.y + 1 + k
        _put(rows, box.x, y, "│", b)
        _put(rows, x1, y, "│", b)
        text = line[:inner].center(inner)
        for j, ch in enumerate(text):
            _put(rows, box.x + 1 + j, y, ch, t)
