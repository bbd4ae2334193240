"""TVM's own CPU flows, as the benchmarks' peers (bench/compare.py, bench/tuning_squeezenet.py).

- `build_unscheduled`: `tvm.compile` of the imported module. It applies no schedule (one
  thread, naive loops): a curiosity, not something a TVM user ships.
- `build_metaschedule`: what a TVM user does for CPU. `tune_relax` over every task of the
  fused module with a global trial budget, from a fresh work dir, then
  `MetaScheduleApplyDatabase` and the stock build. Tasks are found only after LegalizeOps →
  AnnotateTIROpPattern → FoldConstant → FuseOps → FuseTIR, so it tunes the module of our
  fuse stage (TVM's own passes). Builds use engine.tuning.builder's fix (out of the box
  every build times out). A tuned task keeps MetaSchedule's best schedule; a task with no
  valid record stays unscheduled, as in TVM. No weight prepacking (`cpu_weight_prepack`
  changes the deployed interface; TVM leaves it off by default).

The MetaSchedule run reports whether its schedules are real (`MetaScheduleRun.problem`):
no valid record at all or any build timeout means the figure would measure the setup, not
MetaSchedule, and callers must not report it.
"""

from __future__ import annotations

import logging
import tempfile
import time
from dataclasses import asdict, dataclass

import tvm
from tvm.ir.utils import derived_object
from tvm.relax.transform import MetaScheduleApplyDatabase
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule import relax_integration

from engine.events import CompileOptions, Stage
from engine.relax_import import import_relax
from engine.tuning.builder import import_intrinsics, local_builder
from engine.tuning.measure import make_runner


@dataclass(frozen=True)
class MetaScheduleRun:
    trials: int  # the global budget asked for
    tasks: int  # tasks extracted from the fused module
    tasks_scheduled: int  # tasks with a valid record (the others stay unscheduled)
    measured: int  # candidates sent to the runner
    records: int  # tuning records in the database
    valid_records: int  # records with a measured run time
    build_errors: int
    build_timeouts: int
    run_errors: int
    first_error: str
    tune_s: float

    @property
    def problem(self) -> str:
        """Why the tuned figure would be meaningless ("" when it is fine)."""
        if self.build_timeouts:
            return f"{self.build_timeouts} builds timed out ({self.first_error})"
        if not self.valid_records:
            return f"no valid tuning record out of {self.records} ({self.first_error or 'no error message'})"
        return ""

    def as_dict(self) -> dict:
        return {**asdict(self), "problem": self.problem}


def build_unscheduled(model, graph, target):
    """The same TVM's default llvm build of the imported module (no schedule)."""
    return tvm.compile(import_relax(model, graph).mod, target=target)


def build_metaschedule(session, target, trials: int) -> tuple[object, MetaScheduleRun]:
    """Stock MetaSchedule with `trials` in all; returns the executable and what the tuning did."""
    import_intrinsics()  # TuneContext imports them: seconds with the fix, ~45 s without
    ms_logger = logging.getLogger("tvm.s_tir.meta_schedule")
    level = ms_logger.level
    ms_logger.setLevel(logging.WARNING)  # its per-task tables: noise here
    mod = session.compile(CompileOptions(stop_after=Stage.FUSE)).module
    tasks = relax_integration.extract_tasks(mod, target)
    # Small batches, so that the budget reaches every task (an untuned task stays naive).
    per_iter = max(2, min(16, trials // max(len(tasks), 1)))
    errors = _ErrorCount()
    start = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="ms-peer-") as work_dir:
            db = relax_integration.tune_relax(
                mod, None, target, work_dir, max_trials_global=trials, num_trials_per_iter=per_iter,
                builder=local_builder(), runner=make_runner(),
                measure_callbacks=ms.measure_callback.MeasureCallback.create("default") + [errors])
            tune_s = time.perf_counter() - start
            records = db.get_all_tuning_records()
            valid = sum(1 for r in records if r.run_secs and min(float(s) for s in r.run_secs) < 1e9)
            scheduled = sum(1 for t in tasks
                            if db.query_schedule(t.dispatched[0], target=target, workload_name=t.task_name)
                            is not None)
            # compile_relax would re-fuse the fused module and then find none of its records:
            # apply the database to the fused module and build it as the stock build does.
            with target, db:
                mod = MetaScheduleApplyDatabase()(mod)
    finally:
        ms_logger.setLevel(level)
    run = MetaScheduleRun(trials, len(tasks), scheduled, errors.measured, len(records), valid, errors.build, errors.timeouts,
                          errors.run, errors.first, tune_s)
    return tvm.compile(mod, target=target), run


@derived_object
class _ErrorCount(ms.measure_callback.PyMeasureCallback):
    """Counts the candidates measured, failed builds (and timeouts among them) and failed runs."""

    def __init__(self) -> None:
        super().__init__()
        self.measured = self.build = self.timeouts = self.run = 0
        self.first = ""

    def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
        self.measured += len(measure_candidates)
        for res in builder_results:
            if res.error_msg:
                self.build += 1
                self.timeouts += "Timeout" in str(res.error_msg)
                self.first = self.first or _first_line(res.error_msg)
        for res in runner_results:
            if res.error_msg:
                self.run += 1
                self.first = self.first or _first_line(res.error_msg)


def _first_line(msg) -> str:
    lines = [ln.strip() for ln in str(msg).splitlines() if ln.strip()]
    return lines[-1][:160] if lines else ""
