"""Tuning inside the compile's schedule stage: per-kernel tuning (engine.tuning.tuner),
then co-tuning of the plan's approved horizontal groups (engine.tuning.cotune_plan); after
the default schedules, the knobs of its row-band decisions (engine.tuning.row_bands).

    outcome = tune_kernels(mod, ctx, TuneOptions(trials=64, cotune_trials=32), plan)
    outcome.module      kernels chosen by tuning, scheduled; the rest left to the default
    outcome.layouts     decision id -> co-tuned layout of its fused kernel (for apply plan)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import tvm

from engine.errors import BlockwiseError
from engine.events import Stage, StageEvent, StageStatus
from engine.tuning.database import TuneStore
from engine.tuning.measure import check_tracker
from engine.tuning.tuner import TuneOptions, TuneReport, tune_module


@dataclass(frozen=True, eq=False)
class TuneOutcome:
    module: tvm.IRModule
    report: TuneReport
    # CotuneRecord (llvm) or cotune_gpu.GpuCotuneRecord (cuda) per decision; RowBandsRecord per
    # row-band decision
    cotuned: tuple = ()
    layouts: dict = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def _store_and_emit(ctx, options: TuneOptions):
    """The model's tuning store, and a progress line of the schedule stage (seconds since now)."""
    store = TuneStore.for_model(ctx.model.name, ctx.spec.name, options.db_root)
    start = time.perf_counter()

    def emit(message: str) -> None:
        ctx.progress(StageEvent(Stage.SCHEDULE, StageStatus.PROGRESS, time.perf_counter() - start, message))

    return store, emit


def tune_kernels(mod: tvm.IRModule, ctx, options: TuneOptions, plan=None) -> TuneOutcome:
    """`ctx`: the pipeline's CompileContext (model, spec, target, kernels, progress)."""
    store, emit = _store_and_emit(ctx, options)
    if options.rpc is not None:
        check_tracker(options.rpc)  # seconds, not TVM's minute of retries per connection
    unscheduled = mod
    mod, report = tune_module(mod, ctx.target, ctx.spec.schedule_one, store, options, emit,
                              ctx.spec.before_build)
    notes = report.notes() if options.trials > 0 else []
    records: list = []
    if options.cotune_trials > 0 and plan is not None:
        if not ctx.spec.cotunes:
            raise BlockwiseError(f"co-tuning of fused groups is not implemented for {ctx.spec.name}")
        mod, records = ctx.spec.cotuner(mod, unscheduled, ctx, plan, options.cotune_trials, store, emit)
        notes.extend(r.note() for r in records)
    return TuneOutcome(mod, report, tuple(records), {r.decision: r.layout for r in records}, tuple(notes))


def tune_row_bands_of(mod: tvm.IRModule, ctx, options: TuneOptions, plan, outcome: TuneOutcome) -> TuneOutcome:
    """`outcome` with the knobs of the plan's row-band decisions (band count, order) searched on
    `mod`, the scheduled module (the fused kernel is built from the members' final, prepacked
    form)."""
    if not (options.trials > 0 or options.cotune_trials > 0) or plan is None or ctx.spec.fusion.rows is None:
        return outcome
    from engine.tuning.row_bands import tune_row_bands

    bands = tune_row_bands(mod, ctx, plan, *_store_and_emit(ctx, options))
    return replace(outcome, cotuned=outcome.cotuned + tuple(bands),
                   layouts={**outcome.layouts, **{r.decision: r.layout for r in bands}},
                   notes=outcome.notes + tuple(r.note() for r in bands))
