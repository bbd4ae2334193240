"""GraphView: the canvas, a details line, the `/` search box, and a side panel with the
selected node's properties over a legend of every colour and mark the canvas draws."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Input, Static

from engine.graphviz import format_shape
from workbench.present.opgraph import graph_ports, op_labels, op_properties, port_properties
from workbench.tui import graph_canvas as marks
from workbench.tui.graph_canvas import GraphCanvas, is_port
from workbench.tui.layout import Detail

_DETAIL_NAMES = {Detail.FULL: "full labels", Detail.OP: "op only", Detail.COMPACT: "compact"}


def search_graph(graph, query: str) -> list[str]:
    """Op ids whose id, label, op type or a tensor shape contains `query` (case-insensitive),
    in graph order. `1x64` matches shapes written 1x64x56x56."""
    q = query.strip().lower()
    if not q:
        return []
    hits = []
    for n in graph.nodes:
        shapes = [format_shape(t.shape) for t in n.outputs + n.inputs]
        if any(q in s.lower() for s in (n.id, n.label, n.op, *shapes)):
            hits.append(n.id)
    return hits


def legend() -> Text:
    """Every colour and mark of the canvas, one line each."""
    def swatch(color: str, what: str) -> tuple:
        return (" x ", f"black on {color}"), f" {what}\n"

    return Text.assemble(
        ("legend\n", "bold"),
        ("╭─╮", "#5c9bd1"), " op: type, output shape; +Nw: N weights\n",
        ("╭─╮", marks.PORT_COLOR), " graph input / output tensor\n",
        ("┌┄┐", marks.KERNEL_COLOR), " kernel kN: the ops one kernel computes\n",
        ("┌┄┐", marks.DECISION_COLOR), " fusion decision dN (3 Fusion)\n",
        *swatch(marks.SELECTED_BG, "selected; its edges amber"),
        *swatch(marks.HIGHLIGHT_BG, "the decision under the cursor in 3"),
        *swatch(marks.MATCH_BG, "search match (/ n N)"),
        ("█", "#2e7d32"), ("█", "#f9a825"), ("█", "#e53935"), " kernel time after c/C: least → most\n",
        ("─▼", "#8a8a8a"), " data flows down, one arrow per input;\n",
        ("┬ ┼", "#8a8a8a"), " an output forks; edges crossing\n",
        ("[Op]", "#5c9bd1"), " an op, zoomed out (- twice)")


class GraphView(Vertical):
    """Owns search (`/`, `n`, `N`) and shows what the canvas has selected."""

    BINDINGS = [
        Binding("slash", "search", "Search"),
        Binding("n", "next_match(1)", "Next match"),
        Binding("N", "next_match(-1)", "Prev match", show=False),
    ]

    DEFAULT_CSS = """
    GraphView { height: 1fr; }
    GraphView #graph-main { height: 1fr; }
    GraphView #graph-left { width: 1fr; }
    GraphView GraphCanvas { height: 1fr; }
    GraphView #side { width: 52; border-left: solid $primary 40%; padding: 0 1; }
    GraphView #properties { height: auto; margin-bottom: 1; }
    GraphView #legend { height: auto; }
    GraphView #details { height: 2; padding: 0 1; background: $boost; }
    GraphView #search { display: none; }
    GraphView #search.open { display: block; }
    """

    class SearchChanged(Message):
        def __init__(self, query: str, matches: list[str]) -> None:
            super().__init__()
            self.query, self.matches = query, matches

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.graph = None
        self.matches: list[str] = []
        self.match_index = -1
        self.query = ""
        self._op_ms: dict[str, float] = {}
        self._kernel_of: dict[str, str] = {}
        self._kernel_ids: dict[str, str] = {}  # op -> "k27 fused_conv2d_add_relu" (the kernel computing it)
        self._labels: dict[str, str] = {}
        self._ports: dict = {}
        self._scene_note = ""

    def compose(self) -> ComposeResult:
        with Horizontal(id="graph-main"):
            with Vertical(id="graph-left"):
                yield GraphCanvas(id="canvas")
                yield Static("opening model…", id="details")
                yield Input(placeholder="search ops by name, op type or shape (enter: go, esc: close)",
                            id="search")
            with VerticalScroll(id="side"):
                yield Static("properties: select a node (click, ] / [, / search)", id="properties")
                yield Static(legend(), id="legend")

    @property
    def canvas(self) -> GraphCanvas:
        return self.query_one(GraphCanvas)

    def set_graph(self, graph) -> None:
        self.graph = graph
        self._summary = graph.summary()
        self._labels = op_labels(graph)
        self._ports = {p.id: p for p in graph_ports(graph)}
        self.canvas.set_graph(graph)
        self._update_details()

    def set_kernels(self, kernels) -> None:
        """The kernels computing the ops (scheduled, or as built): `k27 func` in the properties."""
        self._kernel_ids = {op: f"k{k.index} {k.func}" for k in kernels for op in k.ops}
        self._update_details()

    def set_timing(self, op_ms: dict[str, float], kernel_of: dict[str, str]) -> None:
        self._op_ms, self._kernel_of = op_ms, kernel_of
        self.canvas.set_heat(op_ms)
        self._update_details()

    # --- search --------------------------------------------------------------------------

    def action_search(self) -> None:
        box = self.query_one("#search", Input)
        box.add_class("open")
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.run_search(event.value)
        self._close_search()

    def on_key(self, event) -> None:
        box = self.query_one("#search", Input)
        if event.key == "escape" and box.has_focus:
            event.stop()
            self._close_search()

    def _close_search(self) -> None:
        self.query_one("#search", Input).remove_class("open")
        self.canvas.focus()

    def run_search(self, query: str) -> list[str]:
        self.query = query
        self.matches = search_graph(self.graph, query) if self.graph else []
        self.match_index = -1
        self.canvas.set_matches(self.matches)
        self.post_message(self.SearchChanged(query, self.matches))
        if self.matches:
            self.action_next_match(1)
        else:
            self.notify(f"no op matches '{query}'", severity="warning")
            self._update_details()
        return self.matches

    def action_next_match(self, step: int) -> None:
        if not self.matches:
            self.notify("no search results: press / to search", severity="information")
            return
        self.match_index = (self.match_index + step) % len(self.matches)
        target = self.matches[self.match_index]
        if self.canvas.focused_view and self.canvas.scene and target not in self.canvas.scene.layout.boxes:
            self.canvas.action_unfocus()
        self.canvas.selected = target

    # --- details line --------------------------------------------------------------------

    def on_graph_canvas_node_selected(self, event: GraphCanvas.NodeSelected) -> None:
        self._update_details()

    def on_graph_canvas_scene_changed(self, event: GraphCanvas.SceneChanged) -> None:
        focus = f"  focus: {event.nodes} ops (esc: whole graph)" if event.focused else ""
        self._scene_note = f"zoom: {_DETAIL_NAMES[event.detail]}{focus}"
        self._update_details()

    def _update_details(self) -> None:
        if self.graph is None:
            return
        s = self._summary
        search = ""
        if self.matches:
            search = f"  search '{self.query}': {self.match_index + 1}/{len(self.matches)} (n/N)"
        head = (f"{self.graph.model}: {s.ops} ops, {s.edges} edges, depth {s.depth}, "
                f"{_count(sum(p.is_input for p in self._ports.values()), 'input')}, "
                f"{_count(sum(not p.is_input for p in self._ports.values()), 'output')}   {self._scene_note}{search}")
        node_id = self.canvas.selected
        if node_id is None:
            body = "select: click a node, ] / [ next/prev, / search   zoom: + / -   pan: arrows, hjkl, drag"
            properties = Text("properties: select a node (click, ] / [ next/prev, / search)", style="dim")
        elif is_port(node_id):
            port = self._ports.get(node_id)
            body = Text.assemble((node_id, "bold"), f"  {format_shape(port.shape)} {port.dtype}" if port else "")
            properties = _figures_text(port_properties(port)) if port else Text(node_id)
        else:
            n = self.graph.node(node_id)
            ins = ", ".join(format_shape(t.shape) + ("ᶜ" if t.constant else "") for t in n.inputs)
            outs = ", ".join(format_shape(t.shape) for t in n.outputs)
            kernel = self._kernel_ids.get(node_id, "")
            timing = f"  {kernel}" if kernel else ""
            if node_id in self._op_ms:
                timing = f"  kernel {kernel or self._kernel_of.get(node_id, '?')}: {self._op_ms[node_id]:.3f} ms"
            body = Text.assemble((n.op, "bold"), f" {self._labels.get(n.id, n.label)} ({n.id})  in {ins} -> "
                                 f"out {outs}  {n.flops / 1e6:.1f} MFLOP  level {n.level}{timing}")
            properties = _figures_text(op_properties(self.graph, node_id, kernel, self._op_ms.get(node_id)))
        self.query_one("#details", Static).update(Text.assemble(head, "\n", body))
        self.query_one("#properties", Static).update(properties)


def _figures_text(rows) -> Text:
    text = Text.assemble(("properties\n", "bold"))
    for name, value in rows:
        text.append(f"{name}: ", style="dim")
        text.append(f"{value}\n")
    text.rstrip()
    return text


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
