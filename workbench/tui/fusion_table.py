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
from workbench.tui.facts import DecisionRow
from workbench.tui.keys import ROW_KEYS

_STATUS_STYLE = {DecisionStatus.PROPOSED: "yellow", DecisionStatus.APPROVED: "bold green",
                 DecisionStatus.REJECTED: "red"}


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

    def on_mount(self) -> None:
        self.add_column("id", key="id")
        self.add_column("kind", key="kind")
        self.add_column("members", key="members", width=52)
        self.add_column("evidence", key="evidence", width=40)
        self.add_column("estimated gain", key="est")
        self.add_column("measured", key="measured")
        self.add_column("status", key="status")

    def set_rows(self, rows: list[DecisionRow], labels: dict[str, str] | None = None) -> None:
        if labels is not None:
            self.labels = labels
        keep = self.cursor_row
        self.clear()
        self.rows_by_id = {r.id: r for r in rows}
        for r in rows:
            self.add_row(*self._cells(r), key=r.id)
        if rows:
            self.move_cursor(row=min(max(keep, 0), len(rows) - 1))

    def _cells(self, r: DecisionRow) -> tuple:
        members = r.title or ", ".join(self.labels.get(m, m) for m in r.members)
        measured = "—" if r.measured_gain_ms is None else f"{r.measured_gain_ms:+.3f} ms"
        return (r.id, r.kind, members, r.evidence, r.estimated_gain, measured,
                Text(r.status.value, style=_STATUS_STYLE[r.status]))

    @property
    def current(self) -> DecisionRow | None:
        if not self.rows_by_id or self.cursor_row < 0:
            return None
        key = self.coordinate_to_cell_key((self.cursor_row, 0)).row_key.value
        return self.rows_by_id.get(key)

    def _apply(self, ids: tuple[str, ...], status: DecisionStatus) -> None:
        for i in ids:
            self.rows_by_id[i] = replace(self.rows_by_id[i], status=status)
            self.update_cell(i, "status", Text(status.value, style=_STATUS_STYLE[status]))
        self.post_message(self.DecisionChanged(ids, status))

    def action_set_status(self, status: str) -> None:
        row = self.current
        if row is not None:
            self._apply((row.id,), DecisionStatus(status))
            if self.cursor_row < self.row_count - 1:
                self.move_cursor(row=self.cursor_row + 1)

    def action_set_all(self, status: str) -> None:
        if self.rows_by_id:
            self._apply(tuple(self.rows_by_id), DecisionStatus(status))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        row = self.rows_by_id.get(event.row_key.value) if event.row_key else None
        self.post_message(self.DecisionHighlighted(row))
