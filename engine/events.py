"""What a compile is asked to do and what it reports while running: the stage names,
stage events for progress displays, and the compile options. No TVM import: front ends
load this cheaply.

    options = CompileOptions(target="llvm", plan=approved_plan, tuning=TuneOptions(trials=64))
    session.compile(options, progress=lambda e: print(e.stage.value, e.status.value, e.message))
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from engine.errors import BlockwiseError

if TYPE_CHECKING:
    from engine.parallel.plan import FusionPlan
    from engine.tuning.options import TuneOptions


class Stage(str, enum.Enum):
    IMPORT = "import"
    FUSE = "fuse"
    SCHEDULE = "schedule"
    APPLY_PLAN = "apply plan"
    BUILD = "build"
    VERIFY = "verify"
    TIME = "time"


STAGES = tuple(Stage)


class StageStatus(str, enum.Enum):
    START = "start"
    PROGRESS = "progress"  # a long stage's intermediate message (tuning)
    DONE = "done"
    SKIP = "skip"
    FAIL = "fail"


@dataclass(frozen=True)
class StageEvent:
    stage: Stage
    status: StageStatus
    seconds: float = 0.0
    message: str = ""


ProgressFn = Callable[[StageEvent], None]


class Cancelled(BlockwiseError):
    """The compile was cancelled between stages."""


class FusionPolicy(str, enum.Enum):
    """Which of the plan's decisions the apply-plan stage keeps."""

    APPROVED = "approved"  # every approved decision that generates code and verifies
    # every proposed decision is tried, and kept only if measured faster than its members
    # beyond the measurement's noise (targets without a device: if estimated faster)
    MEASURED_WINNERS = "auto"


@dataclass(frozen=True)
class CompileOptions:
    target: str = "llvm"
    arch: str | None = None
    runs: int = 20
    rtol: float = 1e-3
    atol: float = 1e-4
    seed: int = 0
    timing: bool = True
    stop_after: Stage | None = None  # e.g. Stage.SCHEDULE for analyses of scheduled kernels
    # The fusion plan whose approved decisions the "apply plan" stage executes (None: skip).
    plan: "FusionPlan | None" = None
    fusion_policy: FusionPolicy = FusionPolicy.APPROVED
    # Kernel tuning (and co-tuning of the plan's approved groups) in the schedule stage.
    tuning: "TuneOptions | None" = None
