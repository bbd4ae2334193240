"""Tuned vs untuned (our default schedules) vs TVM + MetaSchedule with the same trial budget,
on one model, llvm.

    .venv/bin/python bench/tuning_squeezenet.py [--model zoo:squeezenet] [--trials 192] [--rounds 15]
                                                [--no-stock-tuning] [--fresh]

The tuned build reuses (or fills) .blockwise/tune/<model>-llvm (`--fresh`: a new store).
TVM + MetaSchedule is TVM's own flow (bench/stock_tvm.py): `tune_relax` over all tasks of
the fused module with the same global trial budget, from a fresh work dir, then
`MetaScheduleApplyDatabase` and the stock build; a run without valid schedules is not
reported. `tvm-unscheduled` (the stock build with no schedule at all) is kept as a
labelled curiosity. Every build runs on the same multi-thread runtime (configure_runtime
below, before any kernel runs; the JSON records the pool size each build saw). The
executables are timed in the same process, interleaved round by round; the script prints
median-of-rounds and best-round latencies and the ratios, and writes the raw data with
the date and machine to bench/results/tuning-<model>-<UTC time>.json.
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine.cores import configure_runtime  # noqa: E402

THREADS = configure_runtime()  # before any kernel runs: MetaSchedule's build and ours get the same pool

import tvm  # noqa: E402
from tvm import relax  # noqa: E402

from engine.events import CompileOptions  # noqa: E402
from engine.runtime.measure import time_runs  # noqa: E402
from engine.session import Session  # noqa: E402
from engine.targets import get_target  # noqa: E402
from engine.tuning import Choice, TuneOptions  # noqa: E402

import stock_tvm  # noqa: E402
from run_record import write_raw  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="zoo:squeezenet")
    ap.add_argument("--trials", type=int, default=192)
    ap.add_argument("--no-stock-tuning", action="store_true", help="skip tuning stock TVM (minutes)")
    ap.add_argument("--fresh", action="store_true", help="tune ours into a fresh store (no reuse)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--json", default=None, help="also write the raw JSON here (it always goes to bench/results/)")
    args = ap.parse_args()
    s = Session(args.model)
    target = get_target("llvm").target(None)
    compile_s = {}
    with tempfile.TemporaryDirectory(prefix="bw-tune-") as fresh:
        start = time.perf_counter()
        tuned = s.compile(CompileOptions(timing=False, tuning=TuneOptions(
            trials=args.trials, db_root=fresh if args.fresh else None)))
        compile_s["tuned"] = time.perf_counter() - start
    builds = {"untuned": s.compile(CompileOptions(timing=False)).executable, "tuned": tuned.executable}
    builds["tvm-unscheduled"] = stock_tvm.build_unscheduled(s.model, s.graph, target)
    metaschedule = None
    if not args.no_stock_tuning:
        start = time.perf_counter()
        executable, metaschedule = stock_tvm.build_metaschedule(s, target, args.trials)
        compile_s["tvm-metaschedule"] = time.perf_counter() - start
        if metaschedule.problem:
            print(f"tvm-metaschedule not reported: {metaschedule.problem}", file=sys.stderr)
        else:
            builds["tvm-metaschedule"] = executable
    dev = tvm.cpu()
    inputs = s.model.random_inputs(0)
    args_ = [tvm.runtime.tensor(inputs[i.name], dev) for i in s.model.inputs]
    vms = {k: relax.VirtualMachine(ex, dev) for k, ex in builds.items()}
    samples = {k: [] for k in vms}
    for r in range(args.rounds):
        for k, vm in vms.items():
            if k == "tvm-unscheduled" and r % 3:
                continue  # slow: every third round
            runs = 2 if k == "tvm-unscheduled" else args.runs
            samples[k].append(time_runs(lambda vm=vm: vm["main"](*args_), runs).median_ms)
    pool = tvm.get_global_func("runtime.NumThreads")()  # the pool every build above ran on
    out = {k: {"median_ms": statistics.median(v), "best_ms": min(v), "rounds": len(v), "round_medians_ms": v}
           for k, v in samples.items()}
    out["tuned_vs_untuned"] = out["untuned"]["median_ms"] / out["tuned"]["median_ms"]
    out["tuned_vs_untuned_best"] = out["untuned"]["best_ms"] / out["tuned"]["best_ms"]
    out["tuned_vs_unscheduled"] = out["tvm-unscheduled"]["median_ms"] / out["tuned"]["median_ms"]
    if "tvm-metaschedule" in out:
        out["tuned_vs_metaschedule"] = out["tvm-metaschedule"]["median_ms"] / out["tuned"]["median_ms"]
    out["metaschedule"] = metaschedule.as_dict() if metaschedule else None
    out["compile_s"] = compile_s
    out["runtime_threads"] = pool
    out["measured_this_run"] = tuned.tuning.measured
    out["choices"] = [f"{r.name}: {r.choice.value}" for r in tuned.tuning.records if r.choice is not Choice.NOT_TUNED]
    print(json.dumps(out, indent=1))
    if pool != THREADS:
        print(f"warning: the runtime pool has {pool} threads, configure_runtime asked for {THREADS}", file=sys.stderr)
    settings = {"command": " ".join(["bench/tuning_squeezenet.py", *sys.argv[1:]]), "model": args.model,
                "trials": args.trials, "rounds": args.rounds, "runs": args.runs, "fresh_store": args.fresh}
    name = args.model.split(":")[-1]
    for path in write_raw(f"tuning-{name}", {"settings": settings, "results": out}, THREADS, also=args.json):
        print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
