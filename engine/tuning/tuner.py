"""Per-kernel MetaSchedule tuning as the pipeline's `tune` hook (inside the schedule stage).

    CompileOptions(tuning=TuneOptions(trials=128))     (engine.tuning.hook runs it)

For every distinct kernel workload of the fused, still unscheduled module:

1. measure the target's default schedule (engine.schedule.cpu.rules on llvm) once;
2. spend the trial budget on the kernels with the most default time (calls x time),
   at least `trials_per_kernel` trials each, with MetaSchedule (evolutionary search);
3. measure side by side, with the same builder and runner: the default, MetaSchedule's
   best, and every point of the default rule's own knob space (engine.tuning.knobs: the
   conv register tiles, a handful of candidates); keep the fastest;
4. give the chosen kernels their schedule; all others are left for the default.

Everything measured is stored (engine.tuning.database): a later compile with the same
or a smaller budget measures nothing and replays the stored choices.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import Callable

import tvm
from tvm import relax, tirx
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms

from engine.ir_module import with_functions
from engine.tuning.builder import import_intrinsics, local_builder
from engine.tuning.database import Choice, KernelRecord, TuneStore, workload_key
from engine.tuning.knobs import schedule_knobs, template_points
from engine.tuning.kernel import as_kernel
from engine.tuning.measure import CountingRunner, make_runner, measure_modules
from engine.tuning.options import MIN_TRIALS_PER_KERNEL, RpcEndpoint, TuneOptions  # noqa: F401 (re-exported)

@dataclass(frozen=True)
class TuneReport:
    store: str
    records: tuple[KernelRecord, ...]  # one per distinct kernel workload of the module
    measured: int  # candidates sent to the runner in this compile (0: all reused)
    reused: int  # workloads found in the store

    def notes(self) -> list[str]:
        lines = [f"tuning: {self.measured} candidates measured, {self.reused}/{len(self.records)} "
                 f"kernels from {self.store}"]
        for r in self.records:
            if r.choice is Choice.NOT_TUNED:
                continue
            best = f"{r.tuned_s * 1e3:.3f} ms" if r.tuned_s else "no valid candidate"
            default = f"{r.default_s * 1e3:.3f} ms" if r.default_s else "none"
            knobs = f", knobs {list(r.knobs)}" if r.knobs else ""
            lines.append(f"tuning: {r.name}: {r.choice.value} (default {default}, best {best}, "
                         f"{r.trials} trials{knobs})")
        return lines


@dataclass
class _Workload:
    key: str
    mod: tvm.IRModule  # {"main": the unscheduled PrimFunc}
    gvars: list  # GlobalVars of the module holding this workload
    calls: int


def tune_module(mod: tvm.IRModule, target, default_schedule: Callable, store: TuneStore,
                options: TuneOptions, emit: Callable[[str], None] = lambda m: None, before_build=None
                ) -> tuple[tvm.IRModule, TuneReport]:
    """Tune the unscheduled PrimFuncs of `mod`; returns the module with the chosen tuned
    kernels scheduled (marked `tirx.is_scheduled`) and a report. `before_build`: the
    target's rewrite before a build, applied to every candidate (timed as it will run)."""
    workloads = _workloads(mod)
    records = store.load_records()
    reused = sum(1 for w in workloads if w.key in records)
    runner = CountingRunner(make_runner(options.rpc))
    builder = local_builder(before_build=before_build)
    db = store.database()

    # 1. The default schedule of each new workload, measured once (to rank them).
    new = [w for w in workloads if w.key not in records] if options.trials > 0 else []
    if new:
        emit(f"measuring the default schedule of {len(new)} kernels")
        defaults = [default_schedule(w.mod, target) for w in new]
        times = measure_modules([d for d in defaults if d is not None], target, builder, runner)
        it = iter(times)
        for w, d in zip(new, defaults):
            records[w.key] = KernelRecord(w.key, _name(w), next(it) if d is not None else None)
        store.save_records(records)

    # 2. The budget goes to the kernels with most default time.
    per_kernel = max(options.trials_per_kernel, 1)
    n_tuned = max(1, options.trials // per_kernel)
    ranked = sorted((w for w in workloads if w.key in records),
                    key=lambda w: -(records[w.key].default_s or 1.0) * w.calls)
    chosen = ranked[:n_tuned] if options.trials > 0 else []
    budget = options.trials // max(len(chosen), 1)
    todo = [w for w in chosen if records[w.key].trials < budget]
    if todo:
        _run_tuner(todo, target, db, store, builder, runner, options, budget, emit)
        # 3. Default, MetaSchedule's best and the template's knob points, side by side.
        for w in todo:
            records[w.key] = _pick(w, records[w.key], _query(db, w, target), default_schedule, target,
                                   builder, runner, budget)
            r = records[w.key]
            emit(f"{_name(w)}: {r.choice.value} (default {_ms(r.default_s)}, best {_ms(r.tuned_s)}"
                 f"{f', knobs {list(r.knobs)}' if r.knobs else ''})")
        store.save_records(records)

    # 4. Tuned kernels replace the default schedule.
    updates = {}
    for w in workloads:
        choice = records[w.key].choice if w.key in records else Choice.NOT_TUNED
        func = None
        if choice is Choice.TUNED:
            sch = _query(db, w, target)
            func = sch.mod["main"] if sch is not None else None
        elif choice is Choice.TEMPLATE:
            func = schedule_knobs(w.mod["main"], target, tuple(records[w.key].knobs))
        if func is not None:
            for gv in w.gvars:
                updates[gv] = as_kernel(func, mod[gv])
    mod = with_functions(mod, updates)
    report = TuneReport(str(store.path), tuple(records[w.key] for w in workloads if w.key in records),
                        runner.count, reused)
    return mod, report


def _pick(w: _Workload, record: KernelRecord, sch, default_schedule, target, builder, runner,
          budget: int) -> KernelRecord:
    """Measure the candidates of one workload side by side and record the fastest."""
    cands: list[tuple[Choice, tuple | None, tvm.IRModule]] = []
    default = default_schedule(w.mod, target)
    if default is not None:
        cands.append((Choice.DEFAULT, None, default))
    if sch is not None:
        cands.append((Choice.TUNED, None, sch.mod))
    for knobs, func in template_points(w.mod["main"], target)[1:]:  # [0] is the default
        cands.append((Choice.TEMPLATE, knobs, tvm.IRModule({"main": func})))
    times = measure_modules([m for _, _, m in cands], target, builder, runner) if cands else []
    valid = [(t, i) for i, t in enumerate(times) if t is not None]
    default_s = times[0] if default is not None else None
    if not valid:
        return replace(record, default_s=default_s or record.default_s, trials=budget, choice=Choice.DEFAULT)
    best_s, best = min(valid)
    choice, knobs, _ = cands[best]
    return replace(record, default_s=default_s or record.default_s, tuned_s=best_s, trials=budget,
                   choice=choice, knobs=knobs)


def _run_tuner(todo, target, db, store, builder, runner, options, budget, emit) -> None:
    import_intrinsics()  # TuneContext imports them; fast with the scoped inspect fix
    names = [_name(w) for w in todo]
    ms_logger = logging.getLogger("tvm.s_tir.meta_schedule")
    level = ms_logger.level
    ms_logger.setLevel(logging.WARNING)  # MetaSchedule's tables go to the logs folder only
    try:
        loggers = ms.logging.get_loggers_from_work_dir(str(store.path), names)
        tasks = [ms.TuneContext(mod=w.mod, target=target, space_generator="post-order-apply",
                                search_strategy="evolutionary", task_name=n,
                                rand_state=options.seed + i, num_threads="physical",
                                logger=log).clone()
                 for i, (w, n, log) in enumerate(zip(todo, names, loggers))]
        callbacks = ms.measure_callback.MeasureCallback.create("default") + [_Progress(names, budget, emit)]
        emit(f"tuning {len(todo)} kernels, {budget} trials each: {', '.join(names)}")
        ms.tune.tune_tasks(tasks=tasks, task_weights=[float(w.calls) for w in todo],
                           work_dir=str(store.path), max_trials_global=budget * len(todo),
                           max_trials_per_task=budget,
                           num_trials_per_iter=min(options.trials_per_round, budget),
                           builder=builder, runner=runner, database=db,
                           measure_callbacks=callbacks, task_scheduler="round-robin")
    finally:
        ms_logger.setLevel(level)


@derived_object
class _Progress(ms.measure_callback.PyMeasureCallback):
    """Reports trials and the best time so far after every measured batch."""

    def __init__(self, names: list[str], budget: int, emit) -> None:
        super().__init__()
        self.names, self.budget, self.emit = names, budget, emit
        self.done = [0] * len(names)
        self.best = [float("inf")] * len(names)

    def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
        self.done[task_id] += len(measure_candidates)
        for res in runner_results:
            if res.error_msg is None and res.run_secs:
                self.best[task_id] = min(self.best[task_id], min(float(s) for s in res.run_secs))
        best = self.best[task_id]
        self.emit(f"tuning {self.names[task_id]}: {self.done[task_id]}/{self.budget} trials, "
                  f"best {_ms(best if best < float('inf') else None)}")


def _workloads(mod: tvm.IRModule) -> list[_Workload]:
    calls: dict[str, int] = {}
    for block in mod["main"].body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op) and v.op.name == "relax.call_tir":
                calls[v.args[0].name_hint] = calls.get(v.args[0].name_hint, 0) + 1
    found: dict[str, _Workload] = {}
    for gv, func in mod.functions_items():
        if not isinstance(func, tirx.PrimFunc) or gv.name_hint not in calls:
            continue
        if func.attrs is not None and func.attrs.get("tirx.is_scheduled", False):
            continue
        wmod = tvm.IRModule({"main": func.with_attr("global_symbol", "main")})
        key = workload_key(wmod)
        w = found.setdefault(key, _Workload(key, wmod, [], 0))
        w.gvars.append(gv)
        w.calls += calls[gv.name_hint]
    return list(found.values())


def _query(db, w: _Workload, target):
    return db.query_schedule(w.mod, target=target, workload_name="main")


def _name(w: _Workload) -> str:
    return w.gvars[0].name_hint


def _ms(seconds: float | None) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds else "n/a"
