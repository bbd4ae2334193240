"""The compile pipeline: named stages from an ONNX model to a verified, timed executable.

    import -> fuse -> schedule -> apply plan -> build -> verify -> time

Stages share one typed `CompileContext`: each stage reads the fields earlier stages
filled and fills its own (listed on the stage function). Each reports through
`progress(StageEvent)` (engine.events); `cancel` (a threading.Event) is checked between
stages. `CompileResult` is the frozen summary the front ends get.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace

import tvm
from tvm import relax

from engine.cores import cpu_threads
from engine.errors import BlockwiseError, CompileError, InternalError, ModelLoadError, VerificationError, one_line
from engine.events import (STAGES, Cancelled, CompileOptions, ProgressFn, Stage, StageEvent,
                           StageStatus)
from engine.kernels import KernelCall, list_kernels, trace_fusion
from engine.model import Model, reference_refusal
from engine.opgraph import OperatorGraph
from engine.parallel.apply import PlanOutcome, apply_plan
from engine.parallel.tir_util import c_identifier_names
from engine.relax_import import import_relax, propagate_owners
from engine.resources import KernelResources
from engine.runtime.measure import KernelTime, Latency, onnxruntime_session, profile_kernels, time_runs
from engine.runtime.verify import (Verification, compare_kernels, compare_outputs, locate_mismatch,
                                   output_arrays, special_value_ops)
from engine.targets import TargetSpec, get_target
from engine.timing import ratio


@dataclass(frozen=True, eq=False)
class DeviceRun:
    """The built model loaded where it runs (device, or the host in emulation), with the
    verification inputs: what verify hands to time."""

    vm: object
    dev: object
    args: tuple
    inputs: dict  # name -> numpy array, the onnxruntime reference's inputs


@dataclass
class CompileContext:
    """What the stages hand to each other; `CompileResult` is its frozen summary."""

    model: Model
    graph: OperatorGraph
    spec: TargetSpec
    options: CompileOptions
    progress: ProgressFn
    target: tvm.target.Target | None = None  # import
    mod: tvm.IRModule | None = None  # import, replaced by each stage that changes it
    owner: dict = field(default_factory=dict)  # import: Relax var -> operator id
    unscheduled: tvm.IRModule | None = None  # fuse: the fused module before scheduling
    kernels: tuple[KernelCall, ...] = ()  # fuse; schedule and apply plan relist them
    tuning: object = None  # schedule: engine.tuning.hook.TuneOutcome when tuning ran
    fusion: PlanOutcome | None = None  # apply plan
    executable: object = None  # build
    kernel_resources: tuple[KernelResources, ...] = ()  # build: the target's codegen check
    ran_on: str = ""  # verify: the device kind ("cpu", "cuda") or "host emulation"
    run: DeviceRun | None = None  # verify
    verification: Verification | None = None  # verify
    kernel_times: tuple[KernelTime, ...] = ()  # time
    latency: Latency | None = None  # time
    ort_latency: Latency | None = None  # time
    notes: list[str] = field(default_factory=list)  # any stage


@dataclass(frozen=True)
class StageRecord:
    stage: Stage
    seconds: float
    status: StageStatus
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
    fusion: PlanOutcome | None = None  # what the apply-plan stage did with each decision
    tuning: object = None  # engine.tuning.tuner.TuneReport when kernels were tuned
    cotuned: tuple = ()  # engine.tuning.cotune_plan.CotuneRecord per co-tuned decision
    kernel_resources: tuple[KernelResources, ...] = ()  # per compiled kernel (cuda: from ptxas)
    executable: object = field(repr=False, default=None)
    module: tvm.IRModule | None = field(repr=False, default=None)
    # a run stopped early (options.stop_after): what compile_model(start=...) continues from
    resumable: CompileContext | None = field(repr=False, default=None)

    @property
    def launches(self) -> int:
        return len(self.kernels)


def compile_model(model: Model, graph: OperatorGraph, options: CompileOptions,
                  progress: ProgressFn | None = None,
                  cancel: threading.Event | None = None, start: CompileResult | None = None) -> CompileResult:
    """Run every stage; raises BlockwiseError subclasses with one-line messages. `start`: a
    run of this model stopped after the schedule stage or earlier, with the same target, arch
    and tuning: its stages are not run again (recorded as skipped, "reused") and the next ones
    continue from its context."""
    progress = progress or (lambda event: None)
    ctx = CompileContext(model, graph, get_target(options.target), options, progress)
    reused = _reused_stages(start, ctx)
    if reused:
        ctx = replace(start.resumable, options=options, progress=progress, notes=list(start.resumable.notes))
    records: list[StageRecord] = []

    def record(stage: Stage, status: StageStatus, seconds: float = 0.0, message: str = "") -> None:
        records.append(StageRecord(stage, seconds, status, message))
        progress(StageEvent(stage, status, seconds, message))

    for stage, run in _STAGE_FUNCS:
        if cancel is not None and cancel.is_set():
            raise Cancelled(f"compile cancelled before stage '{stage.value}'")
        skip = "reused from an earlier run" if stage in reused else _skip_reason(stage, options)
        if skip:
            record(stage, StageStatus.SKIP, message=skip)
            continue
        progress(StageEvent(stage, StageStatus.START))
        start = time.perf_counter()
        try:
            message = run(ctx) or ""
        except BlockwiseError as err:
            progress(StageEvent(stage, StageStatus.FAIL, time.perf_counter() - start, str(err)))
            raise
        except Exception as err:  # TVM or our own code: an internal failure, exit 1
            first = one_line(err)
            progress(StageEvent(stage, StageStatus.FAIL, time.perf_counter() - start, first))
            raise InternalError(f"stage '{stage.value}' failed: {first}") from err
        record(stage, StageStatus.DONE, time.perf_counter() - start, message)
        if stage is options.stop_after:
            break
    tuning = ctx.tuning
    return CompileResult(
        model=model.name, target=ctx.spec.name, target_detail=str(ctx.target), stages=tuple(records),
        kernels=ctx.kernels, kernel_times=ctx.kernel_times, latency=ctx.latency,
        onnxruntime_latency=ctx.ort_latency, verification=ctx.verification, ran_on=ctx.ran_on,
        notes=tuple(ctx.notes), fusion=ctx.fusion, tuning=tuning.report if tuning else None,
        cotuned=tuning.cotuned if tuning else (), kernel_resources=ctx.kernel_resources,
        executable=ctx.executable, module=ctx.mod, resumable=ctx if options.stop_after else None)


def _reused_stages(start: CompileResult | None, ctx: CompileContext) -> set[Stage]:
    """The stages `start` ran that a compile with ctx's model and options may reuse."""
    if start is None:
        return set()
    was = start.resumable

    def read(o: CompileOptions) -> tuple:  # what import, fuse and schedule read of the options
        return o.target, o.arch, o.tuning

    if (was is None or was.model is not ctx.model or read(was.options) != read(ctx.options)
            or STAGES.index(start.stages[-1].stage) > STAGES.index(Stage.SCHEDULE)):
        raise InternalError("compile_model(start=...): not a run of this model stopped by the schedule "
                            "stage with the same target, arch and tuning")
    return {r.stage for r in start.stages}


