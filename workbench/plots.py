"""Matplotlib charts of kernel time (SVG and PNG), for the CLI and the TUI's export: one chart,
one shared axis, before and after side by side, each bar with its interquartile range and
the totals in the subtitle (the rows come from workbench.present.timing.chart_rows)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Sequence

from engine.files import write_atomic
from workbench.present.timing import ChartRow, chart_totals

BEFORE_COLOR, AFTER_COLOR = "#9aa5b1", "#2e7d32"


def timing_chart(rows: Sequence[ChartRow], title: str, out_base: Path, series: tuple[str, str] = ("before", "after"),
                 note: str = "", top: int = 24) -> list[Path]:
    """Horizontal bars per row (largest first, at most `top`): before and after on one axis,
    whiskers from Q1 to Q3; a row with only one side draws that side. Writes out_base.svg
    and .png and returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted(rows, key=lambda r: -max(s.median_ms for s in (r.before, r.after) if s is not None))
    shown = rows[:top][::-1]
    both = any(r.before is not None for r in shown) and any(r.after is not None for r in shown)
    height = 0.38 if both else 0.3
    fig, ax = plt.subplots(figsize=(10, 0.42 * max(len(shown), 4) + 1.9))
    for offset, side, name, color in ((height / 2, "before", series[0], BEFORE_COLOR),
                                      (-height / 2, "after", series[1], AFTER_COLOR)):
        ys, med, err = [], [], [[], []]
        for y, r in enumerate(shown):
            s = getattr(r, side)
            if s is None:
                continue
            ys.append(y + (offset if both else 0.0))
            med.append(s.median_ms)
            err[0].append(max(s.median_ms - s.q1_ms, 0.0))
            err[1].append(max(s.q3_ms - s.median_ms, 0.0))
        if not ys:
            continue
        ax.barh(ys, med, height=height, color=color, label=name or None, xerr=err,
                error_kw={"ecolor": "#333333", "elinewidth": 0.8, "capsize": 2})
        for y, m, hi in zip(ys, med, err[1]):
            ax.text(m + hi, y, f" {m:.3f}", va="center", fontsize=6.5)
    ax.set_yticks(range(len(shown)), [r.label for r in shown])
    ax.set_xlabel("median time per inference (ms); whiskers: interquartile range of the runs")
    ax.set_xlim(left=0)
    ax.margins(x=0.12)
    ax.tick_params(axis="y", labelsize=7)
    ax.grid(axis="x", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    subtitle = chart_totals(rows, series)
    if len(rows) > top:
        subtitle += f"; {len(rows) - top} smaller rows not drawn"
    fig.suptitle(title, fontsize=10, x=0.01, ha="left")
    ax.set_title(subtitle + (f"\n{note}" if note else ""), fontsize=7.5, loc="left", color="#444444")
    if any(series):
        ax.legend(loc="lower right", fontsize=7, frameon=False)
    fig.tight_layout()
    paths = []
    for fmt in ("svg", "png"):
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=110, bbox_inches="tight")
        paths.append(write_atomic(out_base.with_suffix(f".{fmt}"), buf.getvalue()))
    plt.close(fig)
    return paths
