"""Matplotlib charts of per-kernel time (SVG and PNG), for the CLI and the TUI's export."""

from __future__ import annotations

import io
from pathlib import Path

from engine.files import write_atomic


def timing_chart(kernel_times, title: str, out_base: Path, top: int = 20) -> list[Path]:
    """Horizontal bars of the top kernels by total time; writes out_base.svg and .png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = list(kernel_times)[:top][::-1]
    fig, ax = plt.subplots(figsize=(9, 0.32 * max(len(rows), 4) + 1.2))
    names = [f"{r.name} x{r.calls}" if r.calls > 1 else r.name for r in rows]
    ax.barh(names, [r.total_ms for r in rows], color="#3a7bd5")
    for y, r in enumerate(rows):
        ax.text(r.total_ms, y, f" {r.total_ms:.3f} ms ({r.share * 100:.1f}%)", va="center", fontsize=7)
    ax.set_xlabel("time per inference (ms)")
    ax.set_title(title, fontsize=10)
    ax.tick_params(axis="y", labelsize=7)
    ax.margins(x=0.25)
    fig.tight_layout()
    paths = []
    for fmt in ("svg", "png"):
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=110)
        paths.append(write_atomic(out_base.with_suffix(f".{fmt}"), buf.getvalue()))
    plt.close(fig)
    return paths
