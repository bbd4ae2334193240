"""The compile pipeline: named stages from an ONNX model to a verified, timed executable.

    import -> fuse -> schedule -> apply plan -> build -> verify -> time

Each stage reports through `progress(StageEvent)`; stage names are stable strings shown
by the CLI and the TUI. `cancel` (a threading.Event) is checked between stages.
"""

from __future__ import annotations

import enum
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Callable

import tvm
from tvm import relax

from engine.cores import cpu_threads
from engine.errors import BlockwiseError, CompileError
from engine.kernels import KernelCall, list_kernels, trace_fusion
from engine.measure import KernelTime, Latency, onnxruntime_session, profile_kernels, time_runs
from engine.model import Model
from engine.opgraph import OperatorGraph
from engine.relax_import import import_relax, propagate_owners
from engine.targets import TargetSpec, get_target
from engine.verify import Verification, locate_mismatch, compare_outputs


class Stage(str, enum.Enum):
    IMPORT = "import"
    FUSE = "fuse"
    SCHEDULE = "schedule"
    APPLY_PLAN = "apply plan"
    BUILD = "build"
    VERIFY = "verify"
    TIME = "time"


STAGES = tuple(Stage)


@dataclass(frozen=True)
class StageEvent:
    stage: Stage
    status: str  # "start" | "done" | "skip" | "fail"
    seconds: float = 0.0
    message: str = ""


class Cancelled(BlockwiseError):
    """The compile was cancelled between stages."""


@dataclass(frozen=True)
class CompileOptions:
    target: str = "llvm"
    arch: str | None = None
    runs: int = 20
    rtol: float = 1e-3
    atol: float = 1e-4
    seed: int = 0
    timing: bool = True
    stop_after: Stage | None = None  # e.g. Stage.SCHEDULE for analyses of scheduled kernels
    # A function IRModule -> IRModule applying approved fusion decisions (engine.fusion);
    # None skips the stage.
    apply_plan: Callable[[tvm.IRModule, "CompileContext"], tvm.IRModule] | None = None
    # A function IRModule -> IRModule scheduling some kernels (engine.tuning.KernelTuner),
    # run first in the schedule stage; kernels it leaves unscheduled get the default.
    tune: Callable[[tvm.IRModule, "CompileContext"], tvm.IRModule] | None = None


@dataclass
class CompileContext:
    """What the stages hand to each other; `CompileResult` is its frozen summary."""

    model: Model
    graph: OperatorGraph
    spec: TargetSpec
    options: CompileOptions
    target: tvm.target.Target | None = None
    mod: tvm.IRModule | None = None
    kernels: tuple[KernelCall, ...] = ()
    executable: object = None
    ran_on: str = ""  # the device kind ("cpu", "cuda") or "host emulation"
    notes: list[str] = field(default_factory=list)
    # decision id -> co-tuned layout of its fused kernel (engine.tuning.cotune_plan)
    fusion_layouts: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class StageRecord:
    stage: Stage
    seconds: float
    status: str
    message: str = ""


@dataclass(frozen=True, eq=False)
class CompileResult:
    model: str
    target: str
    target_detail: str
    stages: tuple[StageRecord, ...]
    kernels: tuple[KernelCall, ...]
    kernel_times: tuple[KernelTime, ...]
    latency: Latency | None
    onnxruntime_latency: Latency | None
    verification: Verification | None  # None when stopped before the verify stage
    ran_on: str
    notes: tuple[str, ...]
    executable: object = field(repr=False, default=None)
    module: tvm.IRModule | None = field(repr=False, default=None)

    @property
    def launches(self) -> int:
        return len(self.kernels)


ProgressFn = Callable[[StageEvent], None]


