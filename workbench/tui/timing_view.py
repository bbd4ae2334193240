"""Timing: the before/after of one plan compile (both builds timed in the same run, one
table per operator group), then each compile's kernels (medians with their spread, shares,
GFLOP/s and GB/s) side by side, all through workbench.present.timing (the CLI's presenter).

Sorting belongs to the view: `o`/`O` (or a header click) on the focused table sort it, the
header shows ▲/▼, and the two kernel tables keep one order. enter on a row shows its
operators in the graph (TimingTable.OpsChosen)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Static

from workbench.present.timing import (BEFORE_AFTER, GAPS, KERNEL_COLUMNS, MEDIANS, SAME_RUN, GroupRow, KernelRow,
                                      Latency, PlanOutcome, across_compiles, cell, group_rows, kernel_rows,
                                      kernel_sum_text, latency_text, ratio_text, reference_text, reference_warning,
                                      same_run_text, signed_ms)
from workbench.tui.keys import ROW_KEYS

_EIGHTHS = " ▏▎▍▌▋▊▉█"


def bar(value: float, scale: float, width: int) -> str:
    """A horizontal bar of `value / scale * width` cells with eighth-cell resolution."""
    if scale <= 0 or width <= 0:
        return ""
    eighths = round(min(value / scale, 1.0) * width * 8)
    return "█" * (eighths // 8) + (_EIGHTHS[eighths % 8] if eighths % 8 else "")


def bar_chart(rows: list[KernelRow], scale_ms: float, width: int = 30, top: int = 8, name_width: int = 28) -> Text:
    """Top kernels by median per inference as bars on a shared scale (so two charts compare);
    ┤ marks the third quartile when it lies past the median's bar."""
    out = Text()
    for r in sorted(rows, key=lambda r: -r.median_ms)[:top]:
        name = r.name if len(r.name) <= name_width else r.name[: name_width - 1] + "…"
        out.append(f"{name:<{name_width}} ")
        median = bar(r.median_ms, scale_ms, width)
        q3 = min(round(r.q3_ms / scale_ms * width), width) if scale_ms > 0 else 0
        whisker = "─" * max(q3 - len(median) - 1, 0) + "┤" if q3 > len(median) else ""
        out.append(median, style="#3a7bd5")
        out.append(f"{whisker:<{width - len(median)}}", style="dim")
        out.append(f" {r.median_ms:7.3f} ms\n")
    if len(rows) > top:
        out.append(f"… {len(rows) - top} more kernels in the table\n", style="dim")
    return out


def diff_bar(before: float | None, after: float | None, scale: float, width: int = 16) -> Text:
    """After drawn over before on one scale: green █ up to after and grey ░ up to before when
    faster; the excess over before in red when slower."""
    if before is None or after is None or scale <= 0:
        return Text("")
    low, high = sorted((before, after))
    common = bar(low, scale, width)
    rest = max(round(high / scale * width) - len(common), 0)
    text = Text(common, style="green")
    text.append(("░" if after < before else "█") * rest, style="grey50" if after < before else "red")
    return text


NOT_TIMED = "verified in host emulation — not timed (no GPU)"
PTXAS = "registers/smem/spills: from ptxas"
OCCUPANCY = "occupancy: theoretical (estimated)"

# The kernel last (as in KernelTable): the figures stay in view, a long name is cut. Where
# each figure comes from is said above the table (PTXAS, OCCUPANCY) and in the headers.
RESOURCE_HEADERS = ("Regs", "Smem B", "Local B", "Spill st/ld B", "Threads", "Occ. (est.)", "Limiter (est.)",
                    "Kernel")


@dataclass(frozen=True)
class TimingRun:
    """What the Timing tab shows about one compile."""

    title: str
    kernel_times: tuple  # engine KernelTime rows (in place, per call)
    latency: Latency | None
    reference: Latency | None  # onnxruntime, same compile
    launches: int
    verified: str
    notes: tuple[str, ...] = ()
    measured_on: str | None = None  # the device the times were measured on; None: not timed there
    emulated: bool = False  # verified in host emulation (no device): nothing was timed
    resources: tuple = ()  # engine KernelResources per kernel (ptxas figures), when the target reports them
    rows: tuple[KernelRow, ...] = ()  # the presenter's kernel rows (median, IQR, share, GFLOP/s, GB/s)
    outcome: PlanOutcome | None = None  # the plan compile's apply step (its before/after)
    kernel_ids: dict = field(default_factory=dict)  # op -> "k72": the kernel computing it, as the graph says

    @property
    def latency_ms(self) -> float | None:
        return self.latency.median_ms if self.latency is not None else None

    @property
    def ort_ms(self) -> float | None:
        return self.reference.median_ms if self.reference is not None else None


