"""Estimated gain of one horizontal fusion (a model; the compile report measures).

Cost model per target: a fixed cost per launch (CPU: one kernel call plus a thread-pool
wake-up per parallel stage; GPU: a kernel launch) and work spread over the chunks a
kernel offers, in rounds of one chunk per core (SM): the last round of c chunks keeps only
c mod cores of them busy (busy_share). The GPU model's SM
count and rates come from the device table (engine.gpu_devices) for the target's arch.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.gpu_devices import device_for_arch
from engine.parallel.plan import Gain


@dataclass(frozen=True)
class CostModel:
    cores: int  # CPU cores or GPU SMs
    launch_us: float
    flops_per_us_per_core: float  # the rate estimates assume per busy core, not a peak
    bytes_per_us: float = 0.0  # peak DRAM bandwidth (GPU; 0: not modelled)
    device: str = ""  # what the numbers describe

    @property
    def prices_memory(self) -> bool:
        """Whether estimates count memory traffic (a bandwidth is modelled)."""
        return self.bytes_per_us > 0

    def memory_us(self, nbytes: float) -> float:
        """Microseconds to move `nbytes` at the modelled bandwidth (0 where none is)."""
        return nbytes / self.bytes_per_us if self.prices_memory else 0.0


# The CPU rate the estimates assume per core: two FMA ports of the target ISA's vector width
# (2 flop per lane each) at an assumed CPU_GHZ, of which the default schedules sustain
# CPU_PEAK_FRACTION. Measured on a 2-core Zen 5 (AVX-512): an FMA loop peaks at 271 GFLOP/s
# per core and resnet50's convs run at 61-94% of that; AVX2 code peaks at 135 per core
# (bench/cpu_roofline.c).
# The former fixed 20 GFLOP/s per core priced a row band's recomputed halo rows ~10x too
# high (resnet50's res2 1x1 -> 3x3 pairs read "-88 us" and measured 1.09x faster).
CPU_GHZ = 3.0
CPU_PEAK_FRACTION = 0.6


def cpu_flops_per_us(isa) -> float:
    """Estimated flop per microsecond one core sustains for `isa` (engine.schedule.cpu.isa)."""
    return isa.lanes() * 2 * 2 * CPU_GHZ * 1e3 * CPU_PEAK_FRACTION


def cpu_cost_model(target) -> CostModel:
    """A core per parallel chunk; a launch is a kernel call plus a thread-pool wake-up; the
    rate from the target's ISA (cpu_flops_per_us); memory traffic not modelled."""
    from engine.schedule.cpu.common import num_cores
    from engine.schedule.cpu.isa import isa_of

    return CostModel(cores=max(num_cores(target), 1), launch_us=4.0,
                     flops_per_us_per_core=cpu_flops_per_us(isa_of(target)))


# Untuned (dlight) kernels reach a fraction of the FP32 peak; 0.1 is what the former fixed
# rate implied on H100 SXM (50,000 flop/us per SM x 132 SMs = 6.6 TFLOP/s of 67), an
# assumption of the model, not a measurement.
_GPU_PEAK_FRACTION = 0.1


def gpu_cost_model(target) -> CostModel:
    """An SM per thread block, the numbers of the device row of the target's arch
    (engine.gpu_devices; an arch not in the table gets its conservative default):

    - cores: the device's SM count (H100 SXM 132, A100 108, RTX 3090 82);
    - flops_per_us_per_core: FP32 peak / SMs x `_GPU_PEAK_FRACTION` (flop per us per SM
      that an untuned kernel is assumed to sustain);
    - bytes_per_us: peak DRAM bandwidth (GB/s x 1000);
    - launch_us: 3 us per kernel launch (a model constant, not from the table).
    """
    device = device_for_arch(str(target.arch))
    peak_per_sm = device.fp32_tflops * 1e6 / device.sms  # TFLOP/s = 1e6 flop/us
    return CostModel(cores=device.sms, launch_us=3.0, flops_per_us_per_core=peak_per_sm * _GPU_PEAK_FRACTION,
                     bytes_per_us=device.dram_gbps * 1e3, device=device.name)


def busy_share(chunks: int, cores: int) -> float:
    """The share of the cores (SMs) a kernel of `chunks` equal chunks keeps busy over its
    run: it takes ceil(chunks / cores) rounds (waves), the last one partly idle (25 chunks
    on 2 cores: 96%; 3 chunks: 75%; 1 chunk: 50%)."""
    chunks = max(chunks, 1)
    return chunks / (-(-chunks // cores) * cores)


def weighted_busy(work, chunks, cores: int) -> float:
    """The share of the cores kernels keep busy when each runs alone, weighted by its work."""
    total = sum(work)
    return sum(w * busy_share(c, cores) for w, c in zip(work, chunks)) / total if total else 0.0


def estimate_gain(model: CostModel, flops: list[int], chunks: list[int], stages: list[int],
                  fused_chunks: int | None = None) -> Gain:
    """`stages`: parallel stages per member (the fused kernel has max(stages) phases);
    `fused_chunks`: the fused kernel's blocks when its code generator regroups the members'
    (default: their sum). Each kernel's work runs at the rate of the cores it keeps busy
    (busy_share: rounds of chunks, the last one partly idle)."""
    chunks = [max(c, 1) for c in chunks]
    total_chunks = fused_chunks or sum(chunks)
    busy = [busy_share(c, model.cores) for c in chunks]
    work = sum(flops) or 1
    before = weighted_busy(flops, chunks, model.cores)
    after = busy_share(total_chunks, model.cores)
    rate = model.flops_per_us_per_core * model.cores
    alone = sum(f / (rate * b) for f, b in zip(flops, busy)) + model.launch_us * sum(stages)
    fused = work / (rate * after) + model.launch_us * max(stages)
    return Gain(launches_saved=len(flops) - 1, parallel_regions_saved=sum(stages) - max(stages),
                member_chunks=tuple(chunks), fused_chunks=total_chunks,
                utilisation_before=round(before, 4), utilisation_after=round(after, 4),
                estimated_us=round(alone - fused, 2))
