"""What the apply-plan stage did with each decision of a fusion plan (facts, no TVM)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Mapping, Sequence

from engine.timing import Spread


class DecisionResult(str, enum.Enum):
    APPLIED = "applied"
    NOT_APPROVED = "not approved"
    CODEGEN_REJECTED = "rejected by code generation"
    OVERLAPPED = "skipped (shares a kernel with an applied decision)"  # plan.application_order decides
    ROLLED_BACK = "rolled back (verification failed)"
    NO_MEASURED_GAIN = "dropped (no measured gain)"  # FusionPolicy.MEASURED_WINNERS
    NO_ESTIMATED_GAIN = "dropped (no estimated gain)"  # the same without a device to measure on


@dataclass(frozen=True)
class DecisionOutcome:
    id: str
    result: DecisionResult
    reason: str = ""
    fused_kernel: str = ""
    kernels_before: int = 0  # launches of the members
    kernels_after: int = 0  # 1 when applied
    members_ms: tuple[float, ...] = ()  # each member kernel in the unfused build
    fused_ms: float | None = None  # the fused kernel in the fused build
    noise_ms: float | None = None  # summed spread of those timings: a gain below it is noise

    @property
    def members_sum_ms(self) -> float | None:
        return sum(self.members_ms) if self.members_ms else None


@dataclass(frozen=True)
class GroupTiming:
    """One operator group in the before/after of one compile, both builds timed in the same
    apply step (each kernel alone): a fused kernel and the kernels it replaced, or a kernel
    the plan left as it was (then `members` is itself)."""

    kernel: str  # in the fused build
    members: tuple[str, ...]  # kernels of the unfused build it stands for, in execution order
    labels: tuple[str, ...]  # each member as its first operator is named ("expand1x1/conv")
    ops: tuple[str, ...]  # operator ids it computes
    decision: str = ""  # the decision that fused it; "" when the plan left it alone
    before: Spread | None = None  # the members, per inference, in the unfused build
    after: Spread | None = None  # this kernel, per inference, in the fused build

    def to_json(self) -> dict:
        def spread(s: Spread | None):
            return None if s is None else {"median_ms": s.median_ms, "q1_ms": s.q1_ms, "q3_ms": s.q3_ms,
                                            "samples": s.samples}
        return {"kernel": self.kernel, "members": list(self.members), "labels": list(self.labels),
                "ops": list(self.ops), "decision": self.decision, "before": spread(self.before),
                "after": spread(self.after)}


def group_timings(before_kernels: Sequence, after_kernels: Sequence,
                  fused: Mapping[str, tuple[str, Sequence[int]] | list[tuple[str, Sequence[int]]]],
                  before: Mapping[str, Spread], after: Mapping[str, Spread],
                  labels: Mapping[str, str] | None = None) -> tuple[GroupTiming, ...]:
    """The groups of one plan compile, in the fused build's execution order.

    `before_kernels`/`after_kernels`: KernelCall-shaped (var, func, ops) of the unfused and
    fused builds; `fused`: fused kernel name -> (decision id, indices of its members in
    `before_kernels`), or a list of them in execution order when several decisions made the
    same kernel (identical blocks fuse into one deduplicated function: its calls are
    matched to them in turn); `before`/`after`: kernel name -> its time per call in that
    build; `labels`: op id -> name. A kernel the plan left keeps its `var` in both builds.

        >>> group_timings([a, b, c], [hfused, c], {"hfused_d0": ("d0", (0, 1))}, ...)
        (GroupTiming("hfused_d0", ("a", "b"), ...), GroupTiming("c", ("c",), ...))
    """
    labels = labels or {}
    by_var = {k.var: k for k in before_kernels}
    calls = dict.fromkeys(fused, 0)
    out = []
    for k in after_kernels:
        if k.func in fused:
            entries = fused[k.func] if isinstance(fused[k.func], list) else [fused[k.func]]
            decision, indices = entries[min(calls[k.func], len(entries) - 1)]
            calls[k.func] += 1
            members = [before_kernels[i] for i in indices]
        else:
            decision, members = "", [by_var[k.var]] if k.var in by_var else []
        if not members:
            continue
        times = [before.get(m.func) for m in members]
        out.append(GroupTiming(
            k.func, tuple(m.func for m in members),
            tuple(labels.get(m.ops[0], m.func) if m.ops else m.func for m in members),
            tuple(o for m in members for o in m.ops), decision,
            Spread.total(times) if all(t is not None for t in times) else None, after.get(k.func)))
    return tuple(out)


@dataclass(frozen=True)
class PlanOutcome:
    decisions: tuple[DecisionOutcome, ...]
    launches_before: int
    launches_after: int
    verified: str  # summary of the applier's own verification
    unfused_ms: float | None = None  # end-to-end median, same run
    fused_ms: float | None = None
    notes: tuple[str, ...] = ()
    kernel_timing: str = ""  # how members_ms / fused_ms were measured
    e2e_noise_ms: float | None = None  # spread of the end-to-end rounds: a difference below it is noise
    policy: str = "approved"  # engine.events.FusionPolicy value
    groups: tuple[GroupTiming, ...] = ()  # the before/after of this compile, per operator group
    unfused: Spread | None = None  # end to end, all rounds: unfused_ms is its median
    fused: Spread | None = None

    def applied(self) -> int:
        return sum(d.result is DecisionResult.APPLIED for d in self.decisions)

    def summary_notes(self) -> list[str]:
        return [f"fusion plan: {self.applied()} of {len(self.decisions)} decisions applied, launches "
                f"{self.launches_before} -> {self.launches_after}", *self.notes]

    def to_json(self) -> dict:
        return {"launches_before": self.launches_before, "launches_after": self.launches_after,
                "verified": self.verified, "unfused_latency_ms": self.unfused_ms,
                "fused_latency_ms": self.fused_ms, "notes": list(self.notes),
                "kernel_timing": self.kernel_timing, "e2e_noise_ms": self.e2e_noise_ms,
                "policy": self.policy, "groups": [g.to_json() for g in self.groups],
                "decisions": [{"id": d.id, "result": d.result.value, "reason": d.reason,
                               "fused_kernel": d.fused_kernel, "kernels_before": d.kernels_before,
                               "kernels_after": d.kernels_after, "members_ms": list(d.members_ms),
                               "members_sum_ms": d.members_sum_ms, "fused_ms": d.fused_ms,
                               "noise_ms": d.noise_ms}
                              for d in self.decisions]}