def run_of(result, title: str, on_device: bool, graph=None) -> TimingRun:
    """`on_device`: the compile ran on the target's device (EngineAnalyses.ran_on_device);
    `graph`: the operator graph (each kernel's FLOPs and bytes)."""
    v = result.verification
    timed = on_device and result.latency is not None
    times = tuple(result.kernel_times) if on_device else ()
    return TimingRun(title, times, result.latency if timed else None,
                     result.onnxruntime_latency if timed else None,
                     result.launches, v.summary() if v is not None else "not verified",
                     tuple(result.notes), measured_on=result.ran_on if timed else None,
                     emulated=not on_device, resources=tuple(result.kernel_resources),
                     rows=tuple(kernel_rows(times, result.kernels, graph)),
                     outcome=getattr(result, "fusion", None),
                     kernel_ids={op: f"k{k.index}" for k in result.kernels for op in k.ops})


def outcome_text(run: TimingRun) -> str:
    """The Compile tab's last line: launches, this build's latency, the plan's same-run figures."""
    lat = (f"{latency_text(run.latency)} (measured on {run.measured_on})" if run.latency is not None
           else NOT_TIMED if run.emulated else "no timing")
    same = same_run_text(run.outcome) if run.outcome is not None else None
    return f"done: {run.launches} launches, {lat}" + (f"\n{SAME_RUN}: {same}" if same else "") + "; see 4 Timing"


def resource_cells(r) -> list[str]:
    """One engine KernelResources as the table's cells, in RESOURCE_HEADERS order ("—" where a
    figure is unknown)."""
    def known(value, fmt: str = "{}") -> str:
        return "—" if value is None else fmt.format(value)

    return [str(r.registers), str(r.shared_bytes), str(r.local_bytes), f"{r.spill_stores}/{r.spill_loads}",
            known(r.threads_per_block), known(r.occupancy, "{:.0%}"),
            known(r.limiter.value if r.limiter is not None else None), r.kernel]


class ResourceTable(DataTable):
    """Per-kernel resources from the target's assembler (registers, shared and local memory,
    spills) and the occupancy estimated from them; each header says where its value comes from."""

    BINDINGS = ROW_KEYS

    def __init__(self, **kwargs) -> None:
        super().__init__(zebra_stripes=True, cursor_type="row", **kwargs)

    def on_mount(self) -> None:
        for header in RESOURCE_HEADERS:
            self.add_column(header)

    def show(self, resources) -> None:
        self.clear()
        for r in resources:
            cells = resource_cells(r)
            spills = r.spill_stores > 0 or r.spill_loads > 0
            numbers = [Text(c, justify="right", style="bold red" if i == 3 and spills else "")
                       for i, c in enumerate(cells[:-2])]
            self.add_row(*numbers, cells[-2], cells[-1])


@dataclass(frozen=True)
class Column:
    header: str
    key: Callable  # row -> sort value (None sorts last)
    text: Callable  # row -> str | Text
    numeric: bool = True  # right-aligned, sorted largest first


