"""What the apply-plan stage did (engine.parallel.outcome.PlanOutcome): the report's "fusion"
JSON, the lines `workbench compile` prints, the TUI's per-decision results.

    fusion_lines(outcome, plan)[0]  ->  "fusion       launches 4 -> 3 per inference;  check: ..."
"""

from __future__ import annotations

from engine.parallel.outcome import DecisionOutcome, DecisionResult, PlanOutcome
from engine.parallel.plan import FusionPlan


def fusion_json(outcome: PlanOutcome, plan: FusionPlan) -> dict:
    """The outcome's JSON, each decision with the plan's kind and title."""
    data = outcome.to_json()
    titles = {d.id: (d.kind.value, d.title()) for d in plan.decisions}
    for d in data["decisions"]:
        d["kind"], d["title"] = titles[d["id"]]
    return data


def fusion_lines(outcome: PlanOutcome, plan: FusionPlan) -> list[str]:
    """Launches and the end-to-end check, then a table of decisions with their kernel times."""
    lines = [f"fusion       launches {outcome.launches_before} -> {outcome.launches_after} per inference;  "
             f"check: {outcome.verified}"]
    if outcome.unfused_ms is not None:
        noise = f", noise {outcome.e2e_noise_ms:.3f} ms" if outcome.e2e_noise_ms is not None else ""
        lines.append(f"fusion       end to end, same run: unfused {outcome.unfused_ms:.3f} ms, "
                     f"fused {outcome.fused_ms:.3f} ms ({outcome.unfused_ms / outcome.fused_ms:.2f}x{noise})")
    if outcome.kernel_timing:
        lines.append(f"fusion       kernel times: {outcome.kernel_timing}")
    width = max([len(d.result.value) for d in outcome.decisions] + [6])
    lines.append(f"{'decision':<8} {'result':<{width}} {'kernels':>8} {'members ms':>11} {'fused ms':>9} "
                 f"{'speedup':>8}  members")
    titles = {d.id: d.title() for d in plan.decisions}
    for d in outcome.decisions:
        before, fused = d.members_sum_ms, d.fused_ms
        times = (f"{before:>11.3f} {fused:>9.3f} {before / fused:>7.2f}x" if before and fused
                 else f"{'-':>11} {'-':>9} {'-':>8}")
        kernels = f"{d.kernels_before}->{d.kernels_after}" if _applied(d) else "-"
        lines.append(f"{d.id:<8} {d.result.value:<{width}} {kernels:>8} {times}  {titles[d.id][:60]}")
        if d.reason and not _applied(d):
            lines.append(f"{'':<8} reason: {d.reason[:150]}")
    return lines


def outcome_summary(outcome: PlanOutcome) -> str:
    """One line: launches, the check, end-to-end times when measured."""
    return (f"launches {outcome.launches_before} -> {outcome.launches_after}, {outcome.verified}"
            + (f", end to end {outcome.unfused_ms:.3f} -> {outcome.fused_ms:.3f} ms (same run)"
               if outcome.unfused_ms and outcome.fused_ms else ""))


def decision_result(d: DecisionOutcome) -> str:
    """What happened to one decision, with the reason: "rolled back (verification failed): ..."."""
    return d.result.value + (f": {d.reason}" if d.reason else "")


def saved_ms(d: DecisionOutcome) -> float | None:
    """The members' kernel time minus the fused kernel's, when both were measured."""
    if d.members_sum_ms is None or d.fused_ms is None:
        return None
    return d.members_sum_ms - d.fused_ms


def _applied(d: DecisionOutcome) -> bool:
    return d.result is DecisionResult.APPLIED
