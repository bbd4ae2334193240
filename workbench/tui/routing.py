"""Edge routing on the character grid: orthogonal paths that go around node boxes, cross a
cluster's border only to reach a member (once), never touch a cluster's title, and end in an
arrow just above the node they feed (each input of a node on its own column).

Graphviz places nodes and clusters; its splines hug cluster borders and, once snapped to
cells, run through them, so the canvas routes edges itself: A* over cells with a cost for
each bend and each crossing of another edge; running along another edge is allowed only for
edges from the same producer (a fan-out shares its trunk), so every arrow can be followed
back to one producer.

    >>> routes = route_edges(boxes, clusters, [("a", "b")], width, height)   # doctest: +SKIP
    >>> routes[0]                                             # doctest: +SKIP
    [(5, 4), (5, 5), (5, 6)]    # from under a's box to the arrow cell above b's
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Sequence

UP, DOWN, LEFT, RIGHT = 1, 2, 4, 8
_STEPS = ((0, -1, UP), (0, 1, DOWN), (-1, 0, LEFT), (1, 0, RIGHT))
_VERTICAL = UP | DOWN
_BEND, _CROSS, _BORDER, _SHARE, _NEAR = 3.0, 6.0, 2.0, 0.3, 3.0
_FORBIDDEN = 400.0  # what breaking a rule costs when no path keeps them all


@dataclass(frozen=True)
class Obstacles:
    """What edges must go around, cell by cell."""

    solid: dict  # (x, y) -> node id: node boxes
    near: frozenset  # the cells around each box: kept for its own edges' ends, no edge hugs a box
    titles: frozenset  # cluster title and corner cells
    hborder: dict  # (x, y) -> cluster indices on a horizontal border (crossed going up/down)
    vborder: dict  # (x, y) -> cluster indices on a vertical border (crossed going left/right)


def obstacles(boxes: dict, clusters: Sequence[tuple[frozenset, object, int]]) -> Obstacles:
    """`boxes`: node id -> Box; `clusters`: (members, Box, title length) per cluster."""
    solid = {(x, y): n for n, b in boxes.items() for y in range(b.y, b.y + b.h) for x in range(b.x, b.x + b.w)}
    near = frozenset([(x, y) for b in boxes.values() for y in (b.y - 1, b.y + b.h) for x in range(b.x, b.x + b.w)]
                     + [(x, y) for b in boxes.values() for x in (b.x - 1, b.x + b.w) for y in range(b.y, b.y + b.h)])
    titles: set = set()
    hborder: dict = {}
    vborder: dict = {}
    for index, (_, box, title) in enumerate(clusters):
        x1, y1 = box.x + box.w - 1, box.y + box.h - 1
        titles.update({(box.x, box.y), (x1, box.y), (box.x, y1), (x1, y1)})
        titles.update((x, box.y) for x in range(box.x + 1, min(box.x + title + 4, x1)))  # ' title ' from x+2
        for x in range(box.x + 1, x1):
            hborder.setdefault((x, box.y), []).append(index)
            hborder.setdefault((x, y1), []).append(index)
        for y in range(box.y + 1, y1):
            vborder.setdefault((box.x, y), []).append(index)
            vborder.setdefault((x1, y), []).append(index)
    return Obstacles(solid, near, frozenset(titles), hborder, vborder)


def route_edges(boxes: dict, clusters: Sequence[tuple[frozenset, object, int]],
                edges: Sequence[tuple[str, str]], width: int, height: int) -> list[list[tuple[int, int]]]:
    """A path of cells per edge, from the cell under its producer's box to the arrow cell
    above its consumer's; empty where an end has no box."""
    obs = obstacles(boxes, clusters)
    members = [m for m, _, _ in clusters]
    starts = {n: (b.x + b.w // 2, b.y + b.h) for n, b in boxes.items()}
    ends = _arrow_cells(boxes, edges)
    reserved = {cell: dst for (_, dst), cell in ends.items()}
    used: dict = {}  # (x, y) -> (producer, direction bits)
    order = sorted(range(len(edges)), key=lambda i: _span(boxes, *edges[i]))
    found: dict[int, list] = {}
    for i in order:
        src, dst = edges[i]
        if src not in boxes or dst not in boxes:
            found[i] = []
            continue
        may_cross = {k for k, m in enumerate(members) if (src in m) != (dst in m)}
        path = _search(starts[src], ends[(src, dst)], src, dst, obs, may_cross, used, reserved,
                       width, height)
        found[i] = path
        for (x0, y0), (x1, y1) in zip(path, path[1:]):
            d = _direction(x1 - x0, y1 - y0)
            _mark(used, (x0, y0), src, d)
            _mark(used, (x1, y1), src, _OPPOSITE[d])
    return [found[i] for i in range(len(edges))]


_OPPOSITE = {UP: DOWN, DOWN: UP, LEFT: RIGHT, RIGHT: LEFT}


def _direction(dx: int, dy: int) -> int:
    return RIGHT if dx > 0 else LEFT if dx < 0 else DOWN if dy > 0 else UP


def _mark(used: dict, cell, src: str, bits: int) -> None:
    """Record a line piece in a cell; a cell two producers cross belongs to neither (None)."""
    owner, old = used.get(cell, (src, 0))
    used[cell] = (owner if owner == src else None, old | bits)


def _span(boxes, src, dst) -> tuple:
    if src not in boxes or dst not in boxes:
        return (0, 0)
    a, b = boxes[src], boxes[dst]
    return (abs(a.y - b.y) + abs(a.x - b.x) / 2, a.y, a.x)


def _arrow_cells(boxes: dict, edges: Sequence[tuple[str, str]]) -> dict:
    """Each edge's arrow cell: above its consumer, the consumer's inputs spread over its top
    in the left-to-right order of their producers."""
    inputs: dict[str, list[str]] = {}
    for src, dst in edges:
        if src in boxes and dst in boxes and src not in inputs.setdefault(dst, []):
            inputs[dst].append(src)
    cells = {}
    for dst, srcs in inputs.items():
        b = boxes[dst]
        srcs.sort(key=lambda s: (boxes[s].x + boxes[s].w / 2, boxes[s].y))
        inner = max(b.w - 2, 1)
        for k, s in enumerate(srcs):
            x = b.x + b.w // 2 if len(srcs) == 1 else b.x + 1 + min(int((k + 0.5) * inner / len(srcs)), inner - 1)
            cells[(s, dst)] = (x, b.y - 1)
    return cells


def _search(start, goal, src, dst, obs: Obstacles, may_cross: set, used: dict, reserved: dict,
            width: int, height: int) -> list[tuple[int, int]]:
    """Cheapest cell path (A*, state = cell and heading); rules broken only at _FORBIDDEN cost."""
    gx, gy = goal
    start_state = (start[0], start[1], DOWN)
    best = {start_state: 0.0}
    came: dict = {}
    heap = [(abs(gx - start[0]) + abs(gy - start[1]), 0.0, start_state)]
    x_lo, x_hi, y_lo, y_hi = -1, width + 2, -1, height + 2
    while heap:
        _, cost, state = heapq.heappop(heap)
        x, y, heading = state
        if (x, y) == goal:
            path = [(x, y)]
            while state in came:
                state = came[state]
                path.append(state[:2])
            return path[::-1]
        if cost > best.get(state, float("inf")):
            continue
        here = used.get((x, y))
        crossing_here = here is not None and here[0] != src
        for dx, dy, d in _STEPS:
            if crossing_here and d != heading:
                continue  # no turning on another producer's edge
            nx, ny = x + dx, y + dy
            if not (x_lo <= nx < x_hi and y_lo <= ny < y_hi):
                continue
            step = _step_cost((nx, ny), d, src, dst, goal, obs, may_cross, used, reserved)
            if step is None:
                continue
            new = cost + step + (_BEND if d != heading else 0.0)
            nstate = (nx, ny, d)
            if new < best.get(nstate, float("inf")):
                best[nstate] = new
                came[nstate] = state
                heapq.heappush(heap, (new + abs(gx - nx) + abs(gy - ny), new, nstate))
    return [start, goal]


def _step_cost(cell, d: int, src: str, dst: str, goal, obs: Obstacles, may_cross: set,
               used: dict, reserved: dict) -> float | None:
    cost = 1.0
    owner = obs.solid.get(cell)
    if owner is not None:
        return None if owner in (src, dst) else cost + _FORBIDDEN
    if cell in obs.titles:
        cost += _FORBIDDEN
    if cell == goal:
        cost += 0.0 if d == DOWN else _BEND  # arrows point into their node
    elif reserved.get(cell) is not None:
        cost += _FORBIDDEN  # another edge's arrow
    elif cell in obs.near:
        cost += _NEAR
    vertical = bool(d & _VERTICAL)
    for borders, crossing in ((obs.hborder, vertical), (obs.vborder, not vertical)):
        for k in borders.get(cell, ()):
            cost += (_BORDER * (1 if vertical else 2)) if crossing and k in may_cross else _FORBIDDEN
    mine = used.get(cell)
    if mine is not None:
        owner, bits = mine
        if owner == src:
            cost = _SHARE + (cost - 1.0)
        else:
            straight_across = bits == ((LEFT | RIGHT) if vertical else _VERTICAL)
            cost += _CROSS if straight_across else _FORBIDDEN
    return cost
