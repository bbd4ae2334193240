"""CUDA kernel resources: the device table; the occupancy formula against hand-computed
cases and against the toolkit's own calculator (cuda_occupancy.h); ptxas's report parsed from
captured runs; a real nvcc run; the wiring into the compile result and the summary; the CUDA
cost model's SM count per arch."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from engine.gpu_devices import GPU_DEVICES, device_for_arch
from engine.resources import CodegenCheck, KernelResources, Limiter, kernel_resources, theoretical_occupancy
from engine.schedule.gpu_ptxas import compile_cubin, kernel_resources_of, launch_bounds, parse_ptxas
from tests.conftest import SAMPLES

H100, A100, RTX3090 = device_for_arch("sm_90"), device_for_arch("sm_80"), device_for_arch("sm_86")
NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not installed")

# ---- the device table -------------------------------------------------------------------


def test_device_rows():
    assert [(d.arch, d.sms, d.max_threads_per_sm, d.max_blocks_per_sm) for d in GPU_DEVICES] == [
        ("sm_90", 132, 2048, 32), ("sm_80", 108, 2048, 32), ("sm_86", 82, 1536, 16)]
    assert (H100.smem_per_sm, H100.smem_per_block_optin, H100.smem_per_block_static) == (228 * 1024, 227 * 1024,
                                                                                         48 * 1024)
    assert (A100.smem_per_sm, RTX3090.smem_per_block_optin) == (164 * 1024, 99 * 1024)
    assert (H100.fp32_tflops, A100.dram_gbps, RTX3090.fp32_tflops) == (67.0, 2039.0, 35.6)


def test_arch_suffix_and_unknown_arch():
    assert device_for_arch("sm_90a") is H100
    unknown = device_for_arch("sm_89")
    assert not unknown.known and unknown.arch == "sm_89"
    # conservative: no limit above any known device's
    assert unknown.sms == 82 and unknown.max_threads_per_sm == 1536 and unknown.smem_per_sm == 100 * 1024
    assert unknown.fp32_tflops == 19.5 and unknown.dram_gbps == 936.0


def test_cuda_tags_come_from_the_table():
    from engine.targets import get_target

    assert get_target("cuda").target("sm_80").arch == "sm_80"
    assert get_target("cuda").target("sm_86").arch == "sm_86"

# ---- theoretical occupancy, hand-computed ----------------------------------------------


@pytest.mark.parametrize("regs, smem, threads, device, expected, limiter", [
    # 4 warps; 64 regs x 32 = 2048 per warp; 16384 per sub-partition = 8 warps, x4 = 32 warps
    # = 8 blocks (threads would allow 16) -> 32 of 64 warps
    (64, 0, 128, H100, 0.5, Limiter.REGISTERS),
    # 100 threads round up to 4 warps: the same as 128
    (64, 0, 100, H100, 0.5, Limiter.REGISTERS),
    # 8 warps; 32 regs -> 1024 per warp, 16 warps per sub-partition = 8 blocks; threads also 8: tie
    # goes to the hardware maximum
    (32, 0, 256, H100, 1.0, Limiter.THREADS),
    # 33 regs x 32 = 1056 rounds up to 1280: 12 warps per sub-partition = 48 warps = 6 blocks of 8
    # (without the rounding it would be 7 blocks, 87.5%)
    (33, 0, 256, H100, 0.75, Limiter.REGISTERS),
    # 255 regs -> 8192 per warp, 2 warps per sub-partition, 8 warps = 2 blocks of 4
    (255, 0, 128, H100, 0.125, Limiter.REGISTERS),
    # 48 KiB + 1 KiB reserved = 50176 B: 233472 // 50176 = 4 blocks of 4 warps on H100
    (32, 48 * 1024, 128, H100, 0.25, Limiter.SHARED_MEMORY),
    (32, 48 * 1024, 128, A100, 3 * 4 / 64, Limiter.SHARED_MEMORY),  # 167936 // 50176 = 3
    (32, 48 * 1024, 128, RTX3090, 2 * 4 / 48, Limiter.SHARED_MEMORY),  # 102400 // 50176 = 2
    # one-warp blocks: 32 resident blocks at most -> 32 of 64 warps; 16 of 48 on sm_86
    (16, 0, 32, H100, 0.5, Limiter.BLOCKS),
    (16, 0, 32, RTX3090, 16 / 48, Limiter.BLOCKS),
    # 1024 threads on sm_86: one block of 32 warps of 48
    (32, 0, 1024, RTX3090, 32 / 48, Limiter.THREADS),
    # 1024 threads x 64 regs = the whole register file: one block, 50%
    (64, 0, 1024, H100, 0.5, Limiter.REGISTERS),
    # the fire_module conv kernels as ptxas compiled them for sm_90a: 56 regs -> 1792 per warp,
    # 9 warps per sub-partition = 36 warps = 9 blocks of 4
    (56, 6912, 128, H100, 36 / 64, Limiter.REGISTERS),
])
def test_occupancy_by_hand(regs, smem, threads, device, expected, limiter):
    occupancy, by = theoretical_occupancy(regs, smem, threads, device)
    assert occupancy == pytest.approx(expected) and by is limiter


@pytest.mark.parametrize("regs, smem, threads, limiter", [
    (65, 0, 1024, Limiter.REGISTERS),  # 2304 per warp x 32 warps > 65536: cannot launch
    (16, 0, 1025, Limiter.THREADS),  # more than 1024 threads per block
    (16, 228 * 1024, 128, Limiter.SHARED_MEMORY),  # over the 227 KiB per-block limit
])
def test_a_block_that_does_not_fit_has_zero_occupancy(regs, smem, threads, limiter):
    assert theoretical_occupancy(regs, smem, threads, H100) == (0.0, limiter)


def test_no_block_size_no_occupancy():
    k = kernel_resources("k", 32, 0, 0, 0, 0, None, H100)
    assert k.occupancy is None and k.limiter is None


@needs_nvcc
def test_occupancy_agrees_with_cuda_occupancy_h(tmp_path):
    """The toolkit's calculator (cudaOccMaxActiveBlocksPerMultiprocessor, header-only, built
    by nvcc as host code) on a grid of kernels, for each device row: the same resident blocks."""
    program = tmp_path / "occ.cpp"
    program.write_text(_OCC_PROGRAM)
    exe = tmp_path / "occ"
    subprocess.run([NVCC, "-O1", str(program), "-o", str(exe)], check=True, capture_output=True)
    cases = [(r, s, t) for r in (1, 16, 32, 33, 40, 56, 64, 96, 128, 200, 255)
             for s in (0, 1, 4096, 6912, 40000, 49152) for t in (1, 32, 33, 96, 128, 256, 384, 640, 1024)]
    for device, (major, minor) in ((H100, (9, 0)), (A100, (8, 0)), (RTX3090, (8, 6))):
        out = subprocess.run([str(exe), str(major), str(minor), str(device.smem_per_sm),
                              str(device.smem_per_block_optin), str(device.max_threads_per_sm)],
                             input="\n".join(f"{r} {s} {t}" for r, s, t in cases), capture_output=True,
                             text=True, check=True).stdout.split()
        blocks = [int(b) for b in out]
        for (r, s, t), b in zip(cases, blocks, strict=True):
            expected = b * -(-t // 32) / device.max_warps_per_sm
            assert theoretical_occupancy(r, s, t, device)[0] == pytest.approx(expected), (device.arch, r, s, t)


_OCC_PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
#include "cuda_occupancy.h"
int main(int argc, char** argv) {
  cudaOccDeviceProp p;
  p.computeMajor = atoi(argv[1]); p.computeMinor = atoi(argv[2]);
  p.maxThreadsPerBlock = 1024; p.maxThreadsPerMultiprocessor = atoi(argv[5]);
  p.regsPerBlock = 65536; p.regsPerMultiprocessor = 65536; p.warpSize = 32;
  p.sharedMemPerBlock = 48 * 1024; p.sharedMemPerMultiprocessor = atol(argv[3]);
  p.numSms = 1; p.sharedMemPerBlockOptin = atol(argv[4]); p.reservedSharedMemPerBlock = 1024;
  int regs, threads; long smem;
  while (scanf("%d %ld %d", &regs, &smem, &threads) == 3) {
    cudaOccFuncAttributes a; a.maxThreadsPerBlock = 1024; a.numRegs = regs; a.sharedSizeBytes = smem;
    a.partitionedGCConfig = PARTITIONED_GC_OFF; a.shmemLimitConfig = FUNC_SHMEM_LIMIT_DEFAULT;
    a.maxDynamicSharedSizeBytes = 0; a.numBlockBarriers = 1; a.virtualResourceCount = 0;
    cudaOccDeviceState s; cudaOccResult r;
    if (cudaOccMaxActiveBlocksPerMultiprocessor(&r, &p, &a, &s, threads, 0) != CUDA_OCC_SUCCESS) return 1;
    printf("%d\n", r.activeBlocksPerMultiprocessor);
  }
  return 0;
}
"""