def _skip_reason(stage: Stage, options: CompileOptions) -> str:
    if stage is Stage.APPLY_PLAN and options.plan is None:
        return "no plan"
    if stage is Stage.TIME and not options.timing:
        return "timing off"
    return ""


# --- stages -------------------------------------------------------------------------------

def _pre_fusion(spec=None, target=None) -> list:
    """The passes before FuseOps, with the target's own passes and legalizations when a
    target row is given (TargetSpec.relax_passes, TargetSpec.legalize)."""
    extra = spec.relax_passes(target) if spec is not None and spec.relax_passes is not None else []
    custom = spec.legalize() if spec is not None and spec.legalize is not None else None
    return [*extra, relax.transform.DecomposeOpsForInference(),
            relax.transform.LegalizeOps(customize_legalize_map=custom),
            relax.transform.AnnotateTIROpPattern(), relax.transform.FoldConstant()]


def fuse_module(mod: tvm.IRModule) -> tvm.IRModule:
    """The fuse stage's passes without the kernel tracing: for tests and tools that need
    the fused, unscheduled kernels of a Relax module."""
    return relax.transform.FuseTIR()(relax.transform.FuseOps()(tvm.transform.Sequential(_pre_fusion())(mod)))


def _import(ctx: CompileContext) -> str:
    """Fills target, mod (Relax), owner."""
    stop = ctx.options.stop_after
    if stop is None or STAGES.index(stop) >= STAGES.index(Stage.VERIFY):
        _check_reference(ctx.model)  # before any work, not after the build
    ctx.target = ctx.spec.target(ctx.options.arch)
    imported = import_relax(ctx.model, ctx.graph)
    ctx.owner = imported.owner
    ctx.mod = imported.mod
    model = ctx.model
    note = f" (ai.onnx opset {model.upgraded_from} upgraded to {model.upgraded_to})" if model.upgraded_to else ""
    return f"{len(imported.owner)} Relax bindings from {len(ctx.graph.nodes)} operators{note}"


