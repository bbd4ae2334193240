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
from engine.tuning.cotune import Group, GroupConfig, compare_cotuning, time_kernel


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="sample_models/fire_module.onnx")
    ap.add_argument("--members", default="fused_conv2d1_add1_relu1,fused_conv2d2_add1_relu1")
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    mod = Session(args.model).compile(CompileOptions(stop_after=Stage.FUSE)).module
    names = args.members.split(",")
    target = get_target("llvm").target(None)
    group = Group([mod[n] for n in names], target, names)
    rep = compare_cotuning(group, args.trials, seed=args.seed, rounds=args.rounds)
    default_fused = time_kernel(group.fused(GroupConfig((0,) * len(names), group.default_layout())), target)
    default_members = sum(time_kernel(group.member(m, 0), target) for m in range(len(names)))
    print(json.dumps({
        "members": args.members.split(","), "trials_each_method": args.trials,
        "cotuned": {"knobs": rep.cotuned.knobs, "layout": rep.cotuned.config.layout.describe(),
                    "ms": rep.cotuned_s * 1e3, "trials": rep.cotuned.trials},
        "separate_then_fused": {"knobs": rep.separate.knobs, "layout": rep.separate.config.layout.describe(),
                                "ms": rep.separate_s * 1e3, "trials": rep.separate.trials},
        "speedup_cotuned_vs_separate": rep.speedup,
        "default_fused_ms": default_fused * 1e3, "default_members_sum_ms": default_members * 1e3,
    }, indent=1))


if __name__ == "__main__":
    main()
