"""`workbench batch MANIFEST`: compile models x targets x variants without a terminal UI.

One Session per model: its schedule is computed once per target and shared by the fusion
plan and every untuned compile of that model (Session.compile(reuse_schedule=True)). Each
run writes what `workbench compile --out` writes into OUT/<model>/<target>/<variant>/, then
its marker (run.json, last: a finished run); OUT/summary.json and OUT/summary.md come at the
end. A failing run is recorded and the batch goes on; a re-run skips finished runs unless
--force. --jobs N runs N models at once, each in its own (spawned) process.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from queue import Empty
from typing import Callable

from engine.errors import BlockwiseError, one_line
from engine.events import CompileOptions
from engine.files import NativeLog, remove_live_temps, write_atomic
from engine.session import Session
from engine.tuning.options import TuneOptions
from workbench.args import positive_int
from workbench.batch_manifest import Manifest, ModelEntry, Run, Variant, load_manifest
from workbench.cmd_compile import write_outputs
from workbench.outdir import OUTPUTS, claim_out_dir
from workbench.present.batch import (RunRow, failed_row, progress_result, row_of, summary_json,
                                     summary_markdown)
from workbench.present.report import REPORT_NAME

MARKER = "run.json"  # a finished run's summary row, written after its report


def register(sub, model_cmd) -> None:
    what = "compile the models x targets x variants of a manifest; a report per run and a summary"
    p = sub.add_parser("batch", help=what, description=what)
    p.add_argument("manifest", help="TOML or JSON manifest (see bench/batch_example.toml)")
    p.add_argument("--out", metavar="DIR", help="output folder (default: the manifest's out, else "
                   "out/batch-MANIFEST)")
    p.add_argument("--jobs", type=positive_int, default=1, metavar="N",
                   help="models compiled at once, each in its own process (default 1; runs at the same "
                   "time disturb each other's timings)")
    p.add_argument("--force", action="store_true", help="redo the runs an earlier batch finished")
    p.set_defaults(run=batch_cmd)


def batch_cmd(args) -> int:
    manifest = load_manifest(args.manifest)  # one-line errors, before anything is written
    out = claim_out_dir(args.out or manifest.out or f"out/batch-{manifest.path.stem}")
    runs = manifest.runs()
    progress = _Progress(len(runs))
    if args.jobs > 1 and len(manifest.models) > 1:
        _run_in_processes(manifest, out, args, progress)
    else:
        for model in manifest.models:
            run_model(model, _runs_of(runs, model), out, args.force, progress.done, start=progress.start,
                      log=getattr(args, "native_log", None), debug=args.debug)
    order = {run.key: i for i, run in enumerate(runs)}
    rows = sorted(progress.rows, key=lambda row: order[row.key])
    summary = summary_json(rows, str(manifest.path), str(out))
    write_atomic(out / "summary.json", json.dumps(summary, indent=1) + "\n")
    write_atomic(out / "summary.md", summary_markdown(rows, str(manifest.path)))
    print(f"wrote {out / 'summary.md'}, {out / 'summary.json'}")
    failed = [row.key for row in rows if not row.ok]
    if failed:
        sys.stderr.write(f"workbench: {len(failed)} of {len(rows)} runs failed: {', '.join(failed)}\n")
        return 1
    return 0


def _runs_of(runs: tuple[Run, ...], model: ModelEntry) -> list[Run]:
    return [run for run in runs if run.model is model]


class _Progress:
    """`[3/12] fire_module llvm both ... ok 3 launches 0.162 ms (0.95x base) 4.1 s`, one line
    per run: the head when it starts (one process), the rest when it ends."""

    def __init__(self, total: int):
        self.total, self.rows, self.started = total, [], False

    def start(self, run: Run) -> None:
        sys.stdout.write(self._head(run.model.name, run.target, run.variant.value))
        sys.stdout.flush()
        self.started = True

    def done(self, row: RunRow) -> RunRow:
        head = "" if self.started else self._head(row.model, row.target, row.variant)
        self.rows.append(row)
        print(head + progress_result(row, self.rows), flush=True)
        self.started = False
        return row

    def _head(self, model: str, target: str, variant: str) -> str:
        count = len(self.rows) + 1
        return f"[{count}/{self.total}] {model} {target} {variant} ... "


# --- the runs of one model ------------------------------------------------------------------

def run_model(model: ModelEntry, runs: list[Run], out: Path, force: bool, done: Callable[[RunRow], None],
              start: Callable[[Run], None] | None = None, log: NativeLog | None = None,
              debug: bool = False) -> None:
    """Every run of one model, through one Session (opened at the first run not finished
    earlier); `done` gets each run's row."""
    session = None
    for run in runs:
        if start:
            start(run)
        row = None if force else finished_row(run, out)
        if row is None:
            session = session or Session(model.spec, shapes=model.shapes, seed=model.seed, inputs_from=model.inputs)
            row = run_one(session, run, out, log, debug)
        done(row)