class TimingTable(DataTable):
    """Rows sorted by one column: `o` cycles the column, `O` reverses, a header click sorts by
    it; the header shows ▲/▼. enter on a row posts OpsChosen (its operators, for the graph)."""

    BINDINGS = [Binding("o", "cycle_sort", "Sort"), Binding("O", "reverse_sort", "Reverse sort", show=False),
                *ROW_KEYS]
    COLUMNS: tuple[Column, ...] = ()
    DEFAULT_SORT = 0

    class OpsChosen(Message):
        """Show these operators in the graph (a timing row's kernel or group)."""

        def __init__(self, ops: tuple[str, ...], label: str) -> None:
            super().__init__()
            self.ops, self.label = ops, label

    class SortChanged(Message):
        def __init__(self, table: "TimingTable", index: int, descending: bool) -> None:
            super().__init__()
            self.table, self.index, self.descending = table, index, descending

    def __init__(self, **kwargs) -> None:
        super().__init__(zebra_stripes=True, cursor_type="row", **kwargs)
        self.items: tuple = ()  # (DataTable owns `rows`)
        self.sort_index = self.DEFAULT_SORT
        self.descending = self.COLUMNS[self.DEFAULT_SORT].numeric if self.COLUMNS else True

    def on_mount(self) -> None:
        for i, c in enumerate(self.COLUMNS):
            self.add_column(c.header, key=str(i))
        self._fill()

    def show(self, rows) -> None:
        self.items = tuple(rows)
        self._fill()

    def sorted_rows(self) -> list:
        key = self.COLUMNS[self.sort_index].key
        known = [r for r in self.items if key(r) is not None]
        unknown = [r for r in self.items if key(r) is None]
        return sorted(known, key=key, reverse=self.descending) + unknown

    def set_sort(self, index: int, descending: bool) -> None:
        """Sort by column `index` (no SortChanged: the view calls this to keep tables in step)."""
        if (index, descending) != (self.sort_index, self.descending):
            self.sort_index, self.descending = index, descending
            self._fill()

    def _fill(self) -> None:
        if not self.columns:
            return
        self.clear()
        for i, r in enumerate(self.sorted_rows()):
            cells = []
            for c in self.COLUMNS:
                value = c.text(r)
                cells.append(Text(value, justify="right") if c.numeric and isinstance(value, str) else value)
            self.add_row(*cells, key=str(i))
        for i, c in enumerate(self.COLUMNS):
            mark = (" ▼" if self.descending else " ▲") if i == self.sort_index else ""
            column = self.columns[str(i)]
            column.label = Text(c.header + mark)
            column.content_width = max(column.content_width, column.label.cell_len)  # rows only widen it
        self.refresh()

    def _sort(self, index: int, descending: bool) -> None:
        self.set_sort(index, descending)
        self.post_message(self.SortChanged(self, index, descending))

    def action_cycle_sort(self) -> None:
        index = (self.sort_index + 1) % len(self.COLUMNS)
        self._sort(index, self.COLUMNS[index].numeric)

    def action_reverse_sort(self) -> None:
        self._sort(self.sort_index, not self.descending)

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        index = event.column_index
        if index == self.sort_index:
            self._sort(index, not self.descending)
        else:
            self._sort(index, self.COLUMNS[index].numeric)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        rows = self.sorted_rows()
        if 0 <= event.cursor_row < len(rows):
            row = rows[event.cursor_row]
            self.post_message(self.OpsChosen(tuple(row.ops), self.row_label(row)))

    def row_label(self, row) -> str:
        return str(getattr(row, "name", getattr(row, "label", "")))


def _kernel_column(header: str, attr: str, fmt: str) -> Column:
    if attr == "name":  # "k72 max_pool2d9", as the graph names it; in kernel order (k9 before k10)
        return Column(header, lambda r: (kernel_number(r.ids) if r.ids else 1 << 30, r.name),
                      lambda r: f"{r.ids} {r.name}".strip(), numeric=False)
    return Column(header, lambda r: getattr(r, attr), lambda r: cell(r, attr, fmt))


def kernel_number(ids: str) -> int | None:
    """`k72 k80` -> 72: the order of kernel ids."""
    return int(ids.split()[0][1:]) if ids else None


class KernelTable(TimingTable):
    """One compile's kernels timed in place: median per inference, its IQR, share of the median
    sum, GFLOP/s and GB/s (workbench.present.timing.KERNEL_COLUMNS)."""

    COLUMNS = tuple(_kernel_column(*c) for c in KERNEL_COLUMNS)
    DEFAULT_SORT = 1  # Med ms, largest first


def _delta(r: GroupRow) -> str:
    return f"{signed_ms(r.change.value_ms)} ±{r.change.noise_ms:.3f}" if r.change else "—"


def _verdict(r: GroupRow) -> Text:
    if r.change is None:
        return Text("—")
    style = {"faster": "green", "slower": "red"}.get(r.change.verdict, "dim")
    return Text(r.change.verdict, style=style)


