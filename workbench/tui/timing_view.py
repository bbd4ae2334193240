"""Timing: per-kernel tables (nsys-like columns, sortable) and terminal bar charts for the
run before the fusion plan and the run after it, side by side."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Static

from workbench.tui.keys import ROW_KEYS

_EIGHTHS = " ▏▎▍▌▋▊▉█"

# (header, KernelTime attribute, format); nsys `cuda_gpu_kern_sum` order.
COLUMNS = (("Time %", "share", "{:.1%}"), ("Total ms", "total_ms", "{:.3f}"), ("Calls", "calls", "{}"),
           ("Avg ms", "mean_ms", "{:.3f}"), ("Med ms", "median_ms", "{:.3f}"),
           ("Min ms", "min_ms", "{:.3f}"), ("Max ms", "max_ms", "{:.3f}"), ("Name", "name", "{}"))


def bar(value: float, scale: float, width: int) -> str:
    """A horizontal bar of `value / scale * width` cells with eighth-cell resolution."""
    if scale <= 0 or width <= 0:
        return ""
    eighths = round(min(value / scale, 1.0) * width * 8)
    return "█" * (eighths // 8) + (_EIGHTHS[eighths % 8] if eighths % 8 else "")


def bar_chart(kernel_times, scale_ms: float, width: int = 40, top: int = 15, name_width: int = 28) -> Text:
    """Top kernels by total time as bars on a shared scale (so two charts compare)."""
    out = Text()
    rows = sorted(kernel_times, key=lambda t: -t.total_ms)[:top]
    for t in rows:
        name = t.name if len(t.name) <= name_width else t.name[: name_width - 1] + "…"
        out.append(f"{name:<{name_width}} ")
        out.append(f"{bar(t.total_ms, scale_ms, width):<{width}}", style="#3a7bd5")
        out.append(f" {t.total_ms:7.3f} ms\n")
    if len(kernel_times) > top:
        out.append(f"… {len(kernel_times) - top} more kernels in the table\n", style="dim")
    return out


NOT_TIMED = "verified in host emulation — not timed (no GPU)"
PTXAS = "registers/smem/spills: from ptxas"
OCCUPANCY = "occupancy: theoretical (estimated)"

# The kernel last (as in KernelTable): the figures stay in view, a long name is cut. Where
# each figure comes from is said above the table (PTXAS, OCCUPANCY) and in the headers.
RESOURCE_HEADERS = ("Regs", "Smem B", "Local B", "Spill st/ld B", "Threads", "Occ. (est.)", "Limiter (est.)",
                    "Kernel")


@dataclass(frozen=True)
class TimingRun:
    """What a timing panel shows about one compile."""

    title: str
    kernel_times: tuple
    latency_ms: float | None
    ort_ms: float | None
    launches: int
    verified: str
    notes: tuple[str, ...] = ()
    measured_on: str | None = None  # the device the times were measured on; None: not timed there
    emulated: bool = False  # verified in host emulation (no device): nothing was timed
    resources: tuple = ()  # engine KernelResources per kernel (ptxas figures), when the target reports them


def run_of(result, title: str, on_device: bool) -> TimingRun:
    """`on_device`: the compile ran on the target's device (EngineAnalyses.ran_on_device)."""
    v = result.verification
    timed = on_device and result.latency is not None
    return TimingRun(title, tuple(result.kernel_times) if on_device else (),
                     result.latency.median_ms if timed else None,
                     result.onnxruntime_latency.median_ms if timed and result.onnxruntime_latency else None,
                     result.launches, v.summary() if v is not None else "not verified",
                     tuple(result.notes), measured_on=result.ran_on if timed else None,
                     emulated=not on_device, resources=tuple(result.kernel_resources))


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