def _fuse(ctx: CompileContext) -> str:
    """Fills mod (fused kernels), unscheduled, kernels."""
    with ctx.target:
        unfused = tvm.transform.Sequential(_pre_fusion(ctx.spec, ctx.target))(ctx.mod)
        known = {b.var: ctx.owner[b.var] for blk in unfused["main"].body.blocks
                 for b in blk.bindings if b.var in ctx.owner}
        fused = relax.transform.FuseOps()(unfused)
        ops_of = trace_fusion(unfused, fused, propagate_owners(unfused["main"], known))
        # Reshape kernels become views (no launch), as the build would make them anyway.
        ctx.mod = relax.transform.RewriteDataflowReshape()(relax.transform.FuseTIR()(fused))
    ctx.kernels = list_kernels(ctx.mod, ops_of)
    ctx.unscheduled = ctx.mod
    return f"{len(ctx.kernels)} kernels"


def _schedule(ctx: CompileContext) -> str:
    """Fills tuning (when asked), mod (scheduled), kernels (renamed by prepacking)."""
    if ctx.options.tuning is not None:
        from engine.tuning.hook import tune_kernels  # loads MetaSchedule: only when tuning

        ctx.tuning = tune_kernels(ctx.mod, ctx, ctx.options.tuning, ctx.options.plan)
        ctx.mod = ctx.tuning.module
        ctx.notes.extend(ctx.tuning.notes)
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
    if ctx.tuning is not None:
        from engine.tuning.hook import tune_row_bands_of

        before = len(ctx.tuning.notes)
        ctx.tuning = tune_row_bands_of(ctx.mod, ctx, ctx.options.tuning, ctx.options.plan, ctx.tuning)
        ctx.notes.extend(ctx.tuning.notes[before:])
    return f"{ctx.spec.name} schedules for {len({k.func for k in ctx.kernels})} kernels"


def _apply_plan(ctx: CompileContext) -> str:
    """Fills fusion, mod (fused decisions), kernels."""
    layouts = ctx.tuning.layouts if ctx.tuning is not None else {}
    applied = apply_plan(ctx.options.plan, ctx.mod, ctx, layouts, ctx.options.fusion_policy)
    ctx.mod, ctx.kernels, ctx.fusion = applied.module, applied.kernels, applied.outcome
    ctx.notes.extend(applied.outcome.summary_notes())
    return f"{len(ctx.kernels)} kernels after the plan"


def _build(ctx: CompileContext) -> str:
    """Fills executable, kernel_resources (when the target checks its generated code)."""
    ctx.mod = c_identifier_names(ctx.mod)
    ctx.executable = ctx.spec.build(ctx.mod, ctx.target)
    check = ctx.spec.check_codegen(ctx.executable, ctx.target)
    if check is None:
        return str(ctx.target.kind.name)
    ctx.kernel_resources = check.kernels
    ctx.notes.extend(check.notes())
    return check.note


def _check_reference(model: Model) -> None:
    if why := reference_refusal(model.reference):
        raise ModelLoadError(why)


