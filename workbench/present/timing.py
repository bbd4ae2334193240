"""Timing as every front end shows it (engine.timing's one model): per-kernel rows, the
end-to-end lines, the before/after of one plan compile, ratios and differences with their
noise, the warning when a reference moved. `workbench compile`, report.json, the TUI's
Timing, Fusion and Compile tabs and the exported chart all read these.

    ratio_text(Ratio(0.95, 0.031))                      ->  "0.95x ±0.03"
    change_text(Change(-0.029, 0.01), "fused − members") ->  "fused − members: −0.029 ms ±0.010 (faster)"
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Sequence

from engine.parallel.outcome import DecisionOutcome, GroupTiming, PlanOutcome
from engine.timing import (Change, KernelTime, Latency, Ratio, Spread, difference, kernel_sum, kernel_work,
                           moved, ratio)

__all__ = ["PlanOutcome", "Latency", "KernelTime"]  # the facts the views are written against (re-exported)

if TYPE_CHECKING:
    from engine.opgraph import OperatorGraph

SPREAD = "IQR"
MEDIANS = (f"medians per inference of the timed runs (warm-up excluded), spread {SPREAD} (p25–p75); "
           "share = a kernel's median over the sum of the kernel medians; ± is the noise: both IQRs added")
GAPS = ("the sum of kernel medians is not the end-to-end latency: that also holds the gaps between "
        "kernels (launches, allocation, the VM), and in-place kernel times include the timing hook")
SAME_RUN = "same run"  # both builds of one plan compile, timed alternately in its apply step


# --- numbers with their noise ------------------------------------------------------------

def ms(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def spread_text(s: Spread, digits: int = 3) -> str:
    """"0.782–1.203" (the interquartile range)."""
    return f"{s.q1_ms:.{digits}f}–{s.q3_ms:.{digits}f}"


def ratio_text(r: Ratio) -> str:
    """"0.95x ±0.03"."""
    return f"{r.value:.2f}x ±{r.noise:.2f}"


def signed_ms(value: float, digits: int = 3) -> str:
    """"+0.011" / "−0.029" (a real minus sign); "0.000" when it rounds to zero."""
    if round(abs(value), digits) == 0:
        return f"{0:.{digits}f}"
    return ("+" if value >= 0 else "−") + f"{abs(value):.{digits}f}"


def change_text(c: Change, what: str = "after − before") -> str:
    """"fused − members: −0.029 ms ±0.010 (faster)": what was subtracted from what, the
    noise, and what the sign means."""
    return f"{what}: {signed_ms(c.value_ms)} ms ±{c.noise_ms:.3f} ({c.verdict})"


def speedup_text(before: Spread, after: Spread) -> str:
    """"1.15x ±0.04 (faster)" / "0.95x ±0.08 (within noise)": before / after."""
    r = ratio(before, after)
    word = ("faster" if r.value > 1 else "slower") if r.significant else "within noise"
    return f"{ratio_text(r)} ({word})"


# --- per-kernel rows ---------------------------------------------------------------------

@dataclass(frozen=True)
class KernelRow:
    """One kernel of one compile, timed in place: per inference unless said."""

    name: str
    calls: int
    median_ms: float
    q1_ms: float
    q3_ms: float
    share: float
    gflops: float | None  # from the operator graph's FLOPs over the median
    gbs: float | None  # bytes read and written (engine.timing.kernel_work) over the median
    ops: tuple[str, ...] = ()
    ids: str = ""  # its calls as the graph and the Fusion tab name kernels: "k72" ("k72 k80": two calls)


# (header, KernelRow attribute, format): the CLI table and the TUI's KernelTable.
KERNEL_COLUMNS = (("Time %", "share", "{:.1%}"), ("Med ms", "median_ms", "{:.3f}"),
                  ("Q1 ms", "q1_ms", "{:.3f}"), ("Q3 ms", "q3_ms", "{:.3f}"), ("Calls", "calls", "{}"),
                  ("GFLOP/s", "gflops", "{:.1f}"), ("GB/s", "gbs", "{:.1f}"), ("Kernel", "name", "{}"))


def cell(row, attr: str, fmt: str) -> str:
    value = getattr(row, attr)
    return "—" if value is None else fmt.format(value)


def kernel_rows(times: Sequence[KernelTime], kernels: Sequence = (), graph: OperatorGraph | None = None
                ) -> list[KernelRow]:
    """Rows in the engine's order (largest median first). `kernels`: the compile's KernelCalls
    (their operators: FLOPs, bytes and the graph jump); `graph` for the FLOP/byte estimates."""
    ops_of: dict[str, tuple[str, ...]] = {}
    ids_of: dict[str, str] = {}
    funcs_of: dict[str, set[str]] = {}
    for k in kernels:
        ops_of[k.func] = ops_of.get(k.func, ()) + tuple(k.ops)
        ids_of[k.func] = (ids_of.get(k.func, "") + f" k{k.index}").strip()
        for op in k.ops:
            funcs_of.setdefault(op, set()).add(k.func)
    rows = []
    for t in times:
        per = t.per_inference
        ops = ops_of.get(t.name, ())
        # An operator lowered to several kernels (an LSTM's 50, a Split's slices): how its
        # work divides between them is unknown, so none of them shows a throughput
        shared = any(len(funcs_of[op]) > 1 for op in ops)
        work = kernel_work(graph, ops) if graph is not None and ops and not shared else None
        rows.append(KernelRow(t.name, t.calls, per.median_ms, per.q1_ms, per.q3_ms, t.share,
                              work.gflops(per.median_ms) if work else None,
                              work.gbytes(per.median_ms) if work else None, ops, ids_of.get(t.name, "")))
    return rows


def op_medians(kernels: Sequence, times: Sequence[KernelTime]) -> dict[str, float]:
    """Op id -> the median per inference of the kernel computing it (the graph's heat)."""
    median = {t.name: t.per_inference.median_ms for t in times}
    return {op: median[k.func] for k in kernels if k.func in median for op in k.ops}


def kernel_table_lines(rows: Sequence[KernelRow]) -> list[str]:
    width = max([len(r.name) for r in rows] + [6])
    width = min(width, 48)
    head = f"{'kernel':<{width}} {'calls':>5} {'median':>8} {SPREAD:>15} {'share':>6} {'GFLOP/s':>8} {'GB/s':>7}"
    lines = [f"kernels      {MEDIANS}", head]
    for r in rows:
        lines.append(f"{r.name[:width]:<{width}} {r.calls:>5} {r.median_ms:>8.3f} "
                     f"{r.q1_ms:>7.3f}–{r.q3_ms:<7.3f} {r.share:>6.1%} {cell(r, 'gflops', '{:.1f}'):>8} "
                     f"{cell(r, 'gbs', '{:.1f}'):>7}")
    return lines


def kernel_rows_json(rows: Sequence[KernelRow]) -> list[dict]:
    return [{"name": r.name, "calls": r.calls, "median_ms": r.median_ms, "q1_ms": r.q1_ms,
             "q3_ms": r.q3_ms, "share": r.share, "gflops": r.gflops, "gb_per_s": r.gbs} for r in rows]


# --- end to end --------------------------------------------------------------------------

def latency_text(lat: Latency) -> str:
    """"1.140 ms median of 20 runs (IQR 1.101–1.310)"."""
    return f"{lat.median_ms:.3f} ms median of {lat.runs} runs ({SPREAD} {spread_text(lat.spread)})"


def latency_lines(latency: Latency | None, reference: Latency | None, times: Sequence[KernelTime] = ()
                  ) -> list[str]:
    """The compile's own end-to-end line, its ratio to onnxruntime with the noise, and how the
    kernels' sum relates to it."""
    if latency is None:
        return []
    lines = [f"latency      {latency_text(latency)}"]
    if reference is not None:
        lines.append(f"onnxruntime  {latency_text(reference)}  -> ours/onnxruntime "
                     f"{ratio_text(ratio(latency.spread, reference.spread))}")
    if times:
        total = kernel_sum(times)
        lines.append(f"kernel sum   {total.median_ms:.3f} ms = {total.median_ms / latency.median_ms:.0%} of end to "
                     f"end; {GAPS}")
    return lines


def reference_text(latency: Latency, reference: Latency, name: str = "onnxruntime") -> str:
    """"onnxruntime 2.000 ms: ours/onnxruntime 0.57x ±0.08"."""
    return (f"{name} {reference.median_ms:.3f} ms: ours/{name} "
            f"{ratio_text(ratio(latency.spread, reference.spread))}")


def across_compiles(before: Latency, after: Latency) -> Ratio:
    """The speedup of one compile's latency over another's (before / after), with noise."""
    return ratio(before.spread, after.spread)


def kernel_sum_text(times: Sequence[KernelTime], latency: Latency) -> str:
    """"kernel medians sum to 0.800 ms (70% of end to end)"."""
    total = kernel_sum(times)
    return f"kernel medians sum to {total.median_ms:.3f} ms ({total.median_ms / latency.median_ms:.0%} of end to end)"


def same_run_text(outcome: PlanOutcome) -> str | None:
    """"unfused 1.086 ms -> fused 1.097 ms: 0.99x ±0.03 (within noise); fused − unfused: +0.011 ms ±0.020
    (within noise)", or None when the plan compile did not time both builds."""
    if outcome.unfused is None or outcome.fused is None:
        return None
    return (f"unfused {outcome.unfused.median_ms:.3f} ms -> fused {outcome.fused.median_ms:.3f} ms: "
            f"{speedup_text(outcome.unfused, outcome.fused)}; "
            f"{change_text(difference(outcome.unfused, outcome.fused), 'fused − unfused')}")


def reference_warning(first: Latency | None, second: Latency | None, name: str = "onnxruntime") -> str | None:
    """When the reference moved between two compiles by more than its own noise: the
    machine's state changed, so figures of the two compiles do not compare."""
    if first is None or second is None:
        return None
    change = moved(first.spread, second.spread)
    if change is None:
        return None
    return (f"{name} moved {first.median_ms:.2f} -> {second.median_ms:.2f} ms between the two compiles "
            f"({signed_ms(change.value_ms, 2)} ms, noise ±{change.noise_ms:.2f}): the machine's load changed; "
            f"compare within one compile ({SAME_RUN} figures) or compile again")


# --- the before/after of one plan compile --------------------------------------------------

@dataclass(frozen=True)
class GroupRow:
    """One operator group: a fused kernel and what it replaced, or a kernel left alone."""

    label: str  # "hfused_d3 ← expand1x1/conv, expand3x3/conv" or the kernel's name
    before_ms: float | None
    after_ms: float | None
    change: Change | None  # after − before
    speedup: Ratio | None  # before / after
    ops: tuple[str, ...]
    decision: str = ""
    kernel: str = ""


def group_label(g: GroupTiming) -> str:
    return f"{g.kernel} ← {', '.join(g.labels)}" if g.decision else g.kernel


def group_rows(outcome: PlanOutcome) -> list[GroupRow]:
    rows = []
    for g in outcome.groups:
        both = g.before is not None and g.after is not None
        rows.append(GroupRow(group_label(g), g.before.median_ms if g.before else None,
                             g.after.median_ms if g.after else None,
                             difference(g.before, g.after) if both else None,
                             ratio(g.before, g.after) if both else None, g.ops, g.decision, g.kernel))
    return rows


BEFORE_AFTER = ("the unfused and the fused build of this compile, timed in the same run, each kernel alone on "
                "the inputs of a real run; delta = after − before (negative: faster); speedup = before / after "
                "± the noise of both")


def group_lines(outcome: PlanOutcome) -> list[str]:
    rows = group_rows(outcome)
    if not rows:
        return []
    width = min(max(len(r.label) for r in rows), 64)
    lines = [f"before/after {BEFORE_AFTER}",
             f"{'group':<{width}} {'before ms':>9} {'after ms':>9} {'delta ms':>16} {'speedup':>12}"]
    for r in rows:
        delta = f"{signed_ms(r.change.value_ms)} ±{r.change.noise_ms:.3f}" if r.change else "—"
        speed = ratio_text(r.speedup) if r.speedup else "—"
        lines.append(f"{r.label[:width]:<{width}} {ms(r.before_ms):>9} {ms(r.after_ms):>9} {delta:>16} {speed:>12}")
    before = [g.before for g in outcome.groups if g.before]
    after = [g.after for g in outcome.groups if g.after]
    if len(before) == len(after) == len(outcome.groups):
        b, a = Spread.total(before), Spread.total(after)
        lines.append(f"{'kernels, total':<{width}} {b.median_ms:>9.3f} {a.median_ms:>9.3f} "
                     f"{signed_ms(a.median_ms - b.median_ms) + f' ±{difference(b, a).noise_ms:.3f}':>16} "
                     f"{ratio_text(ratio(b, a)):>12}")
    return lines


def decision_change(d: DecisionOutcome) -> Change | None:
    """fused − members for one decision, with the noise the engine judged it by."""
    if d.members_sum_ms is None or d.fused_ms is None:
        return None
    return Change(d.fused_ms - d.members_sum_ms, d.noise_ms or 0.0)


def decision_change_text(d: DecisionOutcome) -> str:
    """"fused − members: −0.029 ms ±0.010 (faster)", or "" when not measured."""
    c = decision_change(d)
    return change_text(c, "fused − members") if c is not None else ""


# --- the exported chart -----------------------------------------------------------------------

@dataclass(frozen=True)
class ChartRow:
    """One bar pair of the timing chart: a group (or kernel) before and after, per inference."""

    label: str
    before: Spread | None
    after: Spread | None


def chart_rows(outcome: PlanOutcome | None, runs: dict[str, Sequence[KernelTime]],
               kernel_ids: Mapping[str, str] | None = None) -> tuple[list[ChartRow], tuple[str, str], str]:
    """(rows, series names, note). The plan compile's before/after (one run) when it has one,
    each group named by `kernel_ids` (op -> "k2", the fused build's kernel computing it) as
    the TUI names it; else the kernels of the compiles in `runs` (series name -> kernel times,
    one or two; in place), matched by name: a single run is drawn as the "after" side."""
    if outcome is not None and outcome.groups:
        ids = kernel_ids or {}
        e2e = (f"; end to end {outcome.unfused.median_ms:.3f} -> {outcome.fused.median_ms:.3f} ms, "
               f"{speedup_text(outcome.unfused, outcome.fused)}" if outcome.unfused and outcome.fused else "")
        return ([ChartRow(" ".join(filter(None, (ids.get(g.ops[0], "") if g.ops else "", group_label(g)))),
                          g.before, g.after) for g in outcome.groups],
                ("before: unfused build", "after: fused build"),
                "both builds of one plan compile, each kernel timed alone in the same run" + e2e)
    runs = {name: times for name, times in runs.items() if times}
    series = tuple(runs)
    if len(series) == 1:
        series = ("", series[0])
    first, second = (runs.get(series[0], ()), runs.get(series[1], ())) if len(series) == 2 else ((), ())
    names = list(dict.fromkeys([t.name for t in first] + [t.name for t in second]))
    b = {t.name: t.per_inference for t in first}
    a = {t.name: t.per_inference for t in second}
    note = "kernels timed in place" + ("; two compiles, not one run" if first and second else "")
    return [ChartRow(n, b.get(n), a.get(n)) for n in names], series, note


def chart_totals(rows: Sequence[ChartRow], series: tuple[str, str]) -> str:
    """"kernel totals: before 0.609 ms, after 0.586 ms: 1.04x ±0.05" (a side is totalled
    only when every row has it)."""
    parts = []
    totals = []
    for name, side in zip(series, ("before", "after")):
        spreads = [getattr(r, side) for r in rows]
        if name and spreads and all(s is not None for s in spreads):
            total = Spread.total(spreads)
            totals.append(total)
            parts.append(f"{name.split(':')[0]} {total.median_ms:.3f} ms")
    text = "kernel totals: " + (", ".join(parts) if parts else "—")
    if len(totals) == 2:
        text += f": {ratio_text(ratio(totals[0], totals[1]))} speedup"
    return text
