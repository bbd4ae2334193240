"""What the apply-plan stage did with each decision of a fusion plan (facts, no TVM)."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class DecisionResult(str, enum.Enum):
    APPLIED = "applied"
    NOT_APPROVED = "not approved"
    CODEGEN_REJECTED = "rejected by code generation"
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
                "policy": self.policy,
                "decisions": [{"id": d.id, "result": d.result.value, "reason": d.reason,
                               "fused_kernel": d.fused_kernel, "kernels_before": d.kernels_before,
                               "kernels_after": d.kernels_after, "members_ms": list(d.members_ms),
                               "members_sum_ms": d.members_sum_ms, "fused_ms": d.fused_ms,
                               "noise_ms": d.noise_ms}
                              for d in self.decisions]}
