"""FusionTable: the fusion plan's decisions; `a`/`r` approve/reject one, `A`/`R` all.

It posts DecisionChanged (the parent records it in the plan) and DecisionHighlighted (the
parent highlights the members in the graph)."""

from __future__ import annotations

from dataclasses import replace

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from engine.parallel.plan import DecisionStatus
from workbench.tui.facts import DecisionRow, conflicts
from workbench.tui.keys import ROW_KEYS

_STATUS_STYLE = {DecisionStatus.PROPOSED: "yellow", DecisionStatus.APPROVED: "bold green",
                 DecisionStatus.REJECTED: "red"}
# (key, header, width): None shares what the fixed columns leave, members 2 : evidence 3
_COLUMNS = (("id", "id", 4), ("kind", "kind", 20), ("members", "members", None),
            ("evidence", "evidence", None), ("est", "estimated gain", 20), ("measured", "measured", 10),
            ("status", "status", 16))
_MIN_MEMBERS, _MIN_EVIDENCE = 24, 30


def column_widths(width: int) -> dict[str, int]:
    """Column widths for a table `width` cells wide: fixed columns as listed, the rest split
    between members and evidence (each column also takes 2 cells of padding; 2 for the scrollbar).

        >>> column_widths(200)["members"], column_widths(200)["evidence"]
        (45, 69)
    """
    fixed = sum(w for _, _, w in _COLUMNS if w) + 2 * len(_COLUMNS) + 2
    rest = max(width - fixed, _MIN_MEMBERS + _MIN_EVIDENCE)
    members = max(rest * 2 // 5, _MIN_MEMBERS)
    sizes = {key: w for key, _, w in _COLUMNS if w}
    sizes.update(members=members, evidence=max(rest - members, _MIN_EVIDENCE))
    return sizes


def status_cell(row: DecisionRow, clashes: tuple[str, ...]) -> Text:
    """`approved`, or `approved ⚠ d3` when approved decisions d3... share a kernel with it."""
    text = Text(row.status.value, style=_STATUS_STYLE[row.status])
    if clashes:
        text.append(f" ⚠ {','.join(clashes)}", style="bold #ff8f00")
    return text


class FusionTable(DataTable):
    BINDINGS = [
        Binding("a", "set_status('approved')", "Approve"),
        Binding("r", "set_status('rejected')", "Reject"),
        Binding("A", "set_all('approved')", "Approve all"),
        Binding("R", "set_all('rejected')", "Reject all"),
        Binding("u", "set_status('proposed')", "Undecide", show=False),
        *ROW_KEYS,
    ]

    class DecisionChanged(Message):
        def __init__(self, ids: tuple[str, ...], status: DecisionStatus) -> None:
            super().__init__()
            self.ids, self.status = ids, status

    class DecisionHighlighted(Message):
        def __init__(self, row: DecisionRow | None) -> None:
            super().__init__()
            self.row = row

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.rows_by_id: dict[str, DecisionRow] = {}
        self.labels: dict[str, str] = {}
        self.clashes: dict[str, tuple[str, ...]] = {}  # approved decisions sharing a kernel
        self._widths: dict[str, int] = {}

    def on_mount(self) -> None:
        self._add_columns(column_widths(self.size.width or 200))

    def _add_columns(self, widths: dict[str, int]) -> None:
        self._widths = widths
        for key, header, _ in _COLUMNS:
            self.add_column(header, key=key, width=widths[key])

    def on_resize(self) -> None:
        """Members and evidence share the width the fixed columns leave."""
        widths = column_widths(self.size.width)
        if widths != self._widths:
            self.clear(columns=True)
            self._add_columns(widths)
            self.set_rows(list(self.rows_by_id.values()))

    def set_rows(self, rows: list[DecisionRow], labels: dict[str, str] | None = None) -> None:
        if labels is not None:
            self.labels = labels
        keep = self.cursor_row
        self.clear()
        self.rows_by_id = {r.id: r for r in rows}
        self.clashes = conflicts(rows)
        for r in rows:
            self.add_row(*self._cells(r), key=r.id)
        if rows:
            self.move_cursor(row=min(max(keep, 0), len(rows) - 1))

    def _cells(self, r: DecisionRow) -> tuple:
        members = r.title or ", ".join(self.labels.get(m, m) for m in r.members)
        measured = "—" if r.measured_gain_ms is None else f"{r.measured_gain_ms:+.3f} ms"
        return (r.id, r.kind, members, r.evidence, r.estimated_gain, measured,
                status_cell(r, self.clashes.get(r.id, ())))

    @property
    def current(self) -> DecisionRow | None:
        if not self.rows_by_id or self.cursor_row < 0:
            return None
        key = self.coordinate_to_cell_key((self.cursor_row, 0)).row_key.value
        return self.rows_by_id.get(key)

    def _apply(self, ids: tuple[str, ...], status: DecisionStatus) -> None:
        for i in ids:
            self.rows_by_id[i] = replace(self.rows_by_id[i], status=status)
        self.clashes = conflicts(list(self.rows_by_id.values()))
        for i, r in self.rows_by_id.items():
            self.update_cell(i, "status", status_cell(r, self.clashes.get(i, ())))
        self.post_message(self.DecisionChanged(ids, status))

    def action_set_status(self, status: str) -> None:
        row = self.current
        if row is None:
            self.notify("no decision here: the plan has none (yet), see the line above the table",
                        severity="warning")
            return
        self._apply((row.id,), DecisionStatus(status))
        if self.cursor_row < self.row_count - 1:
            self.move_cursor(row=self.cursor_row + 1)

    def action_set_all(self, status: str) -> None:
        if not self.rows_by_id:
            self.notify("no decisions: the plan has none (yet), see the line above the table", severity="warning")
            return
        self._apply(tuple(self.rows_by_id), DecisionStatus(status))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        row = self.rows_by_id.get(event.row_key.value) if event.row_key else None
        self.post_message(self.DecisionHighlighted(row))
