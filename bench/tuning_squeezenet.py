"""Tuned vs untuned (our default schedules) vs naive (unscheduled TVM) on one model, llvm.

    python bench/tuning_squeezenet.py [--model zoo:squeezenet] [--trials 128] [--rounds 15]

The tuned build reuses (or fills) .blockwise/tune/<model>-llvm. The three executables are
timed in the same process, interleaved round by round (the machine is shared: noisy), and
the script prints median-of-rounds and best-round latencies and the ratios.
"""

import argparse
import json
import statistics

import tvm
from tvm import relax

from engine.measure import time_runs
from engine.pipeline import CompileOptions, Stage
from engine.session import Session
from engine.tuning import KernelTuner, TuneOptions


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="zoo:squeezenet")
    ap.add_argument("--trials", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    s = Session(args.model)
    tuner = KernelTuner(TuneOptions(trials=args.trials))
    builds = {
        "untuned": s.compile(CompileOptions(timing=False)).executable,
        "tuned": s.compile(CompileOptions(timing=False, tune=tuner)).executable,
    }
    fused = s.compile(CompileOptions(stop_after=Stage.FUSE))
    builds["naive"] = tvm.compile(fused.module, target=tvm.target.Target(fused.target_detail))
    dev = tvm.cpu()
    inputs = s.model.random_inputs(0)
    args_ = [tvm.runtime.tensor(inputs[i.name], dev) for i in s.model.inputs]
    vms = {k: relax.VirtualMachine(ex, dev) for k, ex in builds.items()}
    samples = {k: [] for k in vms}
    for r in range(args.rounds):
        for k, vm in vms.items():
            if k == "naive" and r % 3:
                continue  # slow: every third round
            samples[k].append(time_runs(lambda: vm["main"](*args_), args.runs if k != "naive" else 2).median_ms)
    out = {k: {"median_ms": statistics.median(v), "best_ms": min(v), "rounds": len(v)} for k, v in samples.items()}
    out["tuned_vs_untuned"] = out["untuned"]["median_ms"] / out["tuned"]["median_ms"]
    out["tuned_vs_untuned_best"] = out["untuned"]["best_ms"] / out["tuned"]["best_ms"]
    out["tuned_vs_naive"] = out["naive"]["median_ms"] / out["tuned"]["median_ms"]
    out["measured_this_run"] = tuner.report.measured
    out["choices"] = [f"{r.name}: {r.choice.value}" for r in tuner.report.records if r.choice.value != "not tuned"]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
