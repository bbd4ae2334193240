"""Estimated time of one fused CUDA launch (Magneto's co-tuning without a GPU). No TVM.

A fused kernel is a list of member block ranges in launch order. Each SM holds up to
`resident_blocks` at once (threads, blocks and shared memory per SM from
engine.gpu_devices; registers are not known before ptxas and are not counted); with fewer
blocks than that many waves, the blocks spread one layer per SM. A block runs at
min(its warps / SATURATING_WARPS, 1 / blocks on its SM) of the SM's rate: a lone
128-thread block cannot fill an SM, a full SM is shared. A block's work is its member's
FLOPs and bytes split over its blocks, at the SM's share of the device's peak rates
(`CostModel`), scaled up by the idle thread slots of a predicated member. Blocks are issued in range order to the first free slot, as
the hardware block scheduler does; the estimate is the time the last block ends (so the
order of the ranges and the block sizes move it through the tail). Every figure here is an
estimate and is labelled so wherever it shows.

    launch_us([MemberLoad("conv", 2e9, 1e6, blocks=264, threads=128, busy_threads=128,
                          shared_bytes=6912)], device_for_arch("sm_90"), rates)
    -> 264 blocks over 132 SMs x 16 resident slots: one partial wave, plus the launch cost
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from engine.gpu_devices import GpuDevice


@dataclass(frozen=True)
class MemberLoad:
    """One member of a fused launch, as the estimator sees it."""

    name: str
    flops: float
    bytes: float
    blocks: int
    threads: int  # threads per block of the fused kernel
    busy_threads: int  # threads per block with work (fewer when predicated)
    shared_bytes: int


@dataclass(frozen=True)
class Rates:
    """Per-SM rates an untuned kernel sustains (engine.parallel.gain.CostModel)."""

    flops_per_us_per_sm: float
    bytes_per_us: float  # the whole device's DRAM bandwidth
    launch_us: float


def resident_blocks(threads: int, shared_bytes: int, device: GpuDevice) -> int:
    """Blocks per SM at once, bounded by threads, blocks and shared memory (not registers)."""
    by_threads = device.max_threads_per_sm // max(threads, 1)
    per_block = shared_bytes + device.smem_reserved_per_block if shared_bytes else 0
    by_smem = device.smem_per_sm // per_block if per_block else device.max_blocks_per_sm
    return max(1, min(by_threads, device.max_blocks_per_sm, by_smem))


# Warps an SM needs resident to reach its rate (an assumption of the model: half of an
# sm_80/sm_90 SM's 64 warps hide latency for the untuned kernels estimated here).
SATURATING_WARPS = 16


def block_us(m: MemberLoad, device: GpuDevice, rates: Rates) -> float:
    """One block of `m` alone on an SM: compute or memory bound, whichever is slower."""
    per = max(m.blocks, 1)
    compute = m.flops / per / rates.flops_per_us_per_sm
    memory = m.bytes / per / (rates.bytes_per_us / device.sms)
    waste = m.threads / max(m.busy_threads, 1)  # predicated threads take issue slots too
    return max(compute, memory) * waste


def launch_us(members: list[MemberLoad], device: GpuDevice, rates: Rates) -> float:
    """Estimated time of one launch running `members`' block ranges in this order."""
    if not members:
        return 0.0
    total = sum(m.blocks for m in members)
    resident = min(resident_blocks(m.threads, m.shared_bytes, device) for m in members)
    per_sm = max(1, min(resident, -(-total // device.sms)))  # blocks an SM holds at once
    slots = [0.0] * (device.sms * per_sm)
    heapq.heapify(slots)
    end = 0.0
    for m in members:
        warps = -(-m.threads // device.warp_size)
        share = min(warps / SATURATING_WARPS, 1.0 / per_sm)  # of its SM's rate
        t = block_us(m, device, rates) / share
        for _ in range(m.blocks):
            start = heapq.heappop(slots)
            heapq.heappush(slots, start + t)
            end = max(end, start + t)
    return end + rates.launch_us
