"""Per-target fusion code generation (horizontal, block-level vertical): a few attributes per target, no copied paths."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import tvm
from tvm import tirx

from engine.cpu_common import num_cores
from engine.errors import CompileError
from engine.parallel import codegen_cpu, codegen_gpu


@dataclass(frozen=True)
class HorizontalCodegen:
    target: str
    chunk_name: str  # what a member's unit of parallel work is called
    member: Callable[[tirx.PrimFunc, str], object]  # .chunks, .stages; raises FusionUnsupported
    # (funcs, names, target, layout) -> fused PrimFunc; layout: None for the target's default,
    # else a co-tuned one (engine.tuning.cotune; llvm only so far)
    fuse: Callable[[list, list, tvm.target.Target, object], tirx.PrimFunc]
    default_layout: Callable[[tvm.target.Target], object] = lambda target: None
    # (producer, consumer, names, plan.BlockLink) -> fused PrimFunc; None: not for this target
    fuse_vertical: Callable[[tirx.PrimFunc, tirx.PrimFunc, list, object], tirx.PrimFunc] | None = None

    def vertical(self, producer, consumer, names, link) -> tirx.PrimFunc:
        if self.fuse_vertical is None:
            raise CompileError(f"block-level vertical fusion is implemented for llvm only, not {self.target}")
        return self.fuse_vertical(producer, consumer, names, link)


def _cpu_default_layout(target) -> codegen_cpu.CpuLayout:
    # One slice of every member per core: measured on inception_v1 (2 cores) 16/18 fused
    # kernels faster than their members' sum, against 1/18 with one slice per member chunk.
    return codegen_cpu.CpuLayout(sliced=True, tasks=num_cores(target))


def _fuse_cpu(funcs, names, target, layout=None):
    return codegen_cpu.fuse_cpu(funcs, names, layout or _cpu_default_layout(target))


def _fuse_gpu(funcs, names, target, layout=None):
    if layout is not None:
        raise CompileError("co-tuned layouts of fused kernels are implemented for llvm only")
    attrs = target.attrs if target is not None else {}
    return codegen_gpu.fuse_gpu(funcs, names,
                                max_shared_bytes=int(attrs.get("max_shared_memory_per_block", 49152)),
                                max_threads=int(attrs.get("max_num_threads", 1024)))


CODEGENS = {
    "llvm": HorizontalCodegen("llvm", "parallel chunks", codegen_cpu.cpu_member, _fuse_cpu,
                              _cpu_default_layout, codegen_cpu.fuse_vertical_cpu),
    "cuda": HorizontalCodegen("cuda", "thread blocks", codegen_gpu.gpu_member, _fuse_gpu),
}


def codegen_for(target: str) -> HorizontalCodegen:
    try:
        return CODEGENS[target]
    except KeyError:
        raise CompileError(f"no horizontal fusion code generator for target '{target}'") from None
