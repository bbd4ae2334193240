"""Per-target horizontal code generation: a few attributes per target, no copied paths."""

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
    fuse: Callable[[list, list, tvm.target.Target], tirx.PrimFunc]


def _fuse_gpu(funcs, names, target):
    attrs = target.attrs if target is not None else {}
    return codegen_gpu.fuse_gpu(funcs, names,
                                max_shared_bytes=int(attrs.get("max_shared_memory_per_block", 49152)),
                                max_threads=int(attrs.get("max_num_threads", 1024)))


CODEGENS = {
    # One slice of every member per core: measured on inception_v1 (2 cores) 16/18 fused
    # kernels faster than their members' sum, against 1/18 with one slice per member chunk.
    "llvm": HorizontalCodegen("llvm", "parallel chunks", codegen_cpu.cpu_member,
                              lambda funcs, names, target: codegen_cpu.fuse_cpu(
                                  funcs, names, tasks=num_cores(target))),
    "cuda": HorizontalCodegen("cuda", "thread blocks", codegen_gpu.gpu_member, _fuse_gpu),
}


def codegen_for(target: str) -> HorizontalCodegen:
    try:
        return CODEGENS[target]
    except KeyError:
        raise CompileError(f"no horizontal fusion code generator for target '{target}'") from None