class GroupTable(TimingTable):
    """The before/after of one plan compile per operator group: a fused kernel with the
    kernels it replaced ("hfused_d3 ← expand1x1/conv, expand3x3/conv"), or a kernel left alone."""

    COLUMNS = (
        Column("Kernel", lambda r: (kernel_number(r.kernel) if r.kernel else 1 << 30, r.order),
               lambda r: r.kernel or "—", numeric=False),
        Column("Group (after ← before)", lambda r: r.row.label, lambda r: r.row.label, numeric=False),
        Column("Before ms", lambda r: r.row.before_ms, lambda r: cell(r.row, "before_ms", "{:.3f}")),
        Column("After ms", lambda r: r.row.after_ms, lambda r: cell(r.row, "after_ms", "{:.3f}")),
        Column("Δ after−before ms", lambda r: r.row.change.value_ms if r.row.change else None,
               lambda r: _delta(r.row)),
        Column("Speedup", lambda r: r.row.speedup.value if r.row.speedup else None,
               lambda r: ratio_text(r.row.speedup) if r.row.speedup else "—"),
        Column("Verdict", lambda r: r.row.change.verdict if r.row.change else None, lambda r: _verdict(r.row),
               numeric=False),
        Column("after █ / before ░", lambda r: r.row.before_ms, lambda r: r.bars, numeric=False),
    )
    DEFAULT_SORT = 0

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.descending = False  # execution order

    def show_groups(self, rows: list[GroupRow], kernel_ids: dict[str, str]) -> None:
        """`kernel_ids`: op -> "k72", the fused build's kernel computing it (the graph's name)."""
        scale = max([x for r in rows for x in (r.before_ms, r.after_ms) if x is not None], default=0.0)
        self.show(_Ordered(i + 1, r, diff_bar(r.before_ms, r.after_ms, scale),
                           kernel_ids.get(r.ops[0], "") if r.ops else "") for i, r in enumerate(rows))

    def row_label(self, row) -> str:
        return row.row.label


@dataclass(frozen=True)
class _Ordered:
    order: int
    row: GroupRow
    bars: Text
    kernel: str = ""  # "k72"

    @property
    def ops(self) -> tuple[str, ...]:
        return self.row.ops


class BeforeAfterPanel(Vertical):
    """The plan compile's before/after: both builds of one compile, timed in the same run."""

    DEFAULT_CSS = """
    BeforeAfterPanel { height: auto; max-height: 40%; border: round $accent 60%; padding: 0 1; }
    BeforeAfterPanel .ba-summary { height: auto; }
    BeforeAfterPanel GroupTable { height: auto; max-height: 14; }
    """
    HINT = ("C (compile with the approved plan) builds and times the unfused and the fused model in one "
            "compile: their before/after per operator group shows here")

    def compose(self) -> ComposeResult:
        yield Static(self.HINT, classes="ba-summary")
        yield GroupTable()

    def on_mount(self) -> None:
        self.border_title = "before/after the plan: one compile"
        self.show(None)

    def show(self, outcome: PlanOutcome | None, kernel_ids: dict[str, str] | None = None) -> None:
        summary = self.query_one(".ba-summary", Static)
        table = self.query_one(GroupTable)
        rows = group_rows(outcome) if outcome is not None else []
        table.display = bool(rows)
        table.show_groups(rows, kernel_ids or {})
        if outcome is None:
            summary.update(Text(self.HINT, style="dim"))
            return
        text = Text()
        same = same_run_text(outcome)
        if same:
            text.append(f"end to end, {SAME_RUN}: ", style="bold")
            text.append(same)
        if rows:
            text.append(f"\n{BEFORE_AFTER}; enter: show the group in the graph", style="dim")
        else:
            why = "; ".join(outcome.notes) or "no decision applied, or the apply step did not time the builds"
            text.append(("\n" if same else "") + f"no per-kernel before/after: {why}", style="dim")
        summary.update(text)


