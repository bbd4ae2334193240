"""Tuning options as plain data (no TVM import): what front ends build from their flags."""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import BlockwiseError

MIN_TRIALS_PER_KERNEL = 64  # 32 MetaSchedule trials rarely beat our default conv schedules; 64 did (1.38x, squeezenet's 1000-class conv)


@dataclass(frozen=True)
class RpcEndpoint:
    """A TVM RPC tracker and the device key registered there (`HOST:PORT:KEY`)."""

    host: str
    port: int
    key: str

    @staticmethod
    def parse(text: str) -> "RpcEndpoint":
        parts = text.rsplit(":", 2)
        if len(parts) != 3 or not parts[1].isdigit() or not parts[0] or not parts[2]:
            raise BlockwiseError(f"--rpc wants HOST:PORT:KEY, got '{text}'")
        return RpcEndpoint(parts[0], int(parts[1]), parts[2])

    def __str__(self) -> str:
        return f"{self.host}:{self.port}:{self.key}"


@dataclass(frozen=True)
class TuneOptions:
    trials: int  # total trial budget of one compile (MetaSchedule's max_trials_global)
    rpc: RpcEndpoint | None = None  # measure on devices behind an RPC tracker
    db_root: str | None = None  # folder of the per-(model, target) stores; .blockwise/tune
    trials_per_kernel: int = MIN_TRIALS_PER_KERNEL  # a tuned kernel gets at least this many
    trials_per_round: int = 16  # candidates per builder/runner batch
    seed: int = 1
    cotune_trials: int = 0  # > 0: co-tune each approved decision of the plan, per method
