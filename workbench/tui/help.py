"""The `?` help screen: every key, read from the bindings of the app and its widgets, then the
terms the views use (workbench.present.glossary). j/k scroll it."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

_NAMES = {"slash": "/", "question_mark": "?", "plus": "+", "minus": "-", "equals_sign": "=",
          "right_square_bracket": "]", "left_square_bracket": "[", "greater_than_sign": ">",
          "less_than_sign": "<", "escape": "esc"}


def key_names(keys: str) -> str:
    return " ".join(_NAMES.get(k, k) for k in keys.split(","))


def key_rows(scopes) -> list[tuple[str, str, str]]:
    """(scope, keys, what) for every binding of the given (scope, widget class) pairs."""
    rows = []
    for scope, cls in scopes:
        for b in cls.BINDINGS:
            if isinstance(b, tuple):
                b = Binding(*b)
            rows.append((scope, key_names(b.key), b.description or b.action))
    return rows


class HelpScreen(ModalScreen):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close"),
                Binding("j,down", "scroll(1)", "Down", show=False), Binding("k,up", "scroll(-1)", "Up", show=False),
                Binding("pagedown,space", "scroll(10)", "Page down", show=False),
                Binding("pageup", "scroll(-10)", "Page up", show=False)]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen VerticalScroll { width: 90%; max-width: 130; height: 90%; border: round $primary; background: $surface; padding: 0 1; }
    """

    def __init__(self, rows: list[tuple[str, str, str]], terms: list[tuple[str, str]] = ()) -> None:
        super().__init__()
        self.rows, self.terms = rows, terms

    def action_scroll(self, lines: int) -> None:
        self.query_one(VerticalScroll).scroll_relative(y=lines, animate=False)

    def compose(self) -> ComposeResult:
        table = Table(title="blockwise workbench: keys (esc closes)", expand=True, show_lines=False)
        table.add_column("where", style="dim")
        table.add_column("key", style="bold")
        table.add_column("does")
        for scope, keys, what in self.rows:
            table.add_row(scope, keys, what)
        table.add_row("everywhere", "mouse", "click a node or a block to select it, drag or wheel to pan")
        terms = Table(title="terms", expand=True, show_header=False)
        terms.add_column("term", style="bold", no_wrap=True)
        terms.add_column("means")
        for term, means in self.terms:
            terms.add_row(term, means)
        with VerticalScroll():
            yield Static(table)
            if self.terms:
                yield Static(terms)
