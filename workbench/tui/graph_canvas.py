"""GraphCanvas: the operator graph drawn as boxes and arrows in a scrolling canvas.

The layout (Graphviz) and the character grid are computed in a thread worker per level of
detail, cluster set and focus set; `render_line` styles only the visible slice of a row.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
from rich.color import Color
from rich.segment import Segment
from rich.style import Style
from textual import work
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from workbench.tui.layout import ClusterSpec, Detail, Layout, layout_graph
from workbench.tui.raster import Cell, Grid, decode, rasterise


@dataclass(frozen=True)
class Scene:
    """What is drawn: computed off the UI thread, swapped in at once."""

    key: tuple
    layout: Layout
    grid: Grid


def build_scene(graph, detail: Detail, clusters: tuple[ClusterSpec, ...],
                focus: frozenset[str] | None) -> Scene:
    layout = layout_graph(graph, detail, clusters, only=focus, ports=True)
    return Scene((detail, clusters, focus), layout, rasterise(layout))


def is_port(node_id: str | None) -> bool:
    """A graph input or output drawn as a node (present.opgraph.GraphPort ids), not an op."""
    return bool(node_id) and node_id.startswith(("in:", "out:"))


# every colour and mark the canvas draws, for the legend (GraphView shows it)
PORT_COLOR = "#43a047"
KERNEL_COLOR, DECISION_COLOR = "#3a7bd5", "#ab47bc"
SELECTED_BG, HIGHLIGHT_BG, MATCH_BG, SELECTED_EDGE = "#ffb300", "#00acc1", "#8e24aa", "#ffb300"


_COLD, _HOT = Color.parse("#2e7d32"), Color.parse("#e53935")
_MID = Color.parse("#f9a825")


def heat_color(value: float) -> Color:
    """0 -> green, 0.5 -> amber, 1 -> red."""
    value = min(max(value, 0.0), 1.0)
    if value < 0.5:
        return _blend(_COLD, _MID, value * 2)
    return _blend(_MID, _HOT, (value - 0.5) * 2)


def _blend(a: Color, b: Color, t: float) -> Color:
    ra, ga, ba = a.get_truecolor()
    rb, gb, bb = b.get_truecolor()
    return Color.from_rgb(ra + (rb - ra) * t, ga + (gb - ga) * t, ba + (bb - ba) * t)


class GraphCanvas(ScrollView, can_focus=True):
    """Pan with arrows/hjkl or the mouse, zoom with +/-, select nodes, focus a neighbourhood."""

    BINDINGS = [
        Binding("left,h", "pan(-4, 0)", "Pan", show=False),
        Binding("right,l", "pan(4, 0)", "Pan", show=False),
        Binding("up,k", "pan(0, -2)", "Pan", show=False),
        Binding("down,j", "pan(0, 2)", "Pan", show=False),
        Binding("H", "pan(-40, 0)", "Pan far", show=False),
        Binding("L", "pan(40, 0)", "Pan far", show=False),
        Binding("pageup", "pan(0, -20)", "Page up", show=False),
        Binding("pagedown", "pan(0, 20)", "Page down", show=False),
        Binding("plus,equals_sign", "zoom(-1)", "Zoom in"),
        Binding("minus", "zoom(1)", "Zoom out"),
        Binding("right_square_bracket", "step(1)", "Next node", show=False),
        Binding("left_square_bracket", "step(-1)", "Prev node", show=False),
        Binding("greater_than_sign", "follow(1)", "Successor", show=False),
        Binding("less_than_sign", "follow(-1)", "Predecessor", show=False),
        Binding("f", "focus_neighbourhood", "Focus"),
        Binding("escape", "unfocus", "Back", show=False),
        Binding("b", "toggle_clusters", "Clusters", show=False),
        Binding("home", "home", "Top", show=False),
    ]

    DEFAULT_CSS = """
    GraphCanvas { background: $surface; }
    GraphCanvas:focus { background-tint: $foreground 3%; }
    """

    detail: reactive[Detail] = reactive(Detail.FULL)
    selected: reactive[str | None] = reactive(None)
    show_clusters: reactive[bool] = reactive(True)

    class NodeSelected(Message):
        def __init__(self, node_id: str | None) -> None:
            super().__init__()
            self.node_id = node_id

    class SceneChanged(Message):
        """A new layout is on screen (level of detail, focus or clusters changed)."""

        def __init__(self, detail: Detail, focused: bool, nodes: int) -> None:
            super().__init__()
            self.detail, self.focused, self.nodes = detail, focused, nodes

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.graph = None
        self.scene: Scene | None = None
        self._scenes: dict[tuple, Scene] = {}
        self._clusters: tuple[ClusterSpec, ...] = ()
        self._focus: frozenset[str] | None = None
        self._order: list[str] = []
        self._highlight: frozenset[str] = frozenset()
        self._follow_highlight = False  # whether relayouts keep the highlighted ops in view
        self._matches: frozenset[str] = frozenset()
        self._heat: dict[str, float] = {}
        self._styles: dict[int, Style] = {}
        self._strips: dict[tuple[int, int, int], Strip] = {}
        self._drag: tuple[int, int, float, float] | None = None

    # --- data in -----------------------------------------------------------------------

    def set_graph(self, graph) -> None:
        self.graph = graph
        self._order = [n.id for n in graph.nodes]
        self._scenes.clear()
        self._relayout()

    def set_clusters(self, clusters: tuple[ClusterSpec, ...]) -> None:
        if clusters != self._clusters:
            self._clusters = clusters
            self._relayout()

    def set_heat(self, op_ms: dict[str, float]) -> None:
        top = max(op_ms.values(), default=0.0) or 1.0
        self._heat = {op: ms / top for op, ms in op_ms.items()}
        self._restyle()

    def set_highlight(self, ops, scroll: bool = True) -> None:
        """Highlight `ops`; `scroll` brings the first of them into view (not when a table merely loads)."""
        self._highlight = frozenset(ops)
        self._follow_highlight = scroll
        self._restyle()
        first = self._first_highlighted()
        if scroll and first:
            self.scroll_to_node(first)

    def _first_highlighted(self) -> str | None:
        """The highlighted op earliest in graph order (a frozenset's own order is not stable across runs)."""
        if not self._highlight or self.scene is None:
            return None
        return next((o for o in self._order if o in self._highlight and o in self.scene.layout.boxes), None)

    def set_matches(self, ops) -> None:
        self._matches = frozenset(ops)
        self._restyle()

    # --- layout --------------------------------------------------------------------------

    def _scene_key(self) -> tuple:
        clusters = self._clusters if self.show_clusters else ()
        return (self.detail, clusters, self._focus)

    def _relayout(self) -> None:
        if self.graph is None:
            return
        key = self._scene_key()
        if key in self._scenes:
            self._show(self._scenes[key])
        else:
            self._layout_worker(key)

    @work(thread=True, exclusive=True, group="layout", name="layout")
    def _layout_worker(self, key: tuple) -> None:
        scene = build_scene(self.graph, *key)
        self.app.call_from_thread(self._scene_ready, scene)

    def _scene_ready(self, scene: Scene) -> None:
        self._scenes[scene.key] = scene
        if scene.key == self._scene_key():
            self._show(scene)

    def _show(self, scene: Scene) -> None:
        kept = self._kept_in_place()
        self.scene = scene
        self._strips.clear()
        self.virtual_size = Size(scene.grid.width, scene.grid.height)
        anchor = self.selected or (self._first_highlighted() if self._follow_highlight else None)
        if kept and kept[0] in scene.layout.boxes:  # the node under the eye stays where it was on screen
            box = scene.layout.boxes[kept[0]]
            self.call_after_refresh(self.scroll_to, max(box.x - kept[1], 0), max(box.y - kept[2], 0),
                                    animate=False, immediate=True)
        elif anchor and anchor in scene.layout.boxes:  # after the new virtual size is in effect
            self.call_after_refresh(self.scroll_to_node, anchor)
        self.refresh()
        self.post_message(self.SceneChanged(scene.layout.detail, self._focus is not None,
                                            len(scene.layout.boxes)))

    def _kept_in_place(self) -> tuple[str, int, int] | None:
        """Before a relayout (clusters arrived, zoom, clusters on/off): the node to keep at its
        place on screen, and that place: the selected node when it is in view, else the node
        nearest the middle of the view (the top-left too: kernels arriving after the first
        layout must not move what is being read)."""
        if self.scene is None:
            return None
        boxes = self.scene.layout.boxes
        sx, sy = int(self.scroll_x), int(self.scroll_y)
        w, h = self.size.width, self.size.height
        node = self.selected if self.selected in boxes else None
        if node is not None:
            cx, cy = boxes[node].center
            if not (sx <= cx < sx + w and sy <= cy < sy + h):
                return None  # out of view: the selection is centred instead
        elif not boxes:
            return None
        else:
            mx, my = sx + w / 2, sy + h / 2
            node = min(boxes, key=lambda n: (abs(boxes[n].center[0] - mx) + 2 * abs(boxes[n].center[1] - my), n))
        return node, boxes[node].x - sx, boxes[node].y - sy

    def watch_detail(self) -> None:
        self._relayout()

    def watch_show_clusters(self) -> None:
        self._relayout()

    def watch_selected(self, node_id: str | None) -> None:
        self._restyle()
        if node_id is not None:
            self.scroll_to_node(node_id)
        self.post_message(self.NodeSelected(node_id))

    # --- actions -------------------------------------------------------------------------

    def action_pan(self, dx: int, dy: int) -> None:
        self.scroll_to(self.scroll_x + dx, self.scroll_y + dy, animate=False)

    def action_home(self) -> None:
        self.scroll_to(0, 0, animate=False)

    def action_zoom(self, step: int) -> None:
        self.detail = Detail(min(max(self.detail + step, Detail.FULL), Detail.COMPACT))

    def action_toggle_clusters(self) -> None:
        self.show_clusters = not self.show_clusters

    def _visible_order(self) -> list[str]:
        if self._focus is None:
            return self._order
        return [o for o in self._order if o in self._focus]

    def action_step(self, delta: int) -> None:
        order = self._visible_order()
        if not order:
            self.notify("no graph yet: the model is still opening", severity="warning")
            return
        if self.selected in order:
            self.selected = order[(order.index(self.selected) + delta) % len(order)]
        else:
            self.selected = order[0 if delta > 0 else -1]

    def action_follow(self, direction: int) -> None:
        which = "successor" if direction > 0 else "predecessor"
        if self.graph is None or self.selected is None or is_port(self.selected):
            self.notify(f"select an op first to go to its {which} (click, ] / [, or / to search)",
                        severity="warning")
            return
        dag = self.graph.dag
        near = list(dag.successors(self.selected) if direction > 0 else dag.predecessors(self.selected))
        if self._focus is not None:
            near = [n for n in near if n in self._focus]
        if near:
            self.selected = near[0]
        else:
            self.notify(f"{self.selected} has no {which}" + (" in this focus (esc: whole graph)"
                                                              if self._focus is not None else ""))

    def action_focus_neighbourhood(self, radius: int = 2) -> None:
        if self.graph is None or self.selected is None or is_port(self.selected):
            self.notify("select an op first to focus on its neighbourhood (click, ] / [, or / to search)",
                        severity="warning")
            return
        self._focus = neighbourhood(self.graph.dag, self.selected, radius)
        self._relayout()

    def action_unfocus(self) -> None:
        if self._focus is not None:
            self._focus = None
            self._relayout()
        elif self.selected is not None:  # esc: first leave the focus, then the selection
            self.selected = None

    @property
    def focused_view(self) -> bool:
        return self._focus is not None

    def scroll_to_node(self, node_id: str, animate: bool = False) -> None:
        if self.scene is None or node_id not in self.scene.layout.boxes:
            return
        cx, cy = self.scene.layout.boxes[node_id].center
        self.scroll_to(max(cx - self.size.width // 2, 0), max(cy - self.size.height // 2, 0),
                       animate=animate, immediate=True)

    # --- mouse ---------------------------------------------------------------------------

    def on_click(self, event) -> None:
        if self.scene is None:
            return
        x, y = int(event.x + self.scroll_x), int(event.y + self.scroll_y)
        hit = self.scene.layout.node_at(x, y)
        if hit is not None:
            self.selected = hit

    def on_mouse_down(self, event) -> None:
        self._drag = (event.screen_x, event.screen_y, self.scroll_x, self.scroll_y)
        self.capture_mouse()

    def on_mouse_up(self, event) -> None:
        self._drag = None
        self.release_mouse()

    def on_mouse_move(self, event) -> None:
        if self._drag is None or not event.button:
            return
        sx, sy, ox, oy = self._drag
        self.scroll_to(ox - (event.screen_x - sx), oy - (event.screen_y - sy), animate=False)

    # --- rendering -----------------------------------------------------------------------

    def _restyle(self) -> None:
        self._styles.clear()
        self._strips.clear()
        self.refresh()

    def notify_style_change(self) -> None:  # theme switch
        super().notify_style_change()
        self._restyle()

    def _style(self, value: int) -> Style:
        style = self._styles.get(value)
        if style is None:
            style = self._styles[value] = self._compute_style(value)
        return style

    def _compute_style(self, value: int) -> Style:
        kind, owner = decode(value)
        grid = self.scene.grid
        dark = self.app.current_theme.dark if self.app.current_theme else True
        muted = "#8a8a8a" if dark else "#707070"
        if kind in (Cell.EDGE, Cell.ARROW):
            src, dst = grid.edge_ends[owner]
            if self.selected in (src, dst):
                return Style(color=SELECTED_EDGE, bold=True)
            if src in self._highlight and dst in self._highlight:
                return Style(color=HIGHLIGHT_BG)
            return Style(color=muted)
        if kind in (Cell.CLUSTER, Cell.CLUSTER_LABEL):
            color = KERNEL_COLOR if grid.cluster_kinds[owner] == "kernel" else DECISION_COLOR
            return Style(color=color, italic=kind is Cell.CLUSTER_LABEL)
        if kind in (Cell.BORDER, Cell.TEXT, Cell.DOT):
            node_id = grid.node_ids[owner]
            base = "#5c9bd1" if dark else "#1f5f9e"
            if is_port(node_id):
                base = PORT_COLOR
            if node_id in self._heat:
                base = heat_color(self._heat[node_id]).name
            if node_id == self.selected:
                return Style(color="black", bgcolor=SELECTED_BG, bold=True)
            if node_id in self._highlight:
                return Style(color="black", bgcolor=HIGHLIGHT_BG, bold=kind is Cell.TEXT)
            if node_id in self._matches:
                return Style(color="white", bgcolor=MATCH_BG, bold=kind is Cell.TEXT)
            if kind is Cell.TEXT:
                return Style(color=base if node_id in self._heat or is_port(node_id) else None,
                             bold=node_id in self._heat)
            return Style(color=base)
        return Style()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        scroll_x, scroll_y = self.scroll_offset
        row_y = y + scroll_y
        key = (row_y, scroll_x, width)
        strip = self._strips.get(key)
        if strip is None:
            strip = self._render_row(row_y, scroll_x, width)
            if len(self._strips) > 4096:
                self._strips.clear()
            self._strips[key] = strip
        return strip

    def _render_row(self, row_y: int, x0: int, width: int) -> Strip:
        base = self.rich_style
        if self.scene is None or not 0 <= row_y < self.scene.grid.height:
            return Strip.blank(width, base)
        row = self.scene.grid.rows[row_y]
        segments: list[Segment] = []
        run: list[str] = []
        run_value = -1
        for x in range(x0, x0 + width):
            ch, value = row.get(x, (" ", 0))
            if value != run_value and run:
                segments.append(Segment("".join(run), self._style(run_value) if run_value else None))
                run = []
            run_value = value
            run.append(ch)
        if run:
            segments.append(Segment("".join(run), self._style(run_value) if run_value else None))
        return Strip(segments, width).apply_style(base)


def neighbourhood(dag: nx.DiGraph, node_id: str, radius: int) -> frozenset[str]:
    """Ops within `radius` hops of `node_id`, following edges either way."""
    seen = {node_id}
    frontier = {node_id}
    for _ in range(radius):
        nxt = set()
        for n in frontier:
            nxt.update(dag.successors(n))
            nxt.update(dag.predecessors(n))
        frontier = nxt - seen
        seen |= nxt
    return frozenset(seen)