def compile_model(model: Model, graph: OperatorGraph, options: CompileOptions,
                  progress: ProgressFn | None = None,
                  cancel: threading.Event | None = None) -> CompileResult:
    """Run every stage; raises BlockwiseError subclasses with one-line messages."""
    progress = progress or (lambda event: None)
    spec = get_target(options.target)
    ctx = CompileContext(model, graph, spec, options)
    records: list[StageRecord] = []
    outputs: dict[str, object] = {}
    for stage, run in _STAGE_FUNCS:
        if cancel is not None and cancel.is_set():
            raise Cancelled(f"compile cancelled before stage '{stage.value}'")
        if stage is Stage.APPLY_PLAN and options.apply_plan is None:
            records.append(StageRecord(stage, 0.0, "skip", "no plan"))
            progress(StageEvent(stage, "skip", message="no plan"))
            continue
        if stage is Stage.TIME and not options.timing:
            records.append(StageRecord(stage, 0.0, "skip", "timing off"))
            progress(StageEvent(stage, "skip", message="timing off"))
            continue
        progress(StageEvent(stage, "start"))
        start = time.perf_counter()
        try:
            message = run(ctx, outputs) or ""
        except BlockwiseError as err:
            progress(StageEvent(stage, "fail", time.perf_counter() - start, str(err)))
            raise
        except Exception as err:
            first = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
            progress(StageEvent(stage, "fail", time.perf_counter() - start, first))
            raise CompileError(f"stage '{stage.value}' failed: {first}") from err
        seconds = time.perf_counter() - start
        records.append(StageRecord(stage, seconds, "done", message))
        progress(StageEvent(stage, "done", seconds, message))
        if stage is options.stop_after:
            break
    return CompileResult(
        model=model.name, target=spec.name, target_detail=str(ctx.target), stages=tuple(records),
        kernels=ctx.kernels, kernel_times=outputs.get("kernel_times", ()),
        latency=outputs.get("latency"), onnxruntime_latency=outputs.get("ort_latency"),
        verification=outputs.get("verification"), ran_on=ctx.ran_on, notes=tuple(ctx.notes),
        executable=ctx.executable, module=ctx.mod)


# --- stages -------------------------------------------------------------------------------

_PRE_FUSION = [relax.transform.DecomposeOpsForInference(), relax.transform.LegalizeOps(),
               relax.transform.AnnotateTIROpPattern(), relax.transform.FoldConstant()]


def fuse_module(mod: tvm.IRModule) -> tvm.IRModule:
    """The fuse stage's passes without the kernel tracing: for tests and tools that need
    the fused, unscheduled kernels of a Relax module."""
    return relax.transform.FuseTIR()(relax.transform.FuseOps()(tvm.transform.Sequential(_PRE_FUSION)(mod)))


def _import(ctx: CompileContext, out: dict) -> str:
    ctx.target = ctx.spec.target(ctx.options.arch)
    imported = import_relax(ctx.model, ctx.graph)
    out["owner"] = imported.owner
    ctx.mod = imported.mod
    return f"{len(imported.owner)} Relax bindings from {len(ctx.graph.nodes)} operators"


def _fuse(ctx: CompileContext, out: dict) -> str:
    with ctx.target:
        unfused = tvm.transform.Sequential(_PRE_FUSION)(ctx.mod)
        known = {b.var: out["owner"][b.var] for blk in unfused["main"].body.blocks
                 for b in blk.bindings if b.var in out["owner"]}
        fused = relax.transform.FuseOps()(unfused)
        ops_of = trace_fusion(unfused, fused, propagate_owners(unfused["main"], known))
        # Reshape kernels become views (no launch), as the build would make them anyway.
        ctx.mod = relax.transform.RewriteDataflowReshape()(relax.transform.FuseTIR()(fused))
    ctx.kernels = list_kernels(ctx.mod, ops_of)
    out["unscheduled"] = ctx.mod
    return f"{len(ctx.kernels)} kernels"


def _schedule(ctx: CompileContext, out: dict) -> str:
    if ctx.options.tune is not None:
        ctx.mod = ctx.options.tune(ctx.mod, ctx)
    ctx.mod = ctx.spec.schedule(ctx.mod, ctx.target)
    # Scheduling may prepack weights and rename kernels (`_prepacked`): re-list the calls
    # with the same operators, by position among kernel calls.
    if [k.func for k in list_kernels(ctx.mod, [])] != [k.func for k in ctx.kernels]:
        renamed = list_kernels(ctx.mod, [])
        same = [k for k in renamed if not k.func.startswith("layout_rewrite") and "preproc" not in k.func]
        if len(same) == len(ctx.kernels):
            ctx.kernels = tuple(replace(k, func=n.func, var=n.var) for k, n in zip(ctx.kernels, same))
        else:
            ctx.kernels = renamed
    return f"{ctx.spec.name} schedules for {len({k.func for k in ctx.kernels})} kernels"


