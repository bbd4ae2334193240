"""Block dependency view: kernel edges, and for the selected edge the consumer's and the
producer's block grids; moving the cursor over a consumer block lights up the producer
blocks it needs."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import DataTable, Static

from workbench.present.glossary import edge_class_meaning
from workbench.tui.facts import BlockDepsReport, BlockGrid, EdgeDeps, Unavailable
from workbench.tui.keys import ROW_KEYS

MAX_DRAWN = 4096  # blocks drawn per grid; larger grids show their first blocks


def grid_columns(grid: BlockGrid, max_cols: int = 32) -> int:
    cols = grid.cols if len(grid.dims) > 1 else grid.count
    return max(1, min(cols, max_cols))


def grid_text(grid: BlockGrid, lit: set[int], cursor: int | None, max_cols: int = 32) -> Text:
    """Blocks row-major, two cells each: cursor ◆, needed ■, others ·."""
    cols = grid_columns(grid, max_cols)
    out = Text()
    shown = min(grid.count, MAX_DRAWN)
    for i in range(shown):
        if i == cursor:
            out.append("◆ ", style="bold #ffb300")
        elif i in lit:
            out.append("■ ", style="bold #00acc1")
        else:
            out.append("· ", style="dim")
        if (i + 1) % cols == 0 and i + 1 < shown:
            out.append("\n")
    if grid.count > shown:
        out.append(f"\n… {grid.count - shown} more blocks not drawn", style="dim")
    return out


class BlockGridWidget(Widget, can_focus=True):
    """A kernel's block grid. With `selectable`, arrows/hjkl move a cursor and post
    BlockSelected."""

    BINDINGS = [
        Binding("left,h", "move(-1, 0)", "Block", show=False),
        Binding("right,l", "move(1, 0)", "Block", show=False),
        Binding("up,k", "move(0, -1)", "Block", show=False),
        Binding("down,j", "move(0, 1)", "Block", show=False),
    ]
    DEFAULT_CSS = "BlockGridWidget { height: auto; width: auto; } BlockGridWidget:focus { background: $boost; }"

    cursor: reactive[int | None] = reactive(None)

    class BlockSelected(Message):
        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def __init__(self, selectable: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.can_focus = selectable
        self.grid: BlockGrid | None = None
        self.lit: set[int] = set()

    def show(self, grid: BlockGrid | None, lit=(), cursor: int | None = None) -> None:
        self.grid, self.lit = grid, set(lit)
        self.set_reactive(BlockGridWidget.cursor, cursor)
        self.refresh(layout=True)

    def render(self) -> Text:
        if self.grid is None:
            return Text("")
        return grid_text(self.grid, self.lit, self.cursor)

    def watch_cursor(self, index: int | None) -> None:
        self.refresh()
        if index is not None:
            self.post_message(self.BlockSelected(index))

    def action_move(self, dx: int, dy: int) -> None:
        if self.grid is None:
            return
        cols = grid_columns(self.grid)
        index = (self.cursor or 0) + dx + dy * cols
        self.cursor = min(max(index, 0), min(self.grid.count, MAX_DRAWN) - 1)

    def on_click(self, event) -> None:
        if self.grid is None or not self.can_focus:
            return
        index = event.y * grid_columns(self.grid) + event.x // 2
        if 0 <= index < min(self.grid.count, MAX_DRAWN):
            self.cursor = index


class EdgeTable(DataTable):
    """Kernel edges; the highlighted one is shown, enter moves to its consumer's blocks."""

    BINDINGS = ROW_KEYS

    class EdgeChosen(Message):
        def __init__(self, key: str) -> None:
            super().__init__()
            self.key = key

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)

    def on_mount(self) -> None:
        for name in ("producer", "consumer", "class", "blocks"):
            self.add_column(name, key=name)

    def show(self, edges, unit: str = "block") -> None:
        """`unit`: what a block is on the analysed target (the last column says "blockIdx p→c")."""
        self.clear()
        column = self.columns["blocks"]
        column.label = Text(f"{unit} p→c")
        column.content_width = max(column.content_width, column.label.cell_len)  # rows only widen it
        for e in edges:
            self.add_row(e.producer.kernel, e.consumer.kernel, e.edge_class,
                         f"{e.producer.count}→{e.consumer.count}", key=e.key)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if event.row_key is not None:
            self.post_message(self.EdgeChosen(event.row_key.value))


