"""Key bindings shared by the views' tables: j/k move the row cursor, as in k9s and lazygit."""

from __future__ import annotations

from textual.binding import Binding

ROW_KEYS = [Binding("j", "cursor_down", "Down", show=False), Binding("k", "cursor_up", "Up", show=False)]
