"""Resources of each CUDA kernel as ptxas allocates them: one nvcc call with `-Xptxas -v`.

`compile_cubin(source, arch)` compiles the generated CUDA source to a cubin with the flags
TVM's own nvcc mode uses (`tvm.support.nvcc`, which drops the compiler's output) and keeps
ptxas's report; `parse_ptxas(text)` reads it per entry function; `kernel_resources_of`
joins it with each kernel's `__launch_bounds__` and the device table. No GPU is needed.
On a GPU machine TVM compiles the same source with NVRTC at load time by default, whose
register counts can differ slightly from nvcc's.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from engine.errors import CompileError
from engine.gpu_devices import GpuDevice
from engine.resources import KernelResources, kernel_resources

__all__ = ["PtxasEntry", "compile_cubin", "parse_ptxas", "launch_bounds", "kernel_resources_of"]

NVCC_TIMEOUT_S = 1800  # inception_v1 takes ~60 s on 2 cores

# tvm.support.nvcc._compile_cuda_nvcc's flags (0.27), with ptxas's -v kept
_TVM_FLAGS = ["-O3", "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
              "-U__CUDA_NO_BFLOAT16_OPERATORS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
              "-U__CUDA_NO_BFLOAT162_OPERATORS__", "-U__CUDA_NO_BFLOAT162_CONVERSIONS__",
              "--expt-relaxed-constexpr", "--expt-extended-lambda", "--use_fast_math",
              "--ptxas-options=-v,--register-usage-level=10,--warn-on-local-memory-usage"]


@dataclass(frozen=True)
class PtxasEntry:
    """One entry function (`__global__` kernel) in ptxas's `-v` report."""

    name: str
    registers: int
    shared_bytes: int  # static shared memory
    stack_bytes: int  # stack frame
    spill_stores: int  # bytes
    spill_loads: int  # bytes


def compile_cubin(source: str, arch: str) -> tuple[bytes, str]:
    """(cubin, ptxas's report) of `source` for `arch` ("sm_90a"): one nvcc call in a
    temporary directory. Raises CompileError with nvcc's first error line when it fails."""
    suffix = arch.removeprefix("sm_")
    with tempfile.TemporaryDirectory(prefix="blockwise-nvcc-") as tmp:
        src, out = Path(tmp) / "kernels.cu", Path(tmp) / "kernels.cubin"
        src.write_text(source)
        cmd = ["nvcc", "--cubin", "-gencode", f"arch=compute_{suffix},code=sm_{suffix}", *_TVM_FLAGS,
               "-o", str(out), str(src)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=NVCC_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise CompileError(f"nvcc did not finish in {NVCC_TIMEOUT_S} s for {arch}") from None
        report = proc.stdout + proc.stderr
        if proc.returncode != 0 or not out.exists():
            errors = [line for line in report.splitlines() if "error" in line.lower()] or report.splitlines()[-1:]
            raise CompileError(f"nvcc failed on the generated CUDA for {arch}: "
                               f"{errors[0].strip() if errors else f'exit {proc.returncode}'}")
        return out.read_bytes(), report


_ENTRY = re.compile(r"ptxas info\s*: Compiling entry function '([^']+)'")
_PROPERTIES = re.compile(r"ptxas info\s*: Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"ptxas info\s*: Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas(text: str) -> dict[str, PtxasEntry]:
    """Entry functions of a `ptxas -v` report, by name. Lines other than ptxas's (nvcc's
    warnings) are ignored; non-entry functions (device functions) are not listed.

        ptxas info    : Compiling entry function 'add_one' for 'sm_90'
        ptxas info    : Function properties for add_one
            0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
        ptxas info    : Used 12 registers, used 1 barriers, 1024 bytes smem

    -> {"add_one": PtxasEntry("add_one", 12, 1024, 0, 0, 0)}. A kernel without shared
    memory has no "bytes smem" on its Used line.
    """
    entries: dict[str, PtxasEntry] = {}
    name, frame, own = None, (0, 0, 0), False  # own: the properties block is the entry's
    for line in text.splitlines():
        if m := _ENTRY.search(line):
            name, frame, own = m.group(1), (0, 0, 0), False
        elif name is None:
            continue
        elif m := _PROPERTIES.search(line):
            own = m.group(1) == name
        elif own and (m := _FRAME.search(line)):
            frame = tuple(int(g) for g in m.groups())
        elif m := _USED.search(line):
            smem = _SMEM.search(line)
            entries[name] = PtxasEntry(name, int(m.group(1)), int(smem.group(1)) if smem else 0, *frame)
            name = None
    return entries


_KERNEL = re.compile(r"__global__\s+void\s+(?:__launch_bounds__\((\d+)(?:\s*,\s*\d+)*\)\s+)?(\w+)\s*\(")


def launch_bounds(source: str) -> dict[str, int | None]:
    """Each `__global__` kernel of `source` -> its `__launch_bounds__` threads (TVM emits
    the product of the threadIdx extents), None when it has none."""
    return {name: int(bound) if bound else None for bound, name in _KERNEL.findall(source)}


def kernel_resources_of(source: str, report: str, device: GpuDevice) -> tuple[KernelResources, ...]:
    """Every kernel ptxas reported, with its block size from the source and its theoretical
    occupancy on `device`, sorted by name."""
    threads = launch_bounds(source)
    return tuple(kernel_resources(e.name, e.registers, e.shared_bytes, e.stack_bytes, e.spill_stores,
                                  e.spill_loads, threads.get(e.name), device)
                 for e in sorted(parse_ptxas(report).values(), key=lambda e: e.name))
