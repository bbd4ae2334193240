"""End-to-end comparison against the peers, measured side by side in one run.

    .venv/bin/python bench/compare.py --quick            # ~7 min on 2 cores
    .venv/bin/python bench/compare.py --models zoo:squeezenet --runs 30 --json out.json

Per model: onnxruntime (CPU EP, all cores), stock TVM (the same TVM version's default
llvm pipeline: `tvm.compile` of the imported module, which applies no schedule), and this
project with each optimisation on/off. Latency is the median of N runs after warm-up;
rounds of the three are interleaved so that load from other processes hits all of them.
Ratios are reported against each peer with geometric means.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from engine.cores import configure_runtime  # noqa: E402

THREADS = configure_runtime()  # before any kernel runs: every TVM peer gets the same pool

QUICK_MODELS = ["inception_block", "fire_module", "mha_block", "moe_block", "zoo:squeezenet",
                "zoo:inception_v1", "zoo:inception_v2", "zoo:resnet50", "zoo:shufflenet",
                "zoo:densenet121"]


VARIANT_ORDER = ["blockwise", "+parallel-fusion", "+block-fusion", "+both", "+cotuned"]


@dataclass
class Row:
    model: str
    latency_ms: dict[str, float | None] = field(default_factory=dict)
    spread_ms: dict[str, tuple[float, float] | None] = field(default_factory=dict)
    launches: dict[str, int | None] = field(default_factory=dict)
    compile_s: dict[str, float | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _variants(session, cotune_trials: int):
    """This project's configurations: name -> CompileOptions factory, or a reason it is absent.

    parallel-fusion: the plan's horizontal decisions; block-fusion: its block-level vertical
    ones; both: every decision (a vertical one overlapping an applied horizontal one is
    rejected by code generation and reported); cotuned: parallel fusion with every group
    co-tuned (`cotune_trials` per method; 0 leaves the variant out)."""
    from engine.parallel.plan import DecisionKind
    from engine.pipeline import CompileOptions
    from engine.tuning import TuneOptions

    variants: dict[str, object] = {"blockwise": lambda: CompileOptions(timing=False)}
    plan = session.propose("llvm").plan
    vertical = [d.id for d in plan.decisions if d.kind is DecisionKind.VERTICAL_BLOCK]
    horizontal = [d.id for d in plan.decisions if d.kind is not DecisionKind.VERTICAL_BLOCK]

    def with_plan(ids, cotune=0):
        approved = plan.with_approval(",".join(ids))
        tuning = TuneOptions(trials=0, cotune_trials=cotune) if cotune else None
        return lambda: CompileOptions(timing=False, plan=approved, tuning=tuning)

    variants["+parallel-fusion"] = with_plan(horizontal) if horizontal else "no parallel group proposed"
    variants["+block-fusion"] = with_plan(vertical) if vertical else "no one-to-one block map proposed"
    variants["+both"] = with_plan(horizontal + vertical) if horizontal and vertical else \
        "needs both kinds of decision"
    if cotune_trials:
        variants["+cotuned"] = with_plan(horizontal, cotune_trials) if horizontal else "no parallel group proposed"
    return variants


def _median_interleaved(fns: dict[str, object], runs: int, rounds: int = 5) -> dict[str, list[float]]:
    """Rounds of `runs // rounds` timed calls per configuration, interleaved; each turn
    starts with a pause and two untimed calls (the previous executable's pool settles)."""
    samples: dict[str, list[float]] = {k: [] for k in fns}
    per_round = max(1, runs // rounds)
    for _ in range(rounds):
        for name, fn in fns.items():
            time.sleep(0.05)
            fn()
            fn()
            for _ in range(per_round):
                start = time.perf_counter()
                fn()
                samples[name].append((time.perf_counter() - start) * 1e3)
    return samples


def bench_model(spec: str, runs: int, stock_runs: int, cotune_trials: int = 0) -> Row:
    import tvm
    from tvm import relax

    from engine.runtime.measure import onnxruntime_session
    from engine.relax_import import import_relax
    from engine.session import Session
    from engine.targets import get_target

    session = Session(spec)
    model, graph = session.model, session.graph
    row = Row(model.name)
    inputs = model.random_inputs(0)
    dev = tvm.cpu()
    args = [tvm.runtime.tensor(inputs[s.name], dev) for s in model.inputs]
    fns: dict[str, object] = {}

    t0 = time.perf_counter()
    sess = onnxruntime_session(model.proto.SerializeToString(), threads=THREADS)
    row.compile_s["onnxruntime"] = time.perf_counter() - t0
    # onnxruntime first, alone: an onnxruntime session alive in the process, even idle,
    # slowed TVM's 2-thread pool (squeezenet 2.54 -> 4.08 ms, back to 2.70 once freed),
    # and TVM's spinning pool slowed onnxruntime in shared rounds (2.3 -> 5.3-7.4 ms)
    time.sleep(1.0)
    samples = _median_interleaved({"onnxruntime": lambda: sess.run(None, inputs)}, runs)
    del sess

    for name, factory in _variants(session, cotune_trials).items():
        if isinstance(factory, str):
            row.notes.append(f"{name}: not measured ({factory})")
            row.latency_ms[name] = None
            continue
        t0 = time.perf_counter()
        try:
            result = session.compile(factory())
        except Exception as err:  # a failing variant is reported, the others still run
            row.notes.append(f"{name}: failed: {str(err).splitlines()[0][:160]}")
            row.latency_ms[name] = None
            continue
        row.compile_s[name] = time.perf_counter() - t0
        row.launches[name] = result.launches
        vm = relax.VirtualMachine(result.executable, dev)
        fns[name] = (lambda vm=vm: vm["main"](*args))

    # Stock TVM: the same version's default llvm pipeline on the imported module.
    t0 = time.perf_counter()
    target = get_target("llvm").target(None)
    stock = tvm.compile(import_relax(model, graph).mod, target=target)
    row.compile_s["stock-tvm"] = time.perf_counter() - t0
    stock_vm = relax.VirtualMachine(stock, dev)
    start = time.perf_counter()
    stock_vm["main"](*args)
    once = time.perf_counter() - start
    n_stock = max(1, min(stock_runs, int(20.0 / max(once, 1e-3))))  # stock is slow: cap at ~20 s

    gc.collect()  # the compiles' own onnxruntime sessions (verification) must be gone too
    samples.update(_median_interleaved(fns, runs))
    stock_samples = [once * 1e3]
    for _ in range(n_stock - 1):
        start = time.perf_counter()
        stock_vm["main"](*args)
        stock_samples.append((time.perf_counter() - start) * 1e3)
    samples["stock-tvm"] = stock_samples
    for name, ms in samples.items():
        row.latency_ms[name] = float(np.median(ms))
        row.spread_ms[name] = (float(np.percentile(ms, 10)), float(np.percentile(ms, 90)))
    return row


def _geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summarise(rows: list[Row]) -> dict:
    """Per variant of ours: geometric-mean latency ratio against each peer and against the
    plain `blockwise` build, over the models where both were measured (n given)."""
    ours = [k for k in VARIANT_ORDER if any(r.latency_ms.get(k) for r in rows)]
    ratios: dict[str, dict[str, dict]] = {}
    for variant in ours:
        for peer in ("onnxruntime", "stock-tvm", "blockwise") + (("+parallel-fusion",) if variant == "+cotuned" else ()):
            if peer == variant:
                continue
            values = [r.latency_ms[variant] / r.latency_ms[peer] for r in rows
                      if r.latency_ms.get(variant) and r.latency_ms.get(peer)]
            ratios.setdefault(variant, {})[peer] = {"geomean": _geomean(values), "models": len(values)}
    return ratios


def print_table(rows: list[Row], ratios: dict) -> None:
    peers = ["onnxruntime", "stock-tvm"]
    names = peers + [n for n in (rows[0].latency_ms if rows else {}) if n not in peers]
    present = set().union(*(r.latency_ms for r in rows)) if rows else set()
    names = [n for n in peers + VARIANT_ORDER if n in present]
    print(f"{'model':<16}" + "".join(f"{n:>23}" for n in names) + "  launches (base/par/blk/both)")
    for r in rows:
        cells = []
        for n in names:
            v = r.latency_ms.get(n)
            cells.append(f"{v:>11.3f} ms" + (f" ({v / r.latency_ms['onnxruntime']:.2f}x)" if v and n != 'onnxruntime' else " " * 8)
                         if v is not None else f"{'n/a':>23}")
        launches = "/".join(str(r.launches.get(k, "-")) for k in ("blockwise", "+parallel-fusion", "+block-fusion", "+both"))
        print(f"{r.model:<16}" + "".join(f"{c:>23}" for c in cells) + f"  {launches}")
    print("\nlatency ratio (lower is better), geometric mean over models:")
    for variant, by_peer in ratios.items():
        parts = ", ".join(f"vs {p}: {v['geomean']:.3f}x (n={v['models']})" for p, v in by_peer.items()
                          if v["geomean"])
        print(f"  {variant:<18} {parts}")
    for r in rows:
        for note in r.notes:
            print(f"  note [{r.model}] {note}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=None)
    ap.add_argument("--quick", action="store_true", help="every model, few runs")
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--json", default="bench/results/compare.json")
    ap.add_argument("--cotune-trials", type=int, default=None,
                    help="co-tune every group, N trials per method (default: 8 on the sample models only "
                         "in --quick, 8 everywhere otherwise; 0: off). The tuning store makes reruns fast.")
    args = ap.parse_args(argv)
    models = args.models or QUICK_MODELS
    runs = args.runs or (10 if args.quick else 30)
    stock_runs = 3 if args.quick else 10
    rows = []
    for spec in models:
        start = time.perf_counter()
        cotune = args.cotune_trials if args.cotune_trials is not None else (
            0 if args.quick and spec.startswith("zoo:") else 8)
        rows.append(bench_model(spec, runs, stock_runs, cotune))
        print(f"[{spec}] measured in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    ratios = summarise(rows)
    print_table(rows, ratios)
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M"), "runs": runs,
                               "machine": f"{THREADS} cores, llvm", "models": [r.__dict__ for r in rows],
                               "geomean_ratios": ratios}, indent=1))
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
