"""Tuned vs untuned (our default schedules) vs stock TVM, untuned and tuned with the same
trial budget, on one model, llvm.

    python bench/tuning_squeezenet.py [--model zoo:squeezenet] [--trials 192] [--rounds 15]
                                      [--no-stock-tuning]

The tuned build reuses (or fills) .blockwise/tune/<model>-llvm. Stock TVM tuned is the same
TVM's own flow: `meta_schedule.relax_integration.tune_relax` over all tasks of the fused
module with the same global trial budget (a fresh work dir each run; our builder fix, or
every build times out), then `MetaScheduleApplyDatabase` and the stock build. The executables are timed in the same
process, interleaved round by round, and the script prints median-of-rounds and best-round
latencies and the ratios.
"""

import argparse
import json
import logging
import statistics
import time

import tvm
from tvm import relax

from engine.cores import configure_runtime
from engine.runtime.measure import time_runs
from engine.pipeline import CompileOptions, Stage
from engine.session import Session
from engine.tuning import Choice, TuneOptions


configure_runtime()  # before any kernel runs: stock TVM and blockwise get the same thread pool


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="zoo:squeezenet")
    ap.add_argument("--trials", type=int, default=192)
    ap.add_argument("--no-stock-tuning", action="store_true", help="skip tuning stock TVM (minutes)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    s = Session(args.model)
    tuned = s.compile(CompileOptions(timing=False, tuning=TuneOptions(trials=args.trials)))
    builds = {
        "untuned": s.compile(CompileOptions(timing=False)).executable,
        "tuned": tuned.executable,
    }
    fused = s.compile(CompileOptions(stop_after=Stage.FUSE))
    target = tvm.target.Target(fused.target_detail)
    builds["naive"] = tvm.compile(fused.module, target=target)
    stock_tune_s = None
    if not args.no_stock_tuning:
        start = time.perf_counter()
        builds["stock-tuned"] = _stock_tuned(s, target, args.trials)
        stock_tune_s = time.perf_counter() - start
    dev = tvm.cpu()
    inputs = s.model.random_inputs(0)
    args_ = [tvm.runtime.tensor(inputs[i.name], dev) for i in s.model.inputs]
    vms = {k: relax.VirtualMachine(ex, dev) for k, ex in builds.items()}
    samples = {k: [] for k in vms}
    for r in range(args.rounds):
        for k, vm in vms.items():
            if k == "naive" and r % 3:
                continue  # slow: every third round
            runs = 2 if k == "naive" else args.runs
            samples[k].append(time_runs(lambda vm=vm: vm["main"](*args_), runs).median_ms)
    out = {k: {"median_ms": statistics.median(v), "best_ms": min(v), "rounds": len(v)} for k, v in samples.items()}
    out["tuned_vs_untuned"] = out["untuned"]["median_ms"] / out["tuned"]["median_ms"]
    out["tuned_vs_untuned_best"] = out["untuned"]["best_ms"] / out["tuned"]["best_ms"]
    out["tuned_vs_naive"] = out["naive"]["median_ms"] / out["tuned"]["median_ms"]
    if "stock-tuned" in out:
        out["tuned_vs_stock_tuned"] = out["stock-tuned"]["median_ms"] / out["tuned"]["median_ms"]
        out["stock_tuning_s"] = stock_tune_s
    out["measured_this_run"] = tuned.tuning.measured
    out["choices"] = [f"{r.name}: {r.choice.value}" for r in tuned.tuning.records if r.choice is not Choice.NOT_TUNED]
    print(json.dumps(out, indent=1))


def _stock_tuned(session, target, trials: int):
    """Stock TVM's MetaSchedule flow, `trials` in all."""
    import tempfile

    from tvm.relax.transform import MetaScheduleApplyDatabase
    from tvm.s_tir.meta_schedule import relax_integration

    from engine.tuning.builder import import_intrinsics, local_builder
    from engine.tuning.measure import make_runner

    import_intrinsics()
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)  # its tables: noise here
    # The legalized, fused module (TVM's own passes, what the stock build compiles): task
    # extraction looks for its PrimFuncs.
    mod = session.compile(CompileOptions(stop_after=Stage.FUSE)).module
    with tempfile.TemporaryDirectory() as work_dir:
        # small batches so that the budget reaches every task (an untuned task stays naive)
        n_tasks = len(relax_integration.extract_tasks(mod, target))
        per_iter = max(2, min(16, trials // max(n_tasks, 1)))
        db = relax_integration.tune_relax(mod, None, target, work_dir, max_trials_global=trials,
                                          num_trials_per_iter=per_iter, builder=local_builder(),
                                          runner=make_runner())
        # compile_relax re-fuses an already fused module and then finds none of its records:
        # apply the database to the fused module and build it as the stock build does.
        with target, db:
            mod = MetaScheduleApplyDatabase()(mod)
        return tvm.compile(mod, target=target)


if __name__ == "__main__":
    main()
