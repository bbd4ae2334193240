"""Fusion code generation, one `FusionCodegen` per target (a field of engine.targets' rows).

    codegen.member(prim, name)                 -> .chunks, .stages; FusionUnsupported if not fusable
    codegen.fuse(funcs, names, target, layout) -> one horizontally fused PrimFunc
    codegen.vertical(producer, consumer, ...)  -> one block-level fused PrimFunc (where supported)
    codegen.rows.link / .fuse                  -> row-band fusion (engine.parallel.codegen.cpu_rows)
    codegen.fuse_slices(funcs, names, concat, link, target) -> producers writing a concat's slices
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import tvm
from tvm import tirx

from engine.errors import CompileError
from engine.parallel import slices
from engine.parallel.codegen import cpu, cpu_rows, gpu, gpu_horizontal, gpu_vertical
from engine.schedule.cpu.common import num_cores


@dataclass(frozen=True)
class RowFusion:
    """Row-band vertical fusion of a target: `link(producer, consumer, names, consumer_param,
    target)` -> plan.RowLink (FusionUnsupported: no row structure); `fuse(producer, consumer,
    names, link, target)` -> the fused PrimFunc, which writes only the consumer's output."""

    link: Callable[[tirx.PrimFunc, tirx.PrimFunc, list, int, object], object]
    fuse: Callable[[tirx.PrimFunc, tirx.PrimFunc, list, object, object], tirx.PrimFunc]


@dataclass(frozen=True)
class FusionCodegen:
    target: str
    chunk_name: str  # what a member's unit of parallel work is called
    member: Callable[[tirx.PrimFunc, str], object]  # .chunks, .stages; raises FusionUnsupported
    # (funcs, names, target, layout) -> fused PrimFunc; layout: None for the target's default,
    # else a co-tuned one (engine.tuning.cotune)
    fuse: Callable[[list, list, tvm.target.Target, object], tirx.PrimFunc]
    default_layout: Callable[[tvm.target.Target], object] = lambda target: None
    # (producer, consumer, names, plan.BlockLink, target) -> fused PrimFunc; None: not for this target
    fuse_vertical: Callable[[tirx.PrimFunc, tirx.PrimFunc, list, object, object], tirx.PrimFunc] | None = None
    # (PrimFunc, name) -> why it cannot be a vertical member ("" when it can)
    vertical_member: Callable[[tirx.PrimFunc, str], str] = lambda func, name: "no block-level vertical fusion"
    # (funcs, names, link or None, target) -> gpu_horizontal.LaunchShape of the fused kernel; None:
    # the target has no launch shape to report
    launch_shape: Callable[[list, list, object, object], object] | None = None
    rows: RowFusion | None = None  # None: no row-band fusion for this target
    # (producer funcs, names, concat func, plan.SliceLink, target) -> one PrimFunc writing the
    # concat's output; None: not for this target
    fuse_slices: Callable[[list, list, tirx.PrimFunc, object, object], tirx.PrimFunc] | None = None

    @property
    def fuses_vertically(self) -> bool:
        return self.fuse_vertical is not None

    def vertical(self, producer, consumer, names, link, target=None) -> tirx.PrimFunc:
        if self.fuse_vertical is None:
            raise CompileError(f"block-level vertical fusion is not implemented for {self.target}")
        return self.fuse_vertical(producer, consumer, names, link, target)


def _cpu_default_layout(target) -> cpu.CpuLayout:
    # One slice of every member per core: measured on inception_v1 (2 cores) 16/18 fused
    # kernels faster than their members' sum, against 1/18 with one slice per member chunk.
    return cpu.CpuLayout(sliced=True, tasks=num_cores(target))


def _fuse_cpu(funcs, names, target, layout=None):
    return cpu.fuse_cpu(funcs, names, layout or _cpu_default_layout(target))


def _gpu_limits(target) -> dict:
    attrs = target.attrs if target is not None else {}
    return {"max_shared_bytes": int(attrs.get("max_shared_memory_per_block", 49152)),
            "max_threads": int(attrs.get("max_num_threads", 1024))}


def _fuse_gpu(funcs, names, target, layout=None):
    return gpu_horizontal.fuse_gpu(funcs, names, layout or gpu_horizontal.GpuLayout(), **_gpu_limits(target))


def _gpu_launch_shape(funcs, names, link, target):
    if link is not None:
        return gpu_vertical.launch_shape(funcs[0], funcs[1], link)
    return gpu_horizontal.launch_shape(funcs, names, gpu_horizontal.GpuLayout(),
                                       _gpu_limits(target)["max_threads"])


def _vertical_gpu(producer, consumer, names, link, target=None):
    return gpu_vertical.fuse_vertical_gpu(producer, consumer, names, link, **_gpu_limits(target))


def _slices_cpu(funcs, names, concat, link, target):
    # the producers share one parallel loop (horizontal fusion) where the CPU code generator
    # takes them, each writing its slice of the concat
    return slices.fuse_into_slices(funcs, names, concat, link, lambda fs, ns: _fuse_cpu(fs, ns, target))


def _slices_gpu(funcs, names, concat, link, target):
    # one launch whose blocks are partitioned among the producers (horizontal fusion), each
    # writing its slice; where that fusion refuses them there is no fallback
    return slices.fuse_into_slices(funcs, names, concat, link, lambda fs, ns: _fuse_gpu(fs, ns, target),
                                   in_turn=False)


CPU_ROWS = RowFusion(
    lambda p, c, names, param, target: cpu_rows.row_link(p, c, names, param, num_cores(target)),
    lambda p, c, names, link, target: cpu_rows.fuse_rows_cpu(p, c, names, link.consumer_param, link.tasks,
                                                             link.whole_band))
CPU_CODEGEN = FusionCodegen("llvm", "parallel chunks", cpu.cpu_member, _fuse_cpu, _cpu_default_layout,
                            lambda p, c, names, link, target=None: cpu.fuse_vertical_cpu(
                                p, c, names, link, num_cores(target) if target is not None else 1),
                            cpu.vertical_member_reason, rows=CPU_ROWS, fuse_slices=_slices_cpu)
GPU_CODEGEN = FusionCodegen("cuda", "thread blocks", gpu.gpu_member, _fuse_gpu,
                            fuse_vertical=_vertical_gpu,
                            vertical_member=gpu_vertical.vertical_member_reason,
                            launch_shape=_gpu_launch_shape, fuse_slices=_slices_gpu)