class KernelTable(DataTable):
    """Per-kernel rows; `o` cycles the sort column, `O` reverses, clicking a header sorts."""

    BINDINGS = [Binding("o", "cycle_sort", "Sort"), Binding("O", "reverse_sort", "Reverse", show=False), *ROW_KEYS]

    def __init__(self, **kwargs) -> None:
        super().__init__(zebra_stripes=True, cursor_type="row", **kwargs)
        self.times: tuple = ()
        self.sort_index = 1  # Total ms
        self.descending = True

    def on_mount(self) -> None:
        for header, attr, _ in COLUMNS:
            self.add_column(header, key=attr)

    def show(self, times) -> None:
        self.times = tuple(times)
        self._fill()

    def _fill(self) -> None:
        self.clear()
        attr = COLUMNS[self.sort_index][1]
        rows = sorted(self.times, key=lambda t: getattr(t, attr), reverse=self.descending)
        for t in rows:
            cells = [fmt.format(getattr(t, a)) for _, a, fmt in COLUMNS]
            self.add_row(*[Text(c, justify="right") for c in cells[:-1]], cells[-1], key=t.name)
        for i, (header, _, _) in enumerate(COLUMNS):
            mark = (" ▼" if self.descending else " ▲") if i == self.sort_index else ""
            self.columns[COLUMNS[i][1]].label = Text(header + mark)
        self.refresh()

    def action_cycle_sort(self) -> None:
        self.sort_index = (self.sort_index + 1) % len(COLUMNS)
        self.descending = COLUMNS[self.sort_index][1] != "name"
        self._fill()

    def action_reverse_sort(self) -> None:
        self.descending = not self.descending
        self._fill()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        index = event.column_index
        if index == self.sort_index:
            self.descending = not self.descending
        else:
            self.sort_index, self.descending = index, COLUMNS[index][1] != "name"
        self._fill()


class TimingPanel(Vertical):
    DEFAULT_CSS = """
    TimingPanel { width: 1fr; border: round $primary 50%; padding: 0 1; }
    TimingPanel .summary { height: auto; }
    TimingPanel KernelTable { height: 1fr; min-height: 6; }
    TimingPanel .chart { height: auto; max-height: 18; }
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
        text = Text()
        if run.latency_ms is not None:
            text.append(f"latency {run.latency_ms:.3f} ms", style="bold")
            if run.ort_ms:
                text.append(f"   onnxruntime {run.ort_ms:.3f} ms ({run.latency_ms / run.ort_ms:.2f}x)")
            if other is not None and other.latency_ms:
                delta = other.latency_ms / run.latency_ms
                text.append(f"   {delta:.2f}x vs before", style="green" if delta >= 1 else "red")
            text.append(f"\nlatency and kernel times measured on {run.measured_on}", style="dim")
        elif run.emulated:
            text.append(NOT_TIMED, style="bold yellow")
        else:
            text.append("no timing", style="bold")
        text.append(f"\n{run.launches} launches   {run.verified}")
        for note in run.notes:
            text.append(f"\nnote: {note}", style="dim")
        summary.update(text)
        table.display = not run.emulated  # nothing was timed: no empty table of zeros
        table.show(run.kernel_times)
        if run.kernel_times:
            chart.update(bar_chart(run.kernel_times, scale_ms))
        else:
            chart.update(Text("no kernel times: " + (NOT_TIMED if run.emulated else "timing did not run"),
                              style="dim"))

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
    DEFAULT_CSS = "TimingView { height: 1fr; } TimingView #runs { height: 1fr; }"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.before: TimingRun | None = None
        self.after: TimingRun | None = None

    def compose(self) -> ComposeResult:
        with Horizontal(id="runs"):
            yield TimingPanel("before the plan", "not compiled yet: press c to compile", id="before")
            yield TimingPanel("after the plan", "no plan compile yet: approve decisions (3), then C", id="after")
        yield ResourcesPanel()

    def on_mount(self) -> None:
        self.query_one(ResourcesPanel).show(None)

    def reset(self) -> None:
        """No runs (the target changed)."""
        self.before = self.after = None
        self.query_one("#before", TimingPanel).show(None, 0.0)
        self.query_one("#after", TimingPanel).show(None, 0.0)
        self.query_one(ResourcesPanel).show(None)

    def set_run(self, which: str, run: TimingRun) -> None:
        setattr(self, which, run)
        times = [t.total_ms for r in (self.before, self.after) if r for t in r.kernel_times]
        scale = max(times, default=0.0)
        self.query_one("#before", TimingPanel).show(self.before, scale)
        self.query_one("#after", TimingPanel).show(self.after, scale, self.before)
        self.query_one(ResourcesPanel).show(run)
