"""Default (untuned) GPU schedules for every PrimFunc of a Relax module: TVM's dlight rules.

Run ``schedule_module(mod, target)`` after LegalizeOps/AnnotateTIROpPattern/FoldConstant/
FuseOps/FuseTIR, with a CUDA target such as ``Target("nvidia/nvidia-h100")``. Every PrimFunc
gets the first dlight GPU rule that fits (Matmul, GEMV, Reduction, GeneralReduction,
Fallback), is thread-bound (blockIdx/threadIdx) and marked ``tirx.is_scheduled``.

The result can go straight to ``tvm.compile(mod, target=target)``: the CUDA default pipeline
re-runs LegalizeOps ... FuseTIR and dlight, but dlight skips ``tirx.is_scheduled`` functions
and the scheduled functions are marked ``op_pattern = kOpaque`` so that the re-run of
FuseOps cannot merge two already-scheduled kernels (it leaves opaque calls alone).

Without a CUDA driver (this machine) ``tvm.compile`` never calls nvcc/NVRTC: the CUDA
code generator returns a source-only fallback module (kind "cuda"), ``export_library``
embeds that source, and the loader on a CUDA machine compiles it through
``tvm_callback_cuda_compile`` (NVRTC unless ``TVM_CUDA_COMPILE_MODE=nvcc``; NVRTC needs the
``cuda-bindings`` package, which the venv lacks). ``nvcc_compile`` checks the generated
source here with the local nvcc, and ``check_with_nvcc`` reports each kernel's ptxas
resources (engine.schedule.gpu_ptxas).

The schedules are block-level TIR (``T.sblock`` with ``T.thread_binding`` loops, shared/local
``sblock_alloc_buffer``): ``engine.runtime.emulation.emulate_on_cpu`` turns them into llvm-legal
PrimFuncs that compute the same thing on the CPU, so they can be checked without a GPU.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx
from tvm.s_tir import dlight as dl
from tvm.target import Target

from engine.errors import CompileError
from engine.gpu_devices import device_for_arch
from engine.resources import CodegenCheck
from engine.schedule.gpu_ptxas import compile_cubin, kernel_resources_of, launch_bounds

__all__ = [
    "OP_PATTERN_OPAQUE",
    "default_rules",
    "schedule_module",
    "thread_tags",
    "is_thread_bound",
    "cuda_module",
    "cuda_source",
    "nvcc_compile",
    "check_with_nvcc",
]

# relay/relax OpPatternKind::kOpaque. AnnotateTIROpPattern keeps a nonzero op_pattern and
# FuseOps never groups an opaque call with its neighbours.
OP_PATTERN_OPAQUE = 8


def default_rules() -> list:
    """The rules (and order) of the CUDA default pipeline (relax/backend/cuda/pipeline.py)."""
    return [dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.Reduction(), dl.gpu.GeneralReduction(), dl.gpu.Fallback()]


def thread_tags(func: tirx.PrimFunc) -> set[str]:
    """Thread tags (``blockIdx.x``, ``threadIdx.y``, ``vthread.x`` ...) bound by loops of ``func``."""
    tags: set[str] = set()

    def on_for(loop):
        if loop.kind == tirx.ForKind.THREAD_BINDING and loop.thread_binding is not None:
            tags.add(str(loop.thread_binding.thread_tag))

    tvm_ffi.structural_walk(func, (tirx.For, on_for))
    return tags


def is_thread_bound(func: tirx.PrimFunc) -> bool:
    """True when ``func`` binds at least one blockIdx and one threadIdx loop."""
    tags = thread_tags(func)
    return any(t.startswith("blockIdx.") for t in tags) and any(t.startswith("threadIdx.") for t in tags)


def _is_scheduled(func) -> bool:
    return bool(func.attrs is not None and func.attrs.get("tirx.is_scheduled", False))


def schedule_module(mod: tvm.IRModule, target: Target, rules=None) -> tvm.IRModule:
    """Give every not-yet-scheduled PrimFunc of ``mod`` a dlight GPU schedule for ``target``.

    ``mod`` is not modified (dlight's pass updates its input in place, so it gets a copy).
    Raises ``CompileError`` naming the kernels that end up without blockIdx/threadIdx
    bindings (no rule fitted, or a PrimFunc was marked scheduled without being bound).
    """
    if isinstance(target, (str, dict)):
        target = Target(target)
    if target.kind.name not in ("cuda", "rocm", "vulkan", "metal", "opencl", "webgpu"):
        raise CompileError(f"schedule_module: {target.kind.name} is not a GPU target")
    mod = mod.clone()
    with target:
        mod = dl.ApplyDefaultSchedule(*(rules or default_rules()))(mod)
    unbound, updates = [], {}
    for gv, func in mod.functions_items():
        if not isinstance(func, tirx.PrimFunc):
            continue
        if not _is_scheduled(func) or not is_thread_bound(func):
            unbound.append(gv.name_hint)
            continue
        if func.attrs.get("op_pattern", None) != OP_PATTERN_OPAQUE:
            updates[gv] = func.with_attr("op_pattern", OP_PATTERN_OPAQUE)
    if unbound:
        raise CompileError(f"no dlight GPU rule bound threads in: {', '.join(sorted(unbound))}")
    for gv, func in updates.items():
        mod[gv] = func
    return mod


_CUDA_MODULE_KIND = "cuda"  # tvm.runtime.Module.kind of the device code


def cuda_module(ex) -> tvm.runtime.Module | None:
    """The module of kind "cuda" under a ``tvm.compile`` result (searched recursively)."""
    root = ex.mod if hasattr(ex, "mod") else ex
    todo = [root]
    while todo:
        mod = todo.pop()
        if mod.kind == _CUDA_MODULE_KIND:
            return mod
        todo.extend(mod.imports)
    return None


def cuda_source(ex) -> str:
    """CUDA C source of all kernels of a ``tvm.compile(..., target=cuda)`` result."""
    mod = cuda_module(ex)
    if mod is None:
        raise CompileError("no CUDA module in the executable (was it built for a CUDA target?)")
    return mod.inspect_source()


def nvcc_compile(source: str, target: Target, fmt: str = "cubin") -> bytes:
    """Compile CUDA source with the local nvcc for ``target``'s arch (sm_90a for H100).

    A check that the generated code is valid CUDA; needs no GPU. inception_v1 (81
    kernels): about 20 s for a cubin on 2 cores.
    """
    from tvm.support import nvcc  # pylint: disable=import-outside-toplevel

    if isinstance(target, (str, dict)):
        target = Target(target)
    with target:
        return bytes(nvcc.compile_cuda(source, target_format=fmt, compiler="nvcc"))


def check_with_nvcc(executable, target: Target) -> CodegenCheck:
    """Compile the generated CUDA with nvcc (no GPU needed): proves the code is valid for
    the target's arch even where TVM keeps it as source for NVRTC at load time, and reports
    each kernel's registers, shared memory, spills and theoretical occupancy on the arch's
    device (engine.gpu_devices) as ptxas allocated them."""
    import shutil

    if shutil.which("nvcc") is None:
        return CodegenCheck("nvcc not found: CUDA source not compiled here")
    arch = str(target.arch)
    device = device_for_arch(arch)
    source = cuda_source(executable)
    cubin, report = compile_cubin(source, arch)
    kernels = kernel_resources_of(source, report, device)
    on = (f"occupancy on {device.name} ({device.sms} SMs)" if device.known else
          f"{arch} not in the device table: occupancy on conservative limits, the smallest of each known GPU's")
    return CodegenCheck(f"nvcc compiled {len(launch_bounds(source))} CUDA kernels for {arch} "
                        f"({len(cubin) // 1024} KiB cubin); ptxas resources, {on}", kernels)
