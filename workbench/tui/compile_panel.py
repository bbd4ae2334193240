"""CompilePanel: one progress bar per pipeline stage, fed by the engine's StageEvents."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Grid, Vertical
from textual.widgets import ProgressBar, Static

_STATUS = {"start": ("running", "yellow"), "done": ("done", "green"), "skip": ("skipped", "dim"),
           "fail": ("failed", "bold red"), "cancelled": ("cancelled", "red"), "wait": ("waiting", "dim")}


_IDLE = "No compile yet.  c: compile (before the plan)   C: compile with the approved plan   x: cancel"


class StageRow:
    """The widgets of one stage (not a widget: lives inside the panel's grid)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.label = Static(name, classes="stage")
        self.bar = ProgressBar(total=1, show_eta=False, show_percentage=False)
        self.status = Static(Text("waiting", style="dim"), classes="status")
        self.message = Static("", classes="message")
        self.state = "wait"

    def widgets(self):
        return self.label, self.bar, self.status, self.message

    def update(self, status: str, seconds: float = 0.0, message: str = "") -> None:
        self.state = status
        if status == "start":
            self.bar.update(total=None)  # indeterminate while the stage runs
        elif status in ("done", "skip"):
            self.bar.update(total=1, progress=1)
        else:
            self.bar.update(total=1, progress=0)
        word, style = _STATUS[status]
        self.status.update(Text(f"{word} {seconds:.2f}s" if status in ("done", "fail") else word, style=style))
        self.message.update(Text(message or ""))


class CompilePanel(Vertical):
    DEFAULT_CSS = """
    CompilePanel { height: 1fr; padding: 1 2; }
    CompilePanel #title { height: auto; margin-bottom: 1; }
    CompilePanel Grid { grid-size: 4; grid-columns: 12 32 16 1fr; grid-rows: 1; grid-gutter: 1 1;
                        height: auto; }
    CompilePanel .message { overflow-x: hidden; }
    CompilePanel #outcome { height: auto; margin-top: 1; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.rows: dict[str, StageRow] = {}
        self.running = False
        self.title = ""

    def compose(self) -> ComposeResult:
        yield Static(_IDLE, id="title")
        yield Grid(id="stages")
        yield Static("", id="outcome")

    def reset(self) -> None:
        """No compile (the target changed): the rows wait, the outcome is empty."""
        self.title = ""
        self.query_one("#title", Static).update(_IDLE)
        self.query_one("#outcome", Static).update("")
        for row in self.rows.values():
            row.update("wait")

    def start(self, title: str, stages: list[str]) -> None:
        """Reset the rows (mounted once: re-mounting from an App handler can deadlock)."""
        self.running = True
        self.title = title
        self.query_one("#title", Static).update(Text(title + "   (x: cancel)", style="bold"))
        self.query_one("#outcome", Static).update("")
        if list(self.rows) != list(stages):
            grid = self.query_one("#stages", Grid)
            for row in self.rows.values():
                for widget in row.widgets():
                    widget.remove()
            self.rows = {name: StageRow(name) for name in stages}
            grid.mount_all([w for row in self.rows.values() for w in row.widgets()])
        else:
            for row in self.rows.values():
                row.update("wait")

    def stage_event(self, stage: str, status: str, seconds: float, message: str) -> None:
        row = self.rows.get(stage)
        if row is not None:
            row.update(status, seconds, message)

    def finish(self, text: Text | str, cancelled: bool = False) -> None:
        self.running = False
        word = "cancelled:" if cancelled else "finished:"
        self.query_one("#title", Static).update(Text(f"{word} {self.title}   (c / C: compile again)", style="bold"))
        if cancelled:
            for row in self.rows.values():
                if row.state in ("wait", "start"):
                    row.update("cancelled")
        self.query_one("#outcome", Static).update(text)
