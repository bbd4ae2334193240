"""Co-tuned fused parallel groups vs their members tuned alone then fused, same budget, llvm.

    python bench/tuning_cotune.py [--models mha_block,moe_block,fire_module,inception_block]
                                  [--trials 24]

For every model, every proposed horizontal decision is approved and co-tuned the way
`workbench compile MODEL --approve all --cotune-trials N` does it (fresh store, so all is
measured): the joint search and the separately-tuned baseline get N trials each, then
both winners and the baseline's tiles with the co-tuned layout are re-measured side by
side. Prints one row per group and the geometric means.
"""

import argparse
import math
import tempfile

from engine.pipeline import CompileOptions
from engine.session import Session
from engine.tuning import TuneOptions


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="mha_block,moe_block,fire_module,inception_block")
    ap.add_argument("--trials", type=int, default=24)
    args = ap.parse_args()
    rows = []
    print(f"{'model':18} {'group':5} {'n':>2} {'separate ms':>11} {'co-tuned ms':>11} {'ratio':>6} "
          f"{'layout only':>11}  kept: layout, knobs")
    for spec in args.models.split(","):
        session = Session(spec)
        plan = session.propose("llvm").plan.with_approval("all")
        with tempfile.TemporaryDirectory() as db:
            tuning = TuneOptions(trials=0, cotune_trials=args.trials, db_root=db)
            result = session.compile(CompileOptions(plan=plan, tuning=tuning, timing=False))
        done = set()
        for r in result.cotuned:
            if r.members in done:  # overlapping decisions over the same kernels: one row
                continue
            done.add(r.members)
            rows.append(r)
            print(f"{session.model.name[:18]:18} {r.decision:5} {len(r.members):>2} {r.separate_ms:11.3f} "
                  f"{r.cotuned_ms:11.3f} {r.speedup:5.2f}x {r.layout_speedup:10.2f}x  "
                  f"{r.kept.value}: {r.layout.describe()}, {list(r.knobs)}",
                  flush=True)
    print(f"\n{len(rows)} groups, {args.trials} trials per method; co-tuned / separately tuned then fused: "
          f"geomean {geomean([r.speedup for r in rows]):.3f}x, faster in "
          f"{sum(r.speedup > 1.02 for r in rows)}, within 2% in {sum(abs(r.speedup - 1) <= 0.02 for r in rows)}, "
          f"slower in {sum(r.speedup < 0.98 for r in rows)}; the co-tuned layout alone: "
          f"geomean {geomean([r.layout_speedup for r in rows]):.3f}x")


if __name__ == "__main__":
    main()
