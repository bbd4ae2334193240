"""The GPUs behind the CUDA target's `--arch` choices: one row of limits and peak rates each.

Loads without TVM. The occupancy calculation (engine.resources) and the CUDA cost model
(engine.parallel.gain) read their numbers from here; `engine.targets` takes its CUDA tags
from here. Example:

    >>> device_for_arch("sm_90a").sms, device_for_arch("sm_80").name
    (132, 'A100 SXM4 80GB')
    >>> device_for_arch("sm_89").known
    False

Sources of the figures (per field, the same for every row unless the row says otherwise):
- [PG] CUDA C++ Programming Guide, "Technical Specifications per Compute Capability":
  registers per SM (64 K), registers per thread (255), threads and blocks per SM, shared
  memory per SM and per block, 48 KiB static shared memory per block, warp size.
- [OCC] CUDA occupancy calculator, `cuda_occupancy.h` of the CUDA toolkit (13.0 here):
  registers allocated per warp in units of 256 (cudaOccRegAllocationGranularity), 4
  register sub-partitions per SM (cudaOccSubPartitionsPerMultiprocessor), shared memory
  allocated in units of 128 bytes (cudaOccSMemAllocationGranularity), 1 KiB of shared
  memory reserved per block by the driver from compute capability 8.0 on
  (`reservedSharedMemPerBlock`, cudaDevAttrReservedSharedMemoryPerBlock).
- SM counts, FP32 peaks (non-tensor) and DRAM bandwidth: the NVIDIA data sheets named on
  each row.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace

KIB = 1024


@dataclass(frozen=True)
class GpuDevice:
    """Limits of one GPU (per SM unless named per block/thread) and its peak rates."""

    arch: str  # sm_XX, what --arch names
    name: str
    tvm_tag: str  # the tvm.target tag that sets this arch's codegen limits; "" if none
    sms: int
    regs_per_sm: int
    max_regs_per_thread: int
    max_threads_per_sm: int
    max_threads_per_block: int
    max_blocks_per_sm: int
    smem_per_sm: int  # bytes, the largest carve-out
    smem_per_block_optin: int  # bytes, dynamic shared memory after cudaFuncSetAttribute
    smem_per_block_static: int  # bytes, the most a kernel may declare statically
    smem_reserved_per_block: int  # bytes the driver keeps per resident block
    smem_alloc_unit: int  # bytes: a block's shared memory is rounded up to this
    reg_alloc_unit: int  # registers per warp are rounded up to this
    reg_sub_partitions: int  # registers are allocated per SM sub-partition
    warp_size: int
    fp32_tflops: float  # peak FP32 (non-tensor-core) TFLOP/s
    dram_gbps: float  # peak DRAM bandwidth, GB/s
    known: bool = True  # False: the conservative default for an arch not in the table

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size


_COMMON = dict(regs_per_sm=65536, max_regs_per_thread=255, max_threads_per_block=1024,  # [PG]
               smem_per_block_static=48 * KIB, warp_size=32,  # [PG]
               smem_reserved_per_block=1 * KIB, smem_alloc_unit=128, reg_alloc_unit=256,  # [OCC]
               reg_sub_partitions=4)  # [OCC]

# One row per device. sm_90 stands for H100 SXM and is also used for H200 (the same GH100
# SM configuration, 132 SMs; H200's HBM3e gives 4800 GB/s, the row keeps H100's 3350).
GPU_DEVICES: tuple[GpuDevice, ...] = (
    # NVIDIA H100 Tensor Core GPU data sheet (SXM5: 67 TFLOP/s FP32, 3.35 TB/s HBM3) and
    # H100 architecture white paper (132 SMs on SXM5, 228 KiB shared memory per SM, 227 KiB
    # per block); compute capability 9.0 limits [PG]: 2048 threads, 32 blocks per SM.
    GpuDevice("sm_90", "H100 SXM", "nvidia/nvidia-h100", sms=132, max_threads_per_sm=2048,
              max_blocks_per_sm=32, smem_per_sm=228 * KIB, smem_per_block_optin=227 * KIB,
              fp32_tflops=67.0, dram_gbps=3350.0, **_COMMON),
    # NVIDIA A100 Tensor Core GPU data sheet (80 GB SXM4: 19.5 TFLOP/s FP32, 2039 GB/s) and
    # A100 (Ampere GA100) white paper (108 SMs, 164 KiB shared memory per SM, 163 KiB per
    # block); compute capability 8.0 [PG]: 2048 threads, 32 blocks per SM.
    GpuDevice("sm_80", "A100 SXM4 80GB", "nvidia/nvidia-a100", sms=108, max_threads_per_sm=2048,
              max_blocks_per_sm=32, smem_per_sm=164 * KIB, smem_per_block_optin=163 * KIB,
              fp32_tflops=19.5, dram_gbps=2039.0, **_COMMON),
    # NVIDIA Ampere GA102 GPU architecture white paper / GeForce RTX 3090 specifications
    # (82 SMs, 35.6 TFLOP/s FP32, 936 GB/s GDDR6X); compute capability 8.6 [PG]: 1536
    # threads, 16 blocks, 100 KiB shared memory per SM, 99 KiB per block.
    GpuDevice("sm_86", "RTX 3090", "nvidia/geforce-rtx-3090", sms=82, max_threads_per_sm=1536,
              max_blocks_per_sm=16, smem_per_sm=100 * KIB, smem_per_block_optin=99 * KIB,
              fp32_tflops=35.6, dram_gbps=936.0, **_COMMON),
)


def _smallest_of_each_field() -> GpuDevice:
    """The default for an arch not in the table: every number the smallest of the known
    devices (fewest SMs, lowest limits and peaks), so occupancy and gains are not overstated."""
    values = {f.name: min(getattr(d, f.name) for d in GPU_DEVICES)
              for f in fields(GpuDevice) if f.type in ("int", "float")}
    return GpuDevice(arch="", name="unknown GPU (conservative)", tvm_tag="",
                     known=False, **values)


_DEFAULT = _smallest_of_each_field()


def device_for_arch(arch: str) -> GpuDevice:
    """The row for `arch` ("sm_90", or "sm_90a" as the H100 tag says); an arch not in the
    table gets the conservative default (`known` False) under its own arch name."""
    base = re.sub(r"^(sm_\d+)[a-z]$", r"\1", arch)
    for device in GPU_DEVICES:
        if device.arch == base:
            return device
    return replace(_DEFAULT, arch=arch)