def run_folder(run: Run, out: Path) -> Path:
    return out / run.model.name / run.target / run.variant.value


def finished_row(run: Run, out: Path) -> RunRow | None:
    """The row an earlier batch left for this run, if it finished with the same options."""
    folder = run_folder(run, out)
    try:
        row = RunRow.from_json(json.loads((folder / MARKER).read_text()))
    except (OSError, ValueError, TypeError):
        return None
    same = row.key == run.key and row.options == run.model.options_json(run.target)
    return row if same and row.ok and (folder / REPORT_NAME).is_file() else None


def run_one(session: Session, run: Run, out: Path, log: NativeLog | None, debug: bool) -> RunRow:
    """Compile one run, write its outputs and then its marker; a failure becomes its row."""
    model, target, variant = run.model, run.target, run.variant
    began = time.perf_counter()
    folder = run_folder(run, out)
    folder.mkdir(parents=True, exist_ok=True)
    for name in (MARKER, *OUTPUTS):  # the marker first: a half-redone run is not finished
        (folder / name).unlink(missing_ok=True)
    try:
        arch = model.arch.get(target)
        plan = variant.plan(session.propose(target, arch).plan) if variant is not Variant.BASE else None
        tuning = None
        if model.tune_trials or variant is Variant.COTUNED:
            cotune = model.cotune_trials if variant is Variant.COTUNED else 0
            tuning = TuneOptions(trials=model.tune_trials, cotune_trials=cotune)
        options = CompileOptions(target=target, arch=arch, runs=model.runs, rtol=model.rtol, atol=model.atol,
                                 seed=model.seed, plan=plan, fusion_policy=variant.policy, tuning=tuning)
        seen = set(log.lines()) if log else set()
        result = session.compile(options, reuse_schedule=True)
        tvm_log = [line for line in log.lines() if line not in seen] if log else []
        write_outputs(session, result, plan, folder, export=model.export, tvm_log=tvm_log)
    except BlockwiseError as err:
        return failed_row(model.name, target, variant.value, one_line(err), time.perf_counter() - began)
    except Exception as err:  # a bug: the batch goes on, --debug shows where
        if debug:
            traceback.print_exc()
        return failed_row(model.name, target, variant.value, f"internal error: {type(err).__name__}: "
                          f"{one_line(err)}", time.perf_counter() - began)
    row = row_of(model.name, variant.value, result, time.perf_counter() - began,
                 str((folder / REPORT_NAME).relative_to(out)), model.options_json(target))
    write_atomic(folder / MARKER, json.dumps(row.to_json(), indent=1) + "\n")  # last: the run finished
    return row


# --- --jobs N: one process per model ------------------------------------------------------

def _run_in_processes(manifest: Manifest, out: Path, args, progress: _Progress) -> None:
    """Models in `args.jobs` spawned processes; their rows come back through a queue to
    `progress` as each run ends. A process that dies fails the runs it had not reported."""
    runs = manifest.runs()
    context = multiprocessing.get_context("spawn")
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])  # workbench.entry's: interrupts blocked
    # the queue starts multiprocessing's resource tracker, which unblocks SIGINT and SIGTERM in
    # this thread: block them again before any thread starts (the clean stop waits for them)
    queue = context.Queue()
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    pool = ProcessPoolExecutor(max_workers=args.jobs, mp_context=context, initializer=_worker_start,
                               initargs=(queue,))
    rows: dict[str, RunRow] = {}
    try:
        jobs = {pool.submit(_worker_run, m, _runs_of(runs, m), out, args.force, args.debug): m
                for m in manifest.models}
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        while len(rows) < len(runs):
            try:
                row = queue.get(timeout=0.5)
                if row.key not in rows:  # not already failed with its dead process
                    rows[row.key] = progress.done(row)
                continue
            except Empty:
                pass
            for job, model in jobs.items():
                if job.done() and job.exception() is not None:
                    error = f"its process ended: {type(job.exception()).__name__}: {one_line(job.exception())}"
                    for run in _runs_of(runs, model):
                        if run.key not in rows:
                            rows[run.key] = progress.done(failed_row(model.name, run.target, run.variant.value,
                                                                     error, 0.0))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


_QUEUE = None  # a worker process's queue to the parent


def _worker_start(queue) -> None:
    """In each worker: rows go to `queue`; an interrupt, or the parent ending (its clean stop
    exits at once), ends the worker silently: the parent prints the one line."""
    global _QUEUE
    _QUEUE = queue
    stops = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, stops)
    parent = os.getppid()

    def watch() -> None:
        while signal.sigtimedwait(stops, 1.0) is None and os.getppid() == parent:
            pass
        remove_live_temps()
        os._exit(130)

    threading.Thread(target=watch, name="stop", daemon=True).start()


def _worker_run(model: ModelEntry, runs: list[Run], out: Path, force: bool, debug: bool) -> None:
    with NativeLog() as log:  # TVM's C++ warnings into each run's report, not the terminal
        run_model(model, runs, out, force, _QUEUE.put, log=log, debug=debug)
