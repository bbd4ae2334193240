"""What the apply-plan stage did (engine.parallel.outcome.PlanOutcome): the report's "fusion"
JSON, the lines `workbench compile` prints, the TUI's per-decision results.

    fusion_lines(outcome, plan)[0]  ->  "fusion       launches 4 -> 3 per inference;  check: ..."
"""

from __future__ import annotations

from engine.parallel.outcome import DecisionOutcome, DecisionResult, PlanOutcome
from engine.parallel.plan import FusionPlan
from engine.timing import ratio
from workbench.present.timing import (SAME_RUN, decision_change, decision_change_text, group_lines, ms, ratio_text,
                                      same_run_text, signed_ms)


def fusion_json(outcome: PlanOutcome, plan: FusionPlan) -> dict:
    """The outcome's JSON, each decision with the plan's kind and title."""
    data = outcome.to_json()
    titles = {d.id: (d.kind.value, d.title()) for d in plan.decisions}
    for d in data["decisions"]:
        d["kind"], d["title"] = titles[d["id"]]
    return data


def fusion_lines(outcome: PlanOutcome, plan: FusionPlan) -> list[str]:
    """Launches and the end-to-end check, the same-run end-to-end times, a table of decisions
    with their kernel times (each difference signed and with its noise), then the
    before/after of every operator group."""
    lines = [f"fusion       launches {outcome.launches_before} -> {outcome.launches_after} per inference;  "
             f"check: {outcome.verified}"]
    same = same_run_text(outcome)
    if same:
        lines.append(f"fusion       end to end, {SAME_RUN}: {same}")
    if outcome.kernel_timing:
        lines.append(f"fusion       kernel times: {outcome.kernel_timing}")
    width = max([len(d.result.value) for d in outcome.decisions] + [6])
    lines.append(f"{'decision':<8} {'result':<{width}} {'kernels':>8} {'members ms':>11} {'fused ms':>9} "
                 f"{'fused − members ms':>19} {'speedup':>12}  members")
    titles = {d.id: d.title() for d in plan.decisions}
    groups = {g.decision: g for g in outcome.groups if g.decision}
    for d in outcome.decisions:
        change = decision_change(d)
        if change is not None:
            group = groups.get(d.id)
            speed = ratio(group.before, group.after) if group and group.before and group.after else None
            times = (f"{ms(d.members_sum_ms):>11} {ms(d.fused_ms):>9} "
                     f"{signed_ms(change.value_ms) + f' ±{change.noise_ms:.3f}':>19} "
                     f"{ratio_text(speed) if speed else '—':>12}")
        else:
            times = f"{'—':>11} {'—':>9} {'—':>19} {'—':>12}"
        kernels = f"{d.kernels_before}->{d.kernels_after}" if _applied(d) else "-"
        lines.append(f"{d.id:<8} {d.result.value:<{width}} {kernels:>8} {times}  {titles[d.id][:60]}")
        if d.reason and not _applied(d):
            lines.append(f"{'':<8} reason: {d.reason[:150]}")
    if outcome.groups:
        lines += [""] + group_lines(outcome)
    return lines


def outcome_summary(outcome: PlanOutcome) -> str:
    """One line: launches, the check, end-to-end times when measured (same run, with noise)."""
    same = same_run_text(outcome)
    return (f"launches {outcome.launches_before} -> {outcome.launches_after}, {outcome.verified}"
            + (f"; end to end, {SAME_RUN}: {same}" if same else ""))


def decision_result(d: DecisionOutcome) -> str:
    """What happened to one decision, with the reason: "rolled back (verification failed): ...";
    an applied one with its measured change: "applied; fused − members: −0.029 ms ±0.010 (faster)"."""
    text = d.result.value + (f": {d.reason}" if d.reason else "")
    change = decision_change_text(d) if _applied(d) else ""
    return text + (f"; {change}" if change else "")


def saved_ms(d: DecisionOutcome) -> float | None:
    """The members' kernel time minus the fused kernel's, when both were measured."""
    if d.members_sum_ms is None or d.fused_ms is None:
        return None
    return d.members_sum_ms - d.fused_ms


def _applied(d: DecisionOutcome) -> bool:
    return d.result is DecisionResult.APPLIED
