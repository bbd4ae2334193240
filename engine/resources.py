"""Resource facts of compiled GPU kernels (what ptxas reports) and their theoretical occupancy.

Loads without TVM. `engine.schedule.gpu_ptxas` fills `KernelResources` from nvcc's
`-Xptxas -v` output; `theoretical_occupancy` is the CUDA occupancy calculator's formula
(`cuda_occupancy.h`) for one kernel on one device row of `engine.gpu_devices`. Example:

    >>> from engine.gpu_devices import device_for_arch
    >>> theoretical_occupancy(64, 0, 128, device_for_arch("sm_90"))
    (0.5, <Limiter.REGISTERS: 'registers'>)

128 threads = 4 warps; 64 registers x 32 lanes = 2048 registers per warp, 16384 per
sub-partition hold 8 warps, 4 sub-partitions 32 warps = 8 blocks; 8 x 4 = 32 of 64 warps.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from engine.gpu_devices import GpuDevice


class Limiter(str, Enum):
    """What bounds the resident blocks per SM (ties go to the hardware maxima first)."""

    THREADS = "threads"  # warps per SM
    BLOCKS = "blocks"  # resident blocks per SM
    REGISTERS = "registers"  # the register file
    SHARED_MEMORY = "shared memory"  # shared memory per SM (or per block: does not fit)


@dataclass(frozen=True)
class KernelResources:
    """One `__global__` kernel as ptxas compiled it for one arch."""

    kernel: str
    registers: int  # per thread
    shared_bytes: int  # static shared memory per block
    local_bytes: int  # stack frame per thread (local memory)
    spill_stores: int  # bytes of register spill stores per thread
    spill_loads: int  # bytes of register spill loads per thread
    threads_per_block: int | None  # from __launch_bounds__; None when the source has none
    occupancy: float | None  # theoretical: resident warps / max warps per SM, 0..1
    limiter: Limiter | None  # what bounds the occupancy; None when it is unknown

    @property
    def spills(self) -> bool:
        return self.spill_stores > 0 or self.spill_loads > 0

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "registers": self.registers, "shared_bytes": self.shared_bytes,
                "local_bytes": self.local_bytes, "spill_stores": self.spill_stores,
                "spill_loads": self.spill_loads, "threads_per_block": self.threads_per_block,
                "occupancy": self.occupancy, "limiter": self.limiter.value if self.limiter else None}


@dataclass(frozen=True)
class CodegenCheck:
    """What a target's check of its generated code found: a one-line note and, where the
    toolchain reports them, each kernel's resources."""

    note: str
    kernels: tuple[KernelResources, ...] = ()

    def notes(self) -> tuple[str, ...]:
        """The note, then one line per kernel that spills registers to local memory."""
        spills = tuple(f"{k.kernel} spills registers: {k.spill_stores} B stores, {k.spill_loads} B loads "
                       f"per thread (ptxas, {k.registers} registers)" for k in self.kernels if k.spills)
        return (self.note,) + spills


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def theoretical_occupancy(registers: int, shared_bytes: int, threads_per_block: int,
                          device: GpuDevice) -> tuple[float, Limiter]:
    """(resident warps / max warps per SM, the limiter) for a kernel launched with
    `threads_per_block` threads, `registers` per thread and `shared_bytes` of shared memory
    per block, as the CUDA occupancy calculator computes it (cuda_occupancy.h, default
    shared-memory carve-out = the largest, partitioned global caching off):

    - warps per block = ceil(threads / warp size);
    - threads: max warps per SM // warps per block;
    - blocks: the device's max resident blocks per SM;
    - registers: registers per warp = registers x warp size rounded up to the allocation
      unit (256); each of the 4 sub-partitions holds (regs per SM / 4) // that many warps;
      blocks = warps held // warps per block (0 when a block exceeds the register file);
    - shared memory: (shared bytes + the driver's reserved 1 KiB) rounded up to 128 bytes;
      blocks = shared memory per SM // that (0 when it exceeds the per-block opt-in limit).

    A block that cannot be launched at all (too many threads, registers or shared memory)
    gives (0.0, what does not fit).
    """
    if threads_per_block <= 0:
        raise ValueError(f"threads per block must be positive, got {threads_per_block}")
    warps = -(-threads_per_block // device.warp_size)
    by_threads = 0 if threads_per_block > device.max_threads_per_block else device.max_warps_per_sm // warps

    regs_per_warp = _round_up(registers * device.warp_size, device.reg_alloc_unit)
    if regs_per_warp == 0:
        by_registers = device.max_blocks_per_sm
    elif (registers > device.max_regs_per_thread
          or regs_per_warp * _round_up(warps, device.reg_sub_partitions) > device.regs_per_sm):
        by_registers = 0
    else:
        per_partition = (device.regs_per_sm // device.reg_sub_partitions) // regs_per_warp
        by_registers = per_partition * device.reg_sub_partitions // warps

    smem = _round_up(shared_bytes + device.smem_reserved_per_block, device.smem_alloc_unit)
    if smem == 0:
        by_smem = device.max_blocks_per_sm
    elif smem > device.smem_per_block_optin + device.smem_reserved_per_block:
        by_smem = 0
    else:
        by_smem = device.smem_per_sm // smem

    limits = [(by_threads, Limiter.THREADS), (device.max_blocks_per_sm, Limiter.BLOCKS),
              (by_registers, Limiter.REGISTERS), (by_smem, Limiter.SHARED_MEMORY)]
    blocks, limiter = min(limits, key=lambda pair: pair[0])  # first of equal minima
    return min(blocks * warps, device.max_warps_per_sm) / device.max_warps_per_sm, limiter


def kernel_resources(kernel: str, registers: int, shared_bytes: int, local_bytes: int, spill_stores: int,
                     spill_loads: int, threads_per_block: int | None, device: GpuDevice) -> KernelResources:
    """The facts of one kernel with its theoretical occupancy on `device` (None without a
    block size)."""
    occupancy, limiter = (theoretical_occupancy(registers, shared_bytes, threads_per_block, device)
                          if threads_per_block else (None, None))
    return KernelResources(kernel, registers, shared_bytes, local_bytes, spill_stores, spill_loads,
                           threads_per_block, occupancy, limiter)
