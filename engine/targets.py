"""Compilation targets as data: one TargetSpec per target, no per-target code paths elsewhere."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import tvm

from engine.errors import CompileError


@dataclass(frozen=True)
class TargetSpec:
    name: str  # what users type: llvm, cuda
    device_kind: str  # tvm device kind for running
    block_axis: str  # what a "block" is in this target's kernels
    make: Callable[[str | None], tvm.target.Target]  # arch option -> Target
    scheduler: str  # module path of `schedule_module(mod, target)`
    host_emulation: bool  # verify by running the scheduled kernels on the CPU when no device
    codegen_check: str | None = None  # "module:function(executable, target) -> message"

    def target(self, arch: str | None = None) -> tvm.target.Target:
        return self.make(arch)

    def device(self):
        return tvm.device(self.device_kind, 0)

    def device_present(self) -> bool:
        return bool(tvm.runtime.enabled(self.device_kind)) and self.device().exist

    def schedule(self, mod: tvm.IRModule, target: tvm.target.Target) -> tvm.IRModule:
        return _resolve(f"{self.scheduler}:schedule_module")(mod, target)

    def check_codegen(self, executable, target: tvm.target.Target) -> str:
        return _resolve(self.codegen_check)(executable, target) if self.codegen_check else ""


def _resolve(ref: str):
    import importlib

    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def _llvm(arch: str | None) -> tvm.target.Target:
    from tvm.target import codegen

    from engine.cores import configure_runtime

    cpu = arch or codegen.llvm_get_system_cpu()
    # the schedules' core count and the runtime's thread pool agree (engine.cores)
    return tvm.target.Target({"kind": "llvm", "mcpu": cpu, "num-cores": configure_runtime()})


# CUDA tags set sm version, shared memory and thread limits; --arch picks a tag or an sm.
_CUDA_TAGS = {"sm_90": "nvidia/nvidia-h100", "sm_80": "nvidia/nvidia-a100", "sm_86": "nvidia/geforce-rtx-3090"}


def _cuda(arch: str | None) -> tvm.target.Target:
    arch = arch or "sm_90"
    if arch in _CUDA_TAGS:
        return tvm.target.Target(_CUDA_TAGS[arch])
    if arch.startswith("sm_"):
        return tvm.target.Target({"kind": "cuda", "arch": arch, "max_num_threads": 1024})
    return tvm.target.Target(arch)  # a full tag such as nvidia/nvidia-a100


TARGETS: dict[str, TargetSpec] = {
    "llvm": TargetSpec("llvm", "cpu", "chunk of the outer parallel loop", _llvm,
                       "engine.cpu_schedule", host_emulation=False),
    "cuda": TargetSpec("cuda", "cuda", "blockIdx", _cuda, "engine.gpu_schedule",
                       host_emulation=True, codegen_check="engine.gpu_schedule:check_with_nvcc"),
}


def get_target(name: str) -> TargetSpec:
    try:
        return TARGETS[name]
    except KeyError:
        raise CompileError(f"unknown target '{name}'; known: {', '.join(TARGETS)}") from None