class TimingPanel(Vertical):
    DEFAULT_CSS = """
    TimingPanel { width: 1fr; border: round $primary 50%; padding: 0 1; }
    TimingPanel .summary { height: auto; }
    TimingPanel KernelTable { height: 1fr; min-height: 8; }
    TimingPanel .chart { height: auto; max-height: 8; }
    """

    def __init__(self, title: str, empty: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.border_title = title
        self.empty = empty
        self.run: TimingRun | None = None

    def compose(self) -> ComposeResult:
        yield Static(self.empty, classes="summary")
        yield KernelTable()
        yield VerticalScroll(Static("", classes="chart-text"), classes="chart")

    def show(self, run: TimingRun | None, scale_ms: float, other: TimingRun | None = None) -> None:
        self.run = run
        summary = self.query_one(".summary", Static)
        table = self.query_one(KernelTable)
        chart = self.query_one(".chart-text", Static)
        if run is None:
            summary.update(self.empty)
            table.show(())
            table.display = True
            chart.update("")
            return
        summary.update(self._summary(run, other))
        table.display = not run.emulated  # nothing was timed: no empty table of zeros
        table.show(run.rows)
        if run.rows:
            chart.update(bar_chart(list(run.rows), scale_ms))
        else:
            chart.update(Text("no kernel times: " + (NOT_TIMED if run.emulated else "timing did not run"),
                              style="dim"))

    @staticmethod
    def _summary(run: TimingRun, other: TimingRun | None) -> Text:
        text = Text()
        if run.latency is not None:
            text.append(f"latency {latency_text(run.latency)}", style="bold")
            if run.reference is not None:
                text.append(f"\n{reference_text(run.latency, run.reference)}")
            if other is not None and other.latency is not None:
                r = across_compiles(other.latency, run.latency)
                text.append(f"\nvs the c compile: {ratio_text(r)} speedup (across two compiles; the {SAME_RUN} "
                            "figures above compare better)", style="green" if r.value >= 1 else "red")
            if run.kernel_times:
                text.append(f"\n{kernel_sum_text(run.kernel_times, run.latency)}", style="dim")
            text.append(f"\nlatency and kernel times measured on {run.measured_on}", style="dim")
        elif run.emulated:
            text.append(NOT_TIMED, style="bold yellow")
        else:
            text.append("no timing", style="bold")
        text.append(f"\n{run.launches} launches   {run.verified}")
        for note in run.notes:
            text.append(f"\nnote: {note}", style="dim")
        return text


class ResourcesPanel(Vertical):
    """The kernel resources of the latest compile that reported them, across the whole width
    (kernel names are long); hidden when there are none."""

    DEFAULT_CSS = """
    ResourcesPanel { height: auto; max-height: 50%; border: round $primary 50%; padding: 0 1; }
    ResourcesPanel .resources-title { height: auto; }
    ResourcesPanel ResourceTable { height: auto; }
    """

    def compose(self) -> ComposeResult:
        yield Static("", classes="resources-title")
        yield ResourceTable()

    def show(self, run: TimingRun | None) -> None:
        resources = run.resources if run is not None else ()
        self.display = bool(resources)
        self.border_title = f"kernel resources: the compile {run.title} the plan" if resources else ""
        self.query_one(".resources-title", Static).update(f"{PTXAS}   {OCCUPANCY}" if resources else "")
        self.query_one(ResourceTable).show(resources)


class TimingView(Vertical):
    DEFAULT_CSS = """
    TimingView { height: 1fr; }
    TimingView #timing-notes { height: auto; padding: 0 1; }
    TimingView #runs { height: 1fr; min-height: 12; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.before: TimingRun | None = None
        self.after: TimingRun | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="timing-notes")
        yield BeforeAfterPanel()
        with Horizontal(id="runs"):
            yield TimingPanel("kernels: compile before the plan (c)",
                              "not compiled yet: press c to compile without the plan (C times the unfused "
                              "build too: before/after above)", id="before")
            yield TimingPanel("kernels: compile with the plan (C)",
                              "no plan compile yet: approve decisions (3), then C", id="after")
        yield ResourcesPanel()

    def on_mount(self) -> None:
        self.query_one(ResourcesPanel).show(None)
        self._notes()

    def reset(self) -> None:
        """No runs (the target changed)."""
        self.before = self.after = None
        self.query_one("#before", TimingPanel).show(None, 0.0)
        self.query_one("#after", TimingPanel).show(None, 0.0)
        self.query_one(BeforeAfterPanel).show(None)
        self.query_one(ResourcesPanel).show(None)
        self._notes()

    def set_run(self, which: str, run: TimingRun) -> None:
        setattr(self, which, run)
        scale = max([r.median_ms for t in (self.before, self.after) if t for r in t.rows], default=0.0)
        self.query_one("#before", TimingPanel).show(self.before, scale)
        self.query_one("#after", TimingPanel).show(self.after, scale, self.before)
        if which == "after":
            self.query_one(BeforeAfterPanel).show(run.outcome, run.kernel_ids)
        self.query_one(ResourcesPanel).show(run)
        self._notes()

    def _notes(self) -> None:
        notes = self.query_one("#timing-notes", Static)
        text = Text(f"{MEDIANS}. {GAPS}.", style="dim")
        warning = reference_warning(self.before.reference if self.before else None,
                                    self.after.reference if self.after else None)
        if warning:
            text.append(f"\n⚠ {warning}", style="bold yellow")
        notes.update(text)

    def on_timing_table_sort_changed(self, event: TimingTable.SortChanged) -> None:
        """One order for the view's kernel tables."""
        if isinstance(event.table, KernelTable):
            for table in self.query(KernelTable):
                table.set_sort(event.index, event.descending)
