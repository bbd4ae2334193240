"""Estimated gain of one horizontal fusion (a model; the compile report measures).

Cost model per target: a fixed cost per launch (CPU: one kernel call plus a thread-pool
wake-up per parallel stage; GPU: a kernel launch) and work spread over the chunks a
kernel offers: a kernel with c chunks keeps min(c, cores) cores busy.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.parallel.plan import Gain


@dataclass(frozen=True)
class CostModel:
    cores: int  # CPU cores or GPU SMs
    launch_us: float
    flops_per_us_per_core: float


def cpu_cost_model(target) -> CostModel:
    """A core per parallel chunk; a launch is a kernel call plus a thread-pool wake-up."""
    from engine.schedule.cpu.common import num_cores

    return CostModel(cores=max(num_cores(target), 1), launch_us=4.0, flops_per_us_per_core=20_000.0)


def gpu_cost_model(target) -> CostModel:
    """An SM per thread block (132: H100 SXM; the tags carry no SM count)."""
    return CostModel(cores=132, launch_us=3.0, flops_per_us_per_core=50_000.0)


def estimate_gain(model: CostModel, flops: list[int], chunks: list[int], stages: list[int]) -> Gain:
    """`stages`: parallel stages per member (the fused kernel has max(stages) phases)."""
    chunks = [max(c, 1) for c in chunks]
    total_chunks = sum(chunks)
    busy = [min(c, model.cores) for c in chunks]
    work = sum(flops) or 1
    before = sum(f * b for f, b in zip(flops, busy)) / (work * model.cores)
    after = min(total_chunks, model.cores) / model.cores
    rate = model.flops_per_us_per_core
    alone = sum(f / (rate * b) for f, b in zip(flops, busy)) + model.launch_us * sum(stages)
    fused = work / (rate * min(total_chunks, model.cores)) + model.launch_us * max(stages)
    return Gain(launches_saved=len(flops) - 1, parallel_regions_saved=sum(stages) - max(stages),
                member_chunks=tuple(chunks), fused_chunks=total_chunks,
                utilisation_before=round(before, 4), utilisation_after=round(after, 4),
                estimated_us=round(alone - fused, 2))
