"""Co-tuned fused parallel group vs separately tuned members fused, same trial budget, llvm.

    python bench/tuning_cotune.py [--model sample_models/fire_module.onnx]
                                  [--members fused_conv2d1_add1_relu1,fused_conv2d2_add1_relu1]
                                  [--trials 40] [--rounds 7]
"""

import argparse
import json

from engine.pipeline import CompileOptions, Stage
from engine.session import Session
from engine.targets import get_target
from engine.tuning.cotune import Group, compare_cotuning, time_kernel
from engine.tuning.hfuse import strip_preproc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="sample_models/fire_module.onnx")
    ap.add_argument("--members", default="fused_conv2d1_add1_relu1,fused_conv2d2_add1_relu1")
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    mod = Session(args.model).compile(CompileOptions(stop_after=Stage.FUSE)).module
    funcs = [mod[n] for n in args.members.split(",")]
    target = get_target("llvm").target(None)
    rep = compare_cotuning(funcs, target, args.trials, seed=args.seed, rounds=args.rounds)
    group = Group(funcs, target)
    default_fused = time_kernel(group.fused(group.natural(group.default_knobs())), target)
    default_members = sum(time_kernel(strip_preproc(v[0][1]), target) for v in group.variants)
    print(json.dumps({
        "members": args.members.split(","), "trials_each_method": args.trials,
        "cotuned": {"knobs": rep.cotuned.knobs, "chunks": rep.cotuned.config.chunks,
                    "ms": rep.cotuned_s * 1e3, "trials": rep.cotuned.trials},
        "separate_then_fused": {"knobs": rep.separate.knobs, "chunks": rep.separate.config.chunks,
                                "ms": rep.separate_s * 1e3, "trials": rep.separate.trials},
        "speedup_cotuned_vs_separate": rep.speedup,
        "default_fused_ms": default_fused * 1e3, "default_members_sum_ms": default_members * 1e3,
    }, indent=1))


if __name__ == "__main__":
    main()
