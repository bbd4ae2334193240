"""Compilation targets as data: one `TargetSpec` row per target.

Everything a target varies lives in its row, as callables: how to make the TVM target,
its default schedules, its fusion code generators, its cost model, how its build runs on
this host when the device is absent, the check of its generated code, and capability flags.
Adding a target is one row here and one folder of code (engine/schedule/<target>,
engine/parallel/codegen/<target>.py); nothing else branches on a target's name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import tvm

from engine.errors import CompileError
from engine.gpu_devices import GPU_DEVICES
from engine.ir_module import prepared
from engine.parallel.codegen import CPU_CODEGEN, GPU_CODEGEN, FusionCodegen
from engine.parallel.gain import CostModel, cpu_cost_model, gpu_cost_model
from engine.resources import CodegenCheck
from engine.schedule.cpu import rules as cpu_rules
from engine.schedule.cpu.fast_math import cpu_legalize
from engine.schedule.cpu.ragged import split_ragged_rows
from engine.schedule import gpu as gpu_schedule


@dataclass(frozen=True)
class TargetSpec:
    name: str  # what users type: llvm, cuda
    device_kind: str  # tvm device kind for running
    block_axis: str  # what a "block" is in this target's kernels
    make: Callable[[str | None], tvm.target.Target]  # arch option -> Target
    scheduler: Callable[[tvm.IRModule, tvm.target.Target], tvm.IRModule]  # default schedules
    # (PrimFunc, target) -> its default schedule or None; None: schedule one-kernel modules
    # with `scheduler` (tuning measures the default of each kernel through schedule_one)
    kernel_scheduler: Callable[[object, tvm.target.Target], object] | None
    fusion: FusionCodegen  # horizontal and block-level vertical fusion code generators
    cost_model: Callable[[tvm.target.Target], CostModel]  # estimates of fusion gains
    # Build a scheduled module to run on this host's CPU (verification, fusion checks):
    # the llvm build itself, or GPU kernels emulated (engine.runtime.emulation, permuted order).
    host_build: Callable[[tvm.IRModule, tvm.target.Target], object]
    host_emulation: bool  # verify through host_build when the device is absent
    # (executable, target) -> a note and, where the toolchain reports them, kernel resources
    codegen_check: Callable[[object, tvm.target.Target], CodegenCheck] | None = None
    times_fusion: bool = False  # the applier times unfused and fused builds on the device
    # co-tuning of a plan's approved groups: (mod, unscheduled, ctx, plan, trials, store, emit)
    # -> (mod, records with .decision, .layout, .note(), .to_json()); None: not for this target
    cotuner: Callable | None = None
    arch_help: str = ""
    # Relax op name -> legalization replacing TVM's for this target (LegalizeOps' customize map)
    legalize: Callable[[], dict] | None = None
    # Relax passes run before legalization, for this target's schedules: target -> passes
    relax_passes: Callable[[tvm.target.Target], list] | None = None
    # A TIR rewrite of the scheduled, fused module that every build runs first, after the
    # analyses have read the kernels (llvm: ragged vector rows split, engine.schedule.cpu.ragged)
    before_build: Callable[[tvm.IRModule], tvm.IRModule] | None = None

    def build(self, mod: tvm.IRModule, target: tvm.target.Target):
        """The target's own build of a scheduled module."""
        return tvm.compile(prepared(mod, self.before_build), target=target)

    def host_compile(self, mod: tvm.IRModule, target: tvm.target.Target):
        """`host_build` of the module `build` would compile."""
        return self.host_build(prepared(mod, self.before_build), target)

    @property
    def fuses_vertically(self) -> bool:
        return self.fusion.fuses_vertically

    @property
    def cotunes(self) -> bool:
        return self.cotuner is not None

    def target(self, arch: str | None = None) -> tvm.target.Target:
        return self.make(arch)

    def device(self):
        return tvm.device(self.device_kind, 0)

    def device_present(self) -> bool:
        return bool(tvm.runtime.enabled(self.device_kind)) and self.device().exist

    def schedule(self, mod: tvm.IRModule, target: tvm.target.Target) -> tvm.IRModule:
        return self.scheduler(mod, target)

    def schedule_one(self, wmod: tvm.IRModule, target: tvm.target.Target) -> tvm.IRModule | None:
        """The default schedule of a one-kernel module {"main": PrimFunc}, or None."""
        if self.kernel_scheduler is None:
            return self.scheduler(wmod, target)
        func = self.kernel_scheduler(wmod["main"], target)
        return tvm.IRModule({"main": func}) if func is not None else None

    def check_codegen(self, executable, target: tvm.target.Target) -> CodegenCheck | None:
        return self.codegen_check(executable, target) if self.codegen_check else None