class BlocksView(Horizontal):
    """Shows a BlockDepsReport, or says why there is none."""

    DEFAULT_CSS = """
    BlocksView { height: 1fr; }
    BlocksView EdgeTable { width: auto; max-width: 60%; height: 1fr; }
    BlocksView #edge { width: 1fr; height: 1fr; padding: 0 1; }
    BlocksView #edge-title { height: auto; }
    BlocksView .grid-title { height: 1; margin-top: 1; }
    BlocksView VerticalScroll { height: 1fr; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.report: BlockDepsReport | None = None
        self.edge: EdgeDeps | None = None
        self.picked = False  # the edge was picked in this tab: the graph's selection no longer moves it

    def compose(self) -> ComposeResult:
        yield EdgeTable()
        with Vertical(id="edge"):
            yield Static("block dependencies: analysing… (runs after the model opens)", id="edge-title")
            with VerticalScroll():
                yield Static("", classes="grid-title", id="consumer-title")
                yield BlockGridWidget(selectable=True, id="consumer")
                yield Static("", classes="grid-title", id="producer-title")
                yield BlockGridWidget(id="producer")

    def set_progress(self, done: int, total: int) -> None:
        if self.report is None:
            self.query_one("#edge-title", Static).update(f"block dependencies: analysing edge {done}/{total}…")

    def reset(self, what: str) -> None:
        """Forget the report (the target changed): empty grids, `what` as the title."""
        self.report, self.edge, self.picked = None, None, False
        self.query_one(EdgeTable).show(())
        for grid in self.query(BlockGridWidget):
            grid.show(None)
        for title in ("#consumer-title", "#producer-title"):
            self.query_one(title, Static).update("")
        self.query_one("#edge-title", Static).update(what)

    def set_report(self, report: BlockDepsReport | Unavailable) -> None:
        title = self.query_one("#edge-title", Static)
        if isinstance(report, Unavailable):
            self.report = None
            title.update(Text.assemble(("Block dependency analysis not available: ", "bold red"), report.reason))
            return
        self.report = report
        self.query_one(EdgeTable).show(report.edges, report.unit)
        if not report.edges:
            title.update(Text(report.note or "no kernel-to-kernel edges in this model"))
        elif self.edge is None:
            self.show_edge(report.edges[0].key)

    def show_edge(self, key: str) -> None:
        if self.report is None:
            return
        edge = next((e for e in self.report.edges if e.key == key), None)
        if edge is None:
            return
        self.edge = edge
        unit = self.report.unit
        text = Text.assemble((edge.title, "bold"), "   class ", (edge.edge_class, "bold magenta"))
        if edge.tensor:
            text.append(f"   tensor {edge.tensor}")
        meaning = edge_class_meaning(edge.edge_class)
        if meaning:
            text.append(f"\n  {edge.edge_class}: {meaning}", style="dim")
        text.append("\n  ")
        text.append_text(Text.assemble(("◆", "bold #ffb300"), f" the consumer {unit} picked   ",
                                       ("■", "bold #00acc1"), f" the producer {unit}s it reads   ",
                                       ("·", "dim"), f" other {unit}s   (? explains the terms)"))
        if self.report.block_axis:
            text.append(f"\n  target {self.report.target}: a block is one {self.report.block_axis}", style="dim")
        for name, value in edge.figures:
            text.append(f"\n  {name}: {value}")
        self.query_one("#edge-title", Static).update(text)
        self.query_one("#consumer-title", Static).update(
            f"consumer {edge.consumer.kernel}: {_count(edge.consumer, unit)} {_dims(edge.consumer)}"
            f"  (arrows/hjkl or click: pick a {unit})")
        self.query_one("#consumer", BlockGridWidget).show(edge.consumer, cursor=0)
        self.select_block(0)

    def select_block(self, index: int) -> None:
        if self.edge is None or self.report is None:
            return
        unit = self.report.unit
        needs = self.edge.needs(index)
        self.query_one("#producer", BlockGridWidget).show(self.edge.producer, lit=needs)
        self.query_one("#producer-title", Static).update(
            f"producer {self.edge.producer.kernel}: {_count(self.edge.producer, unit)} "
            f"{_dims(self.edge.producer)}   consumer {unit} {index} needs {len(needs)}")

    def select_for_op(self, op_id: str) -> None:
        """Show the first edge into the kernel computing `op_id` (else out of it), unless an
        edge was picked in this tab (that one stays: it is what `e` exports)."""
        if self.report is None or self.picked:
            return
        for pick in (lambda e: op_id in e.consumer.ops, lambda e: op_id in e.producer.ops):
            edge = next((e for e in self.report.edges if pick(e)), None)
            if edge is not None:
                table = self.query_one(EdgeTable)
                table.move_cursor(row=table.get_row_index(edge.key))
                self.show_edge(edge.key)
                return

    def on_edge_table_edge_chosen(self, event: EdgeTable.EdgeChosen) -> None:
        self.picked = self.picked or self.query_one(EdgeTable).has_focus  # a person moved the cursor
        self.show_edge(event.key)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """enter on an edge: pick its consumer's blocks (arrows/hjkl), shift+tab goes back."""
        event.stop()
        self.query_one("#consumer", BlockGridWidget).focus()

    def on_block_grid_widget_block_selected(self, event: BlockGridWidget.BlockSelected) -> None:
        self.select_block(event.index)


def _count(grid: BlockGrid, unit: str) -> str:
    """"25 blocks" when a block is not named, else "25 × blockIdx"."""
    return f"{grid.count} blocks" if unit == "block" else f"{grid.count} × {unit}"


def _dims(grid: BlockGrid) -> str:
    """"(5×5)", or with the axis names "(blockIdx.y 5 × blockIdx.x 5)"."""
    if not grid.dims:
        return ""
    if len(grid.axes) == len(grid.dims):
        return "(" + " × ".join(f"{a} {d}" for a, d in zip(grid.axes, grid.dims)) + ")"
    return "(" + "×".join(str(d) for d in grid.dims) + ")"
