"""Per-target horizontal code generation: a few attributes per target, no copied paths."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import tvm
from tvm import tirx

from engine.errors import CompileError
from engine.parallel import codegen_cpu, codegen_gpu


@dataclass(frozen=True)
class HorizontalCodegen:
    target: str
    chunk_name: str  # what a member's unit of parallel work is called
    member_chunks: Callable[[tirx.PrimFunc, str], int]  # raises FusionUnsupported
    fuse: Callable[[list, list, tvm.target.Target], tirx.PrimFunc]


def _fuse_gpu(funcs, names, target):
    attrs = target.attrs if target is not None else {}
    return codegen_gpu.fuse_gpu(funcs, names,
                                max_shared_bytes=int(attrs.get("max_shared_memory_per_block", 49152)),
                                max_threads=int(attrs.get("max_num_threads", 1024)))


CODEGENS = {
    "llvm": HorizontalCodegen("llvm", "parallel chunks", codegen_cpu.member_chunks,
                              lambda funcs, names, target: codegen_cpu.fuse_cpu(funcs, names)),
    "cuda": HorizontalCodegen("cuda", "thread blocks", codegen_gpu.member_chunks, _fuse_gpu),
}


def codegen_for(target: str) -> HorizontalCodegen:
    try:
        return CODEGENS[target]
    except KeyError:
        raise CompileError(f"no horizontal fusion code generator for target '{target}'") from None