def _apply_plan(ctx: CompileContext, out: dict) -> str:
    ctx.mod = ctx.options.apply_plan(ctx.mod, ctx)
    return f"{len(ctx.kernels)} kernels after the plan"


def _build(ctx: CompileContext, out: dict) -> str:
    ctx.executable = tvm.compile(ctx.mod, target=ctx.target)
    check = ctx.spec.check_codegen(ctx.executable, ctx.target)
    if check:
        ctx.notes.append(check)
    return check or str(ctx.target.kind.name)


def _verify(ctx: CompileContext, out: dict) -> str:
    model, opts = ctx.model, ctx.options
    inputs = model.random_inputs(opts.seed)
    sess = onnxruntime_session(model.proto.SerializeToString(), threads=cpu_threads())
    expected = sess.run(None, inputs)
    # freed before our runs: an idle onnxruntime session in the process slowed TVM's
    # thread pool (squeezenet, 2 cores: 2.54 -> 4.08 ms); _time makes its own afterwards
    del sess
    out["ort_inputs"] = inputs
    if ctx.spec.device_present():
        ctx.ran_on = ctx.spec.device_kind
        vm, dev = _vm(ctx.executable, ctx.spec.device())
    else:
        if not ctx.spec.host_emulation:
            raise CompileError(f"no {ctx.spec.device_kind} device present to run the {ctx.spec.name} build")
        from engine.gpu_emulation import emulate_on_cpu

        ctx.ran_on = "host emulation"
        host = get_target("llvm").target(None)
        emulated = tvm.compile(emulate_on_cpu(ctx.mod), target=host)
        vm, dev = _vm(emulated, tvm.cpu())
        ctx.notes.append(f"no {ctx.spec.device_kind} device: kernels verified on the CPU with "
                         "thread bindings turned into loops; no device timing")
    out["vm"], out["dev"] = vm, dev
    args = [tvm.runtime.tensor(inputs[spec.name], dev) for spec in model.inputs]
    out["args"] = args
    actual = _as_list(vm["main"](*args))
    verification = compare_outputs(model.outputs, expected, [a.numpy() for a in actual], opts.rtol, opts.atol)
    if not verification.passed:
        verification = replace(verification, first_bad_kernel=locate_mismatch(ctx, out, inputs))
        out["verification"] = verification
        raise CompileError(verification.summary())
    out["verification"] = verification
    return verification.summary()


def _time(ctx: CompileContext, out: dict) -> str:
    if ctx.ran_on != ctx.spec.device_kind:
        ctx.notes.append("timing skipped: kernels ran in host emulation, not on the device")
        return "skipped (no device)"
    vm, dev, args = out["vm"], out["dev"], out["args"]
    runs = ctx.options.runs
    kernel_names = {k.func for k in ctx.kernels}

    def sync():
        dev.sync()

    def run():
        vm["main"](*args)
        dev.sync()

    out["kernel_times"] = profile_kernels(vm, run, runs=max(3, runs // 2), sync=sync,
                                         names=kernel_names)
    out["latency"] = time_runs(run, runs)
    sess = onnxruntime_session(ctx.model.proto.SerializeToString(), threads=cpu_threads())
    inputs = out["ort_inputs"]
    out["ort_latency"] = time_runs(lambda: sess.run(None, inputs), runs)
    ratio = out["latency"].median_ms / out["ort_latency"].median_ms
    return f"{out['latency'].median_ms:.2f} ms vs onnxruntime {out['ort_latency'].median_ms:.2f} ms ({ratio:.2f}x)"


_STAGE_FUNCS = [(Stage.IMPORT, _import), (Stage.FUSE, _fuse), (Stage.SCHEDULE, _schedule),
                (Stage.APPLY_PLAN, _apply_plan), (Stage.BUILD, _build), (Stage.VERIFY, _verify),
                (Stage.TIME, _time)]


def _vm(executable, dev):
    return relax.VirtualMachine(executable, dev), dev


def _as_list(value) -> list:
    if isinstance(value, (list, tuple)) or type(value).__name__ in ("Array", "Tuple"):
        return list(value)
    return [value]


__all__ = ["Stage", "STAGES", "StageEvent", "CompileOptions", "CompileResult", "compile_model",
           "Cancelled"]