# ---- ptxas's report ---------------------------------------------------------------------

# Captured: `nvcc --cubin -O3 -arch=sm_80 -Xptxas -v` (CUDA 13.0) on four kernels: one with a
# stack frame from a non-inlined device function, one with a local array, one with shared
# memory, one spilling under __launch_bounds__(1024, 2) (at most 32 registers).
PTXAS_SM80 = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'uses_helper' for 'sm_80'
ptxas info    : Function properties for uses_helper
    32 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 16 registers, used 0 barriers, 32 bytes cumulative stack size, 360 bytes cmem[0]
ptxas info    : Compile time = 2.433 ms
ptxas info    : Function properties for _Z6helperf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'big' for 'sm_80'
ptxas info    : Function properties for big
    256 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 256 bytes cumulative stack size, 368 bytes cmem[0]
ptxas info    : Compile time = 8.320 ms
ptxas info    : Compiling entry function 'add_one' for 'sm_80'
ptxas info    : Function properties for add_one
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 1 barriers, 1024 bytes smem, 368 bytes cmem[0]
ptxas info    : Compile time = 0.936 ms
ptxas info    : Compiling entry function 'spilly' for 'sm_80'
ptxas info    : Function properties for spilly
    536 bytes stack frame, 1088 bytes spill stores, 1112 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 536 bytes cumulative stack size, 368 bytes cmem[0]
