"""TUI speed on a synthetic 1000-node operator graph: layout, open, one frame.

    .venv/bin/python bench/tui_speed.py [--nodes 1000] [--width 200] [--height 50]

Prints: dot layout + parse per level of detail, rasterising, app open (launch until the
graph is on screen, headless), and render_line over a full screen (cold: every strip built;
warm: from the strip cache), after scrolling to the middle of the graph. Targets: open
< 2 s, frame < 20 ms. Numbers only, no assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workbench.tui.layout import Detail, layout_graph  # noqa: E402
from workbench.tui.raster import rasterise  # noqa: E402
from workbench.tui.synthetic import synthetic_graph  # noqa: E402


class _Session:
    def __init__(self, graph):
        self.graph, self.model = graph, SimpleNamespace(name=graph.model)

    def scheduled(self, target="llvm", arch=None):
        raise RuntimeError("no engine in this bench")


class _NoAnalyses:
    target = "llvm"

    def load_or_propose(self, session):
        return None

    def block_deps(self, session, progress=None):
        return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--width", type=int, default=200)
    ap.add_argument("--height", type=int, default=50)
    args = ap.parse_args()
    graph = synthetic_graph(args.nodes)
    print(f"graph: {len(graph.nodes)} ops, {len(graph.edges)} edges")
    for detail in Detail:
        t = time.perf_counter()
        layout = layout_graph(graph, detail)
        t_layout = time.perf_counter() - t
        t = time.perf_counter()
        grid = rasterise(layout)
        t_raster = time.perf_counter() - t
        print(f"{detail.name:<5} layout (dot -Tplain + parse) {t_layout * 1e3:7.1f} ms   rasterise "
              f"{t_raster * 1e3:6.1f} ms   canvas {grid.width}x{grid.height} cells")
    asyncio.run(_app_numbers(graph, args.width, args.height))


async def _app_numbers(graph, width: int, height: int) -> None:
    from workbench.tui.app import WorkbenchApp
    from workbench.tui.graph_canvas import GraphCanvas

    start = time.perf_counter()
    app = WorkbenchApp("synthetic", session_factory=lambda spec: _Session(graph), analyses=_NoAnalyses())
    async with app.run_test(size=(width, height)) as pilot:
        canvas = app.query_one(GraphCanvas)
        while canvas.scene is None:
            await pilot.pause(0.005)
        await pilot.pause()
        opened = time.perf_counter() - start
        print(f"open: launch to graph on screen {opened * 1e3:7.1f} ms (target < 2000 ms)")
        canvas.scroll_to(canvas.virtual_size.width // 3, canvas.virtual_size.height // 2, animate=False)
        await pilot.pause()
        rows = canvas.size.height
        cold, warm = [], []
        for _ in range(20):
            canvas._strips.clear()
            canvas._styles.clear()
            t = time.perf_counter()
            for y in range(rows):
                canvas.render_line(y)
            cold.append(time.perf_counter() - t)
            t = time.perf_counter()
            for y in range(rows):
                canvas.render_line(y)
            warm.append(time.perf_counter() - t)
        print(f"frame: render_line x {rows} lines of {canvas.size.width} cells: cold median "
              f"{statistics.median(cold) * 1e3:.2f} ms (max {max(cold) * 1e3:.2f}), warm "
              f"{statistics.median(warm) * 1e3:.3f} ms (target < 20 ms)")
        for label, keys in (("zoom out (op only)", ("minus",)), ("zoom out (dots)", ("minus",))):
            t = time.perf_counter()
            await pilot.press(*keys)
            target = canvas.detail
            while canvas.scene is None or canvas.scene.layout.detail != target:
                await pilot.pause(0.005)
            print(f"{label}: relayout to screen {(time.perf_counter() - t) * 1e3:7.1f} ms")


if __name__ == "__main__":
    main()