def _verify(ctx: CompileContext) -> str:
    """Fills ran_on, run, verification.

    onnxruntime runs on the seeded input and on a second one (does each output depend on
    the input?) and, when the model has operators that treat inf/nan/-0.0 specially, on the
    input with those values mixed in. An output that proves nothing (independent of the
    input, or all below atol) is replaced by a kernel-by-kernel comparison with the
    unscheduled build (engine.runtime.verify)."""
    model, opts = ctx.model, ctx.options
    _check_reference(model)
    inputs, second = model.sample_inputs(opts.seed), model.sample_inputs(opts.seed, second=True)
    special_ops = special_value_ops(model)
    special = model.sample_inputs(opts.seed, specials=True) if special_ops else None
    sess = onnxruntime_session(model.reference.SerializeToString(), threads=cpu_threads())
    try:
        expected, other = sess.run(None, inputs), sess.run(None, second)
        expected_special = sess.run(None, special) if special is not None else None
    except Exception as err:  # noqa: BLE001 - onnxruntime raises its own types
        some = "given and random" if model.given else "random"
        raise CompileError(f"onnxruntime cannot run the model on {some} inputs, so there is nothing to check "
                           f"against: {_ort_reason(err)}; give inputs it runs on with --inputs FILE") from None
    # freed before our runs: an idle onnxruntime session in the process slowed TVM's
    # thread pool (squeezenet, 2 cores: 2.54 -> 4.08 ms); _time makes its own afterwards
    del sess
    if ctx.spec.device_present():
        ctx.ran_on, executable, dev = ctx.spec.device_kind, ctx.executable, ctx.spec.device()
    else:
        if not ctx.spec.host_emulation:
            raise CompileError(f"no {ctx.spec.device_kind} device present to run the {ctx.spec.name} build")
        ctx.ran_on, executable, dev = "host emulation", ctx.spec.host_compile(ctx.mod, ctx.target), tvm.cpu()
        ctx.notes.append(f"no {ctx.spec.device_kind} device: kernels verified on the CPU with "
                         "blocks and threads run in a permuted order between barriers, outputs and shared "
                         "memory poisoned; no device timing")
    vm = relax.VirtualMachine(executable, dev)

    def tensors(values: dict) -> tuple:
        return tuple(tvm.runtime.tensor(values[spec.name], dev) for spec in model.inputs)

    def outputs(args: tuple) -> list:
        return output_arrays(vm["main"](*args))

    ctx.run = DeviceRun(vm, dev, tensors(inputs), inputs)
    actual = outputs(ctx.run.args)
    verification = compare_outputs(model.outputs, expected, actual, opts.rtol, opts.atol, other=other)
    if not verification.values_match:
        ctx.verification = replace(verification, first_bad_kernel=locate_mismatch(ctx))
        raise VerificationError(ctx.verification.summary())
    if verification.uninformative:
        verification = verification.with_kernels(compare_kernels(ctx))
        ctx.notes.extend(verification.notes)
    if special is not None:
        checked = compare_outputs(model.outputs, expected_special, outputs(tensors(special)), opts.rtol, opts.atol)
        verification = verification.with_special_values(checked, special_ops)
        ctx.notes.append(verification.notes[-1])
    ctx.verification = verification
    if not verification.passed:
        raise VerificationError(verification.summary())
    return verification.summary()


def _ort_reason(err: BaseException) -> str:
    """onnxruntime's message without its '[ONNXRuntimeError] : 2 : INVALID_ARGUMENT :' prefix."""
    text = one_line(err, 400)
    return text.rsplit(" : ", 1)[-1] if text.startswith("[ONNXRuntimeError]") else text


def _time(ctx: CompileContext) -> str:
    """Fills kernel_times, latency, ort_latency (device runs only)."""
    if ctx.ran_on != ctx.spec.device_kind:
        ctx.notes.append("timing skipped: kernels ran in host emulation, not on the device")
        return "skipped (no device)"
    vm, dev, args = ctx.run.vm, ctx.run.dev, ctx.run.args
    runs = ctx.options.runs
    kernel_names = {k.func for k in ctx.kernels}

    def sync():
        dev.sync()

    def run():
        vm["main"](*args)
        dev.sync()

    ctx.kernel_times = tuple(profile_kernels(vm, run, runs=max(3, runs // 2), sync=sync,
                                             names=kernel_names))
    ctx.latency = time_runs(run, runs)
    sess = onnxruntime_session(ctx.model.reference.SerializeToString(), threads=cpu_threads())
    inputs = ctx.run.inputs
    ctx.ort_latency = time_runs(lambda: sess.run(None, inputs), runs)
    r = ratio(ctx.latency.spread, ctx.ort_latency.spread)  # with the noise of both (engine.timing)
    return (f"{ctx.latency.median_ms:.3f} ms vs onnxruntime {ctx.ort_latency.median_ms:.3f} ms "
            f"({r.value:.2f}x ±{r.noise:.2f})")


_STAGE_FUNCS = [(Stage.IMPORT, _import), (Stage.FUSE, _fuse), (Stage.SCHEDULE, _schedule),
                (Stage.APPLY_PLAN, _apply_plan), (Stage.BUILD, _build), (Stage.VERIFY, _verify),
                (Stage.TIME, _time)]
assert tuple(s for s, _ in _STAGE_FUNCS) == STAGES


__all__ = ["Stage", "STAGES", "StageEvent", "StageStatus", "CompileOptions", "CompileResult",
           "CompileContext", "compile_model", "Cancelled"]