ptxas info    : Compile time = 29.046 ms
"""

# Captured: the fire_module kernels TVM generated for nvidia/nvidia-h100 (sm_90a), with one of
# nvcc's warnings that precede ptxas's lines in the same stream.
PTXAS_FIRE_SM90A = """\
kernels.cu(61): warning #177-D: variable "cse_v1" was declared but never referenced
    int cse_v1 = ((((int)blockIdx.x) * 1024) + ((int)threadIdx.x));
        ^

ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'fused_conv2d_add_relu_kernel' for 'sm_90a'
ptxas info    : Function properties for fused_conv2d_add_relu_kernel
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 56 registers, used 1 barriers, 6912 bytes smem
ptxas info    : Compile time = 16.458 ms
ptxas info    : Compiling entry function 'concatenate_kernel' for 'sm_90a'
ptxas info    : Function properties for concatenate_kernel
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 14 registers, used 0 barriers
ptxas info    : Compile time = 1.097 ms
"""

SOURCE = """\
extern "C" __global__ void __launch_bounds__(1024) concatenate_kernel(float* __restrict__ T_concat_ptr);
extern "C" __global__ void __launch_bounds__(128) fused_conv2d_add_relu_kernel(float* __restrict__ a);
extern "C" __global__ void __launch_bounds__(1024) concatenate_kernel(float* __restrict__ T_concat_ptr) {
}
extern "C" __global__ void __launch_bounds__(128) fused_conv2d_add_relu_kernel(float* __restrict__ a) {
}
extern "C" __global__ void no_bounds(float* a) {
}
"""


def test_parse_ptxas_entries():
    entries = parse_ptxas(PTXAS_SM80)
    assert sorted(entries) == ["add_one", "big", "spilly", "uses_helper"]  # not the device function
    assert entries["uses_helper"].stack_bytes == 32 and entries["uses_helper"].registers == 16
    assert (entries["add_one"].registers, entries["add_one"].shared_bytes) == (12, 1024)
    assert (entries["big"].stack_bytes, entries["big"].spill_stores, entries["big"].shared_bytes) == (256, 0, 0)
    spilly = entries["spilly"]
    assert (spilly.registers, spilly.stack_bytes, spilly.spill_stores, spilly.spill_loads) == (32, 536, 1088, 1112)


def test_launch_bounds_of_each_kernel():
    assert launch_bounds(SOURCE) == {"concatenate_kernel": 1024, "fused_conv2d_add_relu_kernel": 128,
                                     "no_bounds": None}
    assert launch_bounds('__global__ void __launch_bounds__(1024, 2) spilly(float* a) {}') == {"spilly": 1024}


def test_kernel_resources_from_a_captured_run():
    kernels = kernel_resources_of(SOURCE, PTXAS_FIRE_SM90A, H100)
    assert kernels == (
        KernelResources("concatenate_kernel", 14, 0, 0, 0, 0, 1024, 1.0, Limiter.THREADS),
        KernelResources("fused_conv2d_add_relu_kernel", 56, 6912, 0, 0, 0, 128, 36 / 64, Limiter.REGISTERS))


def test_spills_are_flagged_in_the_notes():
    kernels = tuple(kernel_resources(e.name, e.registers, e.shared_bytes, e.stack_bytes, e.spill_stores,
                                     e.spill_loads, 1024, A100) for e in parse_ptxas(PTXAS_SM80).values())
    notes = CodegenCheck("nvcc compiled 4 CUDA kernels", kernels).notes()
    assert notes[0] == "nvcc compiled 4 CUDA kernels" and len(notes) == 2
    assert notes[1].startswith("spilly spills registers: 1088 B stores, 1112 B loads")


def test_resource_table_in_the_compile_summary():
    from workbench.present.report import resource_lines

    kernels = (kernel_resources("fused_conv2d_add_relu_kernel", 56, 6912, 0, 0, 0, 128, H100),
               kernel_resources("spilly", 32, 0, 536, 1088, 1112, 1024, H100))
    lines = resource_lines(kernels)
    assert "from ptxas" in lines[0] and "theoretical" in lines[0]
    assert lines[2].split() == ["fused_conv2d_add_relu_kernel", "56", "6912", "0/0", "128", "56%", "registers"]
    assert lines[3].split() == ["spilly", "32", "0", "1088/1112", "!", "1024", "100%", "threads"]

# ---- the real toolchain -----------------------------------------------------------------


TINY = """\
extern "C" __global__ void __launch_bounds__(128) add_one(float* __restrict__ a, float* __restrict__ b) {
  __shared__ float s[256];
  s[threadIdx.x] = a[blockIdx.x * 128 + threadIdx.x];
  __syncthreads();
  b[blockIdx.x * 128 + threadIdx.x] = s[127 - threadIdx.x] + 1.0f;
}
"""


@needs_nvcc
def test_nvcc_reports_a_tiny_kernel():
    cubin, report = compile_cubin(TINY, "sm_90a")
    assert len(cubin) > 0
    (k,) = kernel_resources_of(TINY, report, H100)
    assert k.kernel == "add_one" and k.threads_per_block == 128
    assert k.shared_bytes == 1024 and k.spill_stores == k.spill_loads == 0
    assert 0 < k.registers <= 64  # 12 with CUDA 13.0
    assert (k.occupancy, k.limiter) == theoretical_occupancy(k.registers, 1024, 128, H100)


@needs_nvcc
def test_nvcc_failure_is_one_line():
    from engine.errors import CompileError

    with pytest.raises(CompileError, match="nvcc failed on the generated CUDA for sm_80: .*error") as err:
        compile_cubin('extern "C" __global__ void broken() { undefined_name = 1; }', "sm_80")
    assert "\n" not in str(err.value)


@needs_nvcc
def test_cuda_build_carries_kernel_resources():
    from engine.events import CompileOptions, Stage
    from engine.session import Session

    session = Session(str(SAMPLES / "fire_module.onnx"))
    result = session.compile(CompileOptions(target="cuda", arch="sm_80", stop_after=Stage.BUILD))
    assert {k.kernel for k in result.kernel_resources} == {
        "concatenate_kernel", "fused_conv2d_add_relu_kernel", "fused_conv2d1_add1_relu1_kernel",
        "fused_conv2d2_add1_relu1_kernel"}
    assert all(k.occupancy is not None and 0 < k.occupancy <= 1 for k in result.kernel_resources)
    assert result.notes[0].startswith("nvcc compiled 4 CUDA kernels for sm_80")
    assert "occupancy on A100 SXM4 80GB (108 SMs)" in result.notes[0]
    llvm = session.compile(CompileOptions(target="llvm", stop_after=Stage.BUILD))
    assert llvm.kernel_resources == () and not any("nvcc" in n for n in llvm.notes)

# ---- the CUDA cost model ----------------------------------------------------------------


def test_cost_model_takes_the_sm_count_of_the_arch():
    from engine.parallel.gain import gpu_cost_model
    from engine.targets import get_target

    cuda = get_target("cuda")
    a100, h100, unknown = (gpu_cost_model(cuda.target(a)) for a in ("sm_80", "sm_90", "sm_89"))
    assert (a100.cores, a100.device) == (108, "A100 SXM4 80GB")
    assert (h100.cores, h100.device) == (132, "H100 SXM")
    assert unknown.cores == 82 and "unknown" in unknown.device
    assert h100.bytes_per_us == 3350 * 1e3
    # a tenth of the FP32 peak per SM: 67e6 / 132 / 10 flop per us on H100
    assert h100.flops_per_us_per_core == pytest.approx(67e6 / 132 / 10)
    assert a100.flops_per_us_per_core == pytest.approx(19.5e6 / 108 / 10)