def _llvm(arch: str | None) -> tvm.target.Target:
    from tvm.target import codegen

    from engine.cores import configure_runtime

    cpu = arch or codegen.llvm_get_system_cpu()
    # the schedules' core count and the runtime's thread pool agree (engine.cores)
    return tvm.target.Target({"kind": "llvm", "mcpu": cpu, "num-cores": configure_runtime()})


# CUDA tags set sm version, shared memory and thread limits; --arch picks a tag or an sm.
# The tags are those of the device table's rows (engine.gpu_devices: SMs, limits, peaks).
_CUDA_TAGS = {d.arch: d.tvm_tag for d in GPU_DEVICES if d.tvm_tag}


def _cuda(arch: str | None) -> tvm.target.Target:
    arch = arch or "sm_90"
    if arch in _CUDA_TAGS:
        return tvm.target.Target(_CUDA_TAGS[arch])
    if arch.startswith("sm_"):
        return tvm.target.Target({"kind": "cuda", "arch": arch, "max_num_threads": 1024})
    return tvm.target.Target(arch)  # a full tag such as nvidia/nvidia-a100


def _native_build(mod: tvm.IRModule, target: tvm.target.Target):
    return tvm.compile(mod, target=target)


def _emulated_build(mod: tvm.IRModule, target: tvm.target.Target):
    from engine.runtime.emulation import emulate_on_cpu

    return tvm.compile(emulate_on_cpu(mod, permuted=True, seed=1), target=_llvm(None))


def _cpu_relax_passes(target: tvm.target.Target) -> list:
    from engine.schedule.cpu.common import vector_lanes
    from engine.schedule.cpu.pad_channels import pad_conv_channels

    return [pad_conv_channels(vector_lanes(target))]


def _cotune_cpu(*args):
    from engine.tuning.cotune_plan import cotune_plan  # MetaSchedule: loaded only when co-tuning

    return cotune_plan(*args)


def _cotune_gpu(*args):
    from engine.tuning.cotune_gpu import cotune_plan_gpu

    return cotune_plan_gpu(*args)


TARGETS: dict[str, TargetSpec] = {
    "llvm": TargetSpec("llvm", "cpu", "chunk of the outer parallel loop", _llvm, cpu_rules.schedule_module,
                       cpu_rules.schedule_func, CPU_CODEGEN, cpu_cost_model, _native_build, host_emulation=False,
                       times_fusion=True, cotuner=_cotune_cpu, arch_help="llvm -mcpu name (default: this CPU)",
                       legalize=cpu_legalize, relax_passes=_cpu_relax_passes,
                       before_build=split_ragged_rows),
    "cuda": TargetSpec("cuda", "cuda", "blockIdx", _cuda, gpu_schedule.schedule_module, None, GPU_CODEGEN,
                       gpu_cost_model, _emulated_build, host_emulation=True,
                       codegen_check=gpu_schedule.check_with_nvcc, cotuner=_cotune_gpu,
                       arch_help="sm_90 (default), sm_80, sm_86 or a tag such as nvidia/nvidia-a100"),
}

TARGET_NAMES: tuple[str, ...] = tuple(TARGETS)
HOST_TARGET = "llvm"  # the target whose builds run on this machine's CPU


def get_target(name: str) -> TargetSpec:
    try:
        return TARGETS[name]
    except KeyError:
        raise CompileError(f"unknown target '{name}'; known: {', '.join(TARGETS)}") from None
