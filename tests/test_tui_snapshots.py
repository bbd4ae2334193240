"""Snapshot tests: every tab of the TUI at 200x55 on the synthetic sample with the fake engine
(tests/test_tui.py), compared with the stored screens in tests/snapshots/: NAME.txt (the
characters, diffed line by line on failure) and NAME.svg (Textual's own SVG screenshot: colours
and styles too). A rendering change fails here; when it is intended, store the new screens:

    UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/test_tui_snapshots.py

and look at the SVGs (a browser shows them) before committing them. The fakes keep the
screens deterministic: fixed kernel times, no dates, relative plan paths, no notifications.
"""

from __future__ import annotations

import asyncio
import difflib
import os
from pathlib import Path

import pytest

from tests.test_tui import make_app, screen, settle

SIZE = (200, 55)
STORED = Path(__file__).parent / "snapshots"
UPDATE = bool(os.environ.get("UPDATE_SNAPSHOTS"))


class Snapshots:
    """Compares screens with the stored ones, collecting every difference of a test."""

    def __init__(self, out: Path) -> None:
        self.out, self.failures = out, []

    async def check(self, pilot, app, name: str) -> None:
        app.clear_notifications()  # toasts come and go with time
        await pilot.pause()
        text, svg = screen(app), app.export_screenshot(title=f"blockwise {name}")
        txt_path, svg_path = STORED / f"{name}.txt", STORED / f"{name}.svg"
        if UPDATE:
            STORED.mkdir(exist_ok=True)
            txt_path.write_text(text)
            svg_path.write_text(svg)
            return
        if not txt_path.exists():
            self.failures.append(f"{name}: no stored snapshot; run with UPDATE_SNAPSHOTS=1 and look at it")
            return
        (self.out / f"{name}.svg").write_text(svg)
        if text != txt_path.read_text():
            diff = difflib.unified_diff(txt_path.read_text().splitlines(), text.splitlines(), "stored", "now",
                                        lineterm="", n=1)
            self.failures.append(f"{name}: the screen changed (now: {self.out / (name + '.svg')})\n"
                                 + "\n".join(list(diff)[:60]))
        elif svg != svg_path.read_text():
            self.failures.append(f"{name}: same characters, other colours or styles: compare {svg_path} with "
                                 f"{self.out / (name + '.svg')}")

    def assert_same(self) -> None:
        assert not self.failures, "\n\n".join(self.failures)


@pytest.fixture
def snapshots(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # plan files as relative paths: no tmp path on screen
    (tmp_path / "now").mkdir()
    return Snapshots(tmp_path / "now")


def run(coro):
    return asyncio.run(coro)


def test_graph_blocks_fusion_and_help_screens(snapshots):
    async def go():
        app, _ = make_app(Path("."))
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            await snapshots.check(pilot, app, "graph")
            await pilot.press("right_square_bracket", "right_square_bracket")  # n1: its properties
            await snapshots.check(pilot, app, "graph-selected")
            await pilot.press("2")
            await snapshots.check(pilot, app, "blocks")
            await pilot.press("3", "a")  # approve D1; the cursor moves to D2
            await snapshots.check(pilot, app, "fusion")
            await pilot.press("question_mark")
            await snapshots.check(pilot, app, "help")
    run(go())
    snapshots.assert_same()


def test_compile_and_timing_screens(snapshots):
    async def go():
        app, _ = make_app(Path("."))
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot, app)
            await pilot.press("c")
            await settle(pilot, app)
            await snapshots.check(pilot, app, "compile")
            await pilot.press("3", "A", "C")
            await settle(pilot, app)
            await pilot.press("4")
            await snapshots.check(pilot, app, "timing")
    run(go())
    snapshots.assert_same()
