"""End-to-end comparison against the peers, measured side by side in one run.

    .venv/bin/python bench/compare.py --quick            # every model, 64-trial tuned pair
    .venv/bin/python bench/compare.py --models zoo:squeezenet --runs 30 --tune-trials 192

Per model, latency is the median of N samples after warm-up, a sample being the mean of
back-to-back calls filling MIN_SAMPLE_MS (one call for all but the small models); our
builds and the tuned TVM build are interleaved round by round so that load from other
processes hits all of them.

- onnxruntime (CPU EP, all cores), timed alone, in turns with our builds once they are all
  compiled (see _alternating).
- This project: plain `blockwise` (our default schedules) and each optimisation on top:
  the plan's parallel / block-level decisions, both, co-tuned, and `+auto` (what
  `--approve auto` does: every proposed decision tried, the measured winners kept).
- The tuned pair, on the `--tune-models`: TVM + MetaSchedule (`tune_relax` over every task,
  then the stock build; bench/stock_tvm.py) and `blockwise-tuned` (our tuner), each with the
  same `--tune-trials` in total, from fresh stores. A MetaSchedule run without valid
  schedules (no valid record, or build timeouts), or whose outputs differ from
  onnxruntime's, is not reported.
- `tvm-unscheduled`: `tvm.compile` of the imported module, no schedule at all. No TVM user
  ships it; it is printed last, labelled, and is in no geomean.

`--arch haswell` builds our variants as AVX2 code; add `--peer-isa avx2` on an AVX-512
machine and onnxruntime runs its AVX2 kernels too (bench/peer_isa.py): AVX2 against AVX2.

Every run writes its raw data (samples, medians, spreads, compile times, launches, tuning
facts, notes) with the date, CPU and versions to bench/results/compare-<UTC time>.json.
"""

from __future__ import annotations

import argparse
import gc
import math
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))

import numpy as np  # noqa: E402

from engine.cores import configure_runtime  # noqa: E402

THREADS = configure_runtime()  # before any kernel runs: every TVM build gets the same pool

import peer_isa  # noqa: E402
from run_record import RESULTS, write_raw  # noqa: E402

QUICK_MODELS = ["inception_block", "fire_module", "mha_block", "moe_block", "mobilenet_block", "bert_encoder",
                "zoo:squeezenet",
                "zoo:inception_v1", "zoo:inception_v2", "zoo:resnet50", "zoo:shufflenet",
                "zoo:densenet121"]
TUNE_MODELS = ["fire_module", "zoo:squeezenet"]
TUNE_TRIALS = 64

ORT = "onnxruntime"
BASE = "blockwise"
AUTO = "+auto"
VARIANT_ORDER = [BASE, "+parallel-fusion", "+block-fusion", "+both", "+cotuned", AUTO]
METASCHEDULE = "tvm-metaschedule"  # TVM + MetaSchedule, --tune-trials in all
TUNED = "blockwise-tuned"  # ours with the same budget
UNSCHEDULED = "tvm-unscheduled"  # a curiosity: no schedule at all
UNSCHEDULED_NOTE = (f"{UNSCHEDULED}: `tvm.compile` of the imported module, which applies no schedule "
                    "(naive loops, one thread). No TVM user ships it: shown for reference only, in no "
                    "geomean above.")


@dataclass
class Row:
    model: str
    latency_ms: dict[str, float | None] = field(default_factory=dict)  # median
    spread_ms: dict[str, tuple[float, float] | None] = field(default_factory=dict)  # p10, p90
    samples_ms: dict[str, list[float]] = field(default_factory=dict)
    launches: dict[str, int | None] = field(default_factory=dict)
    compile_s: dict[str, float | None] = field(default_factory=dict)
    tuning: dict[str, dict] = field(default_factory=dict)  # METASCHEDULE / TUNED -> what the tuning did
    notes: list[str] = field(default_factory=list)


# --- measuring ------------------------------------------------------------------------------

def _variants(session, cotune_trials: int, arch: str | None = None):
    """This project's untuned configurations: name -> CompileOptions factory, or the reason
    it is absent.

    parallel-fusion: the plan's horizontal decisions; block-fusion: its block-level vertical
    ones; both: every decision (a vertical one overlapping an applied horizontal one is
    rejected by code generation and reported); cotuned: parallel fusion with every group
    co-tuned (`cotune_trials` per method; 0 leaves the variant out); +auto: every proposed
    decision tried, only the measured winners kept (`--approve auto`)."""
    from engine.events import CompileOptions, FusionPolicy
    from engine.parallel.plan import DecisionStatus
    from engine.tuning import TuneOptions

    variants: dict[str, object] = {BASE: lambda: CompileOptions(timing=False, arch=arch)}
    # proposed for the kernels the variants build: with `--arch` another ISA's schedules
    # (AVX2 code runs the depthwise conv on a repacked input, AVX-512 code by planes), whose
    # pairs the host's plan does not name
    plan = session.propose("llvm", arch=arch).plan
    open_ = [d for d in plan.decisions if d.status is not DecisionStatus.REJECTED]  # the others cannot be approved
    vertical = [d.id for d in open_ if d.kind.vertical]
    horizontal = [d.id for d in open_ if not d.kind.vertical]

    def with_plan(ids, cotune=0):
        approved = plan.with_approval(",".join(ids))
        tuning = TuneOptions(trials=0, cotune_trials=cotune) if cotune else None
        return lambda: CompileOptions(timing=False, arch=arch, plan=approved, tuning=tuning)

    variants["+parallel-fusion"] = with_plan(horizontal) if horizontal else "no parallel group proposed"
    variants["+block-fusion"] = with_plan(vertical) if vertical else "no one-to-one block map proposed"
    variants["+both"] = with_plan(horizontal + vertical) if horizontal and vertical else \
        "needs both kinds of decision"
    if cotune_trials:
        variants["+cotuned"] = with_plan(horizontal, cotune_trials) if horizontal else "no parallel group proposed"
    variants[AUTO] = lambda: CompileOptions(timing=False, arch=arch, plan=plan,
                                            fusion_policy=FusionPolicy.MEASURED_WINNERS)
    return variants


# A sample is the mean of back-to-back calls lasting at least this long: a 0.1 ms model's
# single calls, each after a pause, measured the thread pools waking up (inception_block
# 0.188 ms in a 10-run table, 0.097-0.119 ms over 200 calls) more than the kernels.
MIN_SAMPLE_MS = 2.0


def _calls_per_sample(fn) -> int:
    start = time.perf_counter()
    fn()
    once = (time.perf_counter() - start) * 1e3
    return max(1, min(1000, math.ceil(MIN_SAMPLE_MS / max(once, 1e-3))))


def _median_interleaved(fns: dict[str, object], runs: int, rounds: int = 5) -> dict[str, list[float]]:
    """Rounds of `runs // rounds` samples per configuration, interleaved; each turn starts
    with a pause and two untimed calls (the previous executable's pool settles). A sample
    is the mean time of as many back-to-back calls as fill MIN_SAMPLE_MS (one call for
    models slower than that), counted once per configuration before the rounds."""
    samples: dict[str, list[float]] = {k: [] for k in fns}
    per_round = max(1, -(-runs // rounds))
    calls = {}
    for name, fn in fns.items():
        fn()
        fn()
        calls[name] = _calls_per_sample(fn)
    for _ in range(rounds):
        for name, fn in fns.items():
            time.sleep(0.05)
            fn()
            fn()
            for _ in range(per_round):
                start = time.perf_counter()
                for _ in range(calls[name]):
                    fn()
                samples[name].append((time.perf_counter() - start) * 1e3 / calls[name])
    return samples


# onnxruntime and our builds are timed in turns, the last turns right after every build is
# compiled: this VM has slow periods of minutes (our kernels 1.5-2.5x slower, onnxruntime
# ~1.2x), and timing onnxruntime before minutes of compiles put the two sides of one ratio
# in different periods (squeezenet 1.02x in one run, 1.60x in another). Two turns were too
# few: in `compare-20261205-0636.json` a slow period covered our turns of resnet50 but not
# onnxruntime's (our samples 20.1-27.0 ms, 19.6-20.4 ms in the runs before; onnxruntime's
# 18.9-19.5 ms), so its ratio read 1.25x. Five turns, each a share of the samples.
TURNS = 5
# Pause after an onnxruntime session is created and after it is freed (its threads settle).
SETTLE_S = 0.5


def _alternating(model, inputs: dict, fns: dict[str, object], runs: int) -> dict[str, list[float]]:
    """`TURNS` turns of onnxruntime alone, then our builds interleaved, each with its share
    of `runs`. onnxruntime's session lives only during its turn: one alive in the process,
    even idle, slowed TVM's 2-thread pool (squeezenet 2.54 -> 4.08 ms, back to 2.70 once
    freed), and TVM's spinning pool slowed onnxruntime in shared rounds (2.3 -> 5.3-7.4 ms)."""
    from engine.runtime.measure import onnxruntime_session

    samples: dict[str, list[float]] = {ORT: [], **{k: [] for k in fns}}
    share = max(1, -(-runs // TURNS))
    # one sample per configuration per round: a slow period starting mid-turn then falls on
    # all our builds alike (with 8 samples each in a row, squeezenet's block fusion got 15 of
    # its 32 samples in one and plain blockwise 8: 1.00x, where both periods said 0.84-0.94x)
    rounds = share
    for _ in range(TURNS):
        sess = onnxruntime_session(model.proto.SerializeToString(), threads=THREADS)
        time.sleep(SETTLE_S)
        samples[ORT] += _median_interleaved({ORT: lambda: sess.run(None, inputs)}, share, rounds)[ORT]
        del sess
        gc.collect()
        time.sleep(SETTLE_S)
        for name, ms in _median_interleaved(fns, share, rounds).items():
            samples[name] += ms
    return samples


def _one_line(err: Exception) -> str:
    lines = [ln for ln in str(err).splitlines() if ln.strip()]
    return (lines[0] if lines else type(err).__name__)[:160]


def _output_error(ret, reference: list, rtol: float = 1e-3, atol: float = 1e-4) -> str:
    """"" when a TVM build's outputs match onnxruntime's, else what differs."""
    outs = [ret.numpy()] if hasattr(ret, "numpy") else [o.numpy() for o in ret]
    if len(outs) != len(reference):
        return f"{len(outs)} outputs, onnxruntime gives {len(reference)}"
    for i, (got, want) in enumerate(zip(outs, reference)):
        if got.shape != want.shape or not np.allclose(got, want, rtol=rtol, atol=atol):
            err = float(np.max(np.abs(got - want))) if got.shape == want.shape else float("nan")
            return f"output {i} differs from onnxruntime's (max abs error {err:.3g})"
    return ""


def bench_model(spec: str, runs: int, unscheduled_runs: int, cotune_trials: int = 0,
                tune_trials: int = 0, arch: str | None = None, peer_arch: str | None = None) -> Row:
    import tvm
    from tvm import relax

    import stock_tvm
    from engine.events import CompileOptions
    from engine.runtime.measure import onnxruntime_session
    from engine.session import Session
    from engine.targets import get_target
    from engine.tuning import TuneOptions

    session = Session(spec)
    model = session.model
    row = Row(model.name)
    inputs = model.random_inputs(0)
    dev = tvm.cpu()
    args = [tvm.runtime.tensor(inputs[s.name], dev) for s in model.inputs]
    target = get_target("llvm").target(peer_arch)  # the MetaSchedule peer's
    fns: dict[str, object] = {}

    def timed(name: str, executable) -> None:
        vm = relax.VirtualMachine(executable, dev)
        fns[name] = (lambda vm=vm: vm["main"](*args))

    t0 = time.perf_counter()
    sess = onnxruntime_session(model.proto.SerializeToString(), threads=THREADS)
    row.compile_s[ORT] = time.perf_counter() - t0
    reference = sess.run(None, inputs)  # TVM's builds are checked against it (ours verify themselves)
    del sess

    for name, factory in _variants(session, cotune_trials, arch).items():
        if isinstance(factory, str):
            row.notes.append(f"{name}: not measured ({factory})")
            row.latency_ms[name] = None
            continue
        t0 = time.perf_counter()
        try:
            result = session.compile(factory())
        except Exception as err:  # a failing variant is reported, the others still run
            row.notes.append(f"{name}: failed: {_one_line(err)}")
            row.latency_ms[name] = None
            continue
        row.compile_s[name] = time.perf_counter() - t0
        row.launches[name] = result.launches
        if name == AUTO and result.fusion is not None:
            row.notes.append(f"{AUTO}: kept {result.fusion.applied()} of {len(result.fusion.decisions)} "
                             f"proposed decisions")
        timed(name, result.executable)

    if tune_trials:
        # Ours: the same total budget, a fresh store (nothing reused from earlier runs).
        with tempfile.TemporaryDirectory(prefix="bw-tune-") as store:
            t0 = time.perf_counter()
            try:
                tuning = TuneOptions(trials=tune_trials, db_root=store)
                result = session.compile(CompileOptions(timing=False, arch=arch, tuning=tuning))
            except Exception as err:
                row.notes.append(f"{TUNED}: failed: {_one_line(err)}")
                row.latency_ms[TUNED] = None
            else:
                row.compile_s[TUNED] = time.perf_counter() - t0
                row.launches[TUNED] = result.launches
                report = result.tuning
                row.tuning[TUNED] = {"trials": tune_trials, "measured": report.measured,
                                     "kernels": len(report.records),
                                     "choices": {r.name: r.choice.value for r in report.records}}
                timed(TUNED, result.executable)
        t0 = time.perf_counter()
        try:
            executable, run = stock_tvm.build_metaschedule(session, target, tune_trials)
        except Exception as err:
            row.notes.append(f"{METASCHEDULE}: failed: {_one_line(err)}")
            row.latency_ms[METASCHEDULE] = None
        else:
            row.compile_s[METASCHEDULE] = time.perf_counter() - t0
            row.tuning[METASCHEDULE] = run.as_dict()
            if run.problem:
                row.notes.append(f"{METASCHEDULE}: not reported: {run.problem}")
                row.latency_ms[METASCHEDULE] = None
            elif (wrong := _output_error(relax.VirtualMachine(executable, dev)["main"](*args), reference)):
                row.notes.append(f"{METASCHEDULE}: not reported: {wrong}")
                row.latency_ms[METASCHEDULE] = None
            else:
                if run.tasks_scheduled < run.tasks:
                    row.notes.append(f"{METASCHEDULE}: {run.tasks - run.tasks_scheduled} of {run.tasks} "
                                     f"tasks got no valid schedule in {tune_trials} trials (left unscheduled)")
                row.launches[METASCHEDULE] = None  # TVM's fusion: not listed by our kernel tracer
                timed(METASCHEDULE, executable)

    unscheduled_vm = None
    if unscheduled_runs:
        t0 = time.perf_counter()
        unscheduled_vm = relax.VirtualMachine(stock_tvm.build_unscheduled(model, session.graph, target), dev)
        row.compile_s[UNSCHEDULED] = time.perf_counter() - t0
        wrong = _output_error(unscheduled_vm["main"](*args), reference)
        if wrong:
            row.notes.append(f"{UNSCHEDULED}: not reported: {wrong}")
            unscheduled_vm = None

    gc.collect()  # the compiles' own onnxruntime sessions (verification) must be gone too
    samples = _alternating(model, inputs, fns, runs)
    if unscheduled_vm is not None:  # slow (no schedule): alone, capped at ~20 s
        start = time.perf_counter()
        unscheduled_vm["main"](*args)
        once = time.perf_counter() - start
        slow = [once * 1e3]
        for _ in range(max(1, min(unscheduled_runs, int(20.0 / max(once, 1e-3)))) - 1):
            start = time.perf_counter()
            unscheduled_vm["main"](*args)
            slow.append((time.perf_counter() - start) * 1e3)
        samples[UNSCHEDULED] = slow
    for name, ms in samples.items():
        row.samples_ms[name] = [round(v, 5) for v in ms]
        row.latency_ms[name] = float(np.median(ms))
        row.spread_ms[name] = (float(np.percentile(ms, 10)), float(np.percentile(ms, 90)))
    return row


# --- summaries (pure: tests/test_bench_compare.py) -------------------------------------------

def _geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _ratio_geomean(rows: list[Row], mine: str, peer: str) -> dict:
    values = [r.latency_ms[mine] / r.latency_ms[peer] for r in rows
              if r.latency_ms.get(mine) and r.latency_ms.get(peer)]
    return {"geomean": _geomean(values), "models": len(values)}


def slower_beyond_noise(row: Row, mine: str, base: str) -> bool:
    """`mine` is slower than `base` beyond the noise: each median lies outside the other's
    p10-p90 range (overlapping ranges: the difference is noise)."""
    a, b = row.latency_ms.get(mine), row.latency_ms.get(base)
    sa, sb = row.spread_ms.get(mine), row.spread_ms.get(base)
    if not a or not b or a <= b:
        return False
    if not sa or not sb:
        return True
    return a > sb[1] and b < sa[0]


def summarise(rows: list[Row]) -> dict:
    """Geometric-mean latency ratios (lower is better) over the models where both were
    measured (n given):

    headline: each of our untuned variants against onnxruntime and against plain blockwise
        (+cotuned also against +parallel-fusion);
    tuned: blockwise-tuned against TVM + MetaSchedule with the same trials, per model too;
    auto: +auto against blockwise per model, with whether it is slower beyond the noise;
    curiosity: blockwise against tvm-unscheduled, kept apart from the rest."""
    headline: dict[str, dict] = {}
    for variant in (v for v in VARIANT_ORDER if any(r.latency_ms.get(v) for r in rows)):
        peers = [ORT] + ([BASE] if variant != BASE else []) + (["+parallel-fusion"] if variant == "+cotuned" else [])
        headline[variant] = {peer: _ratio_geomean(rows, variant, peer) for peer in peers}
    tuned = {"ratio": f"{TUNED} / {METASCHEDULE}", **_ratio_geomean(rows, TUNED, METASCHEDULE),
             "per_model": {r.model: r.latency_ms[TUNED] / r.latency_ms[METASCHEDULE] for r in rows
                           if r.latency_ms.get(TUNED) and r.latency_ms.get(METASCHEDULE)}}
    per_model = {r.model: {"ratio": r.latency_ms[AUTO] / r.latency_ms[BASE],
                           "slower_beyond_noise": slower_beyond_noise(r, AUTO, BASE)}
                 for r in rows if r.latency_ms.get(AUTO) and r.latency_ms.get(BASE)}
    auto = {"ratio": f"{AUTO} / {BASE}", **_ratio_geomean(rows, AUTO, BASE), "per_model": per_model,
            "slower_beyond_noise": [m for m, v in per_model.items() if v["slower_beyond_noise"]]}
    curiosity = {"ratio": f"{BASE} / {UNSCHEDULED}", **_ratio_geomean(rows, BASE, UNSCHEDULED),
                 "note": UNSCHEDULED_NOTE}
    return {"headline": headline, "tuned": tuned, "auto": auto, "curiosity": curiosity}


def _cell(v: float | None, ref: float | None, width: int = 23) -> str:
    if v is None:
        return f"{'n/a':>{width}}"
    text = f"{v:.3f} ms" + (f" ({v / ref:.2f}x)" if ref else "")
    return f"{text:>{width}}"


def print_table(rows: list[Row], summary: dict, out=None) -> None:
    out = out or sys.stdout

    def say(line: str = "") -> None:
        print(line, file=out)

    present = set().union(*(r.latency_ms for r in rows)) if rows else set()
    names = [n for n in [ORT] + VARIANT_ORDER if n in present]
    say(f"{'model':<16}" + "".join(f"{n:>23}" for n in names) + "  launches (base/par/blk/both/auto)")
    for r in rows:
        cells = [_cell(r.latency_ms.get(n), r.latency_ms.get(ORT) if n != ORT else None) for n in names]
        launches = "/".join(str(r.launches.get(k, "-")) for k in (BASE, "+parallel-fusion", "+block-fusion",
                                                                  "+both", AUTO))
        say(f"{r.model:<16}" + "".join(cells) + f"  {launches}")
    say("(x: latency / onnxruntime's)")
    say("\nlatency ratio (lower is better), geometric mean over models:")
    for variant, by_peer in summary["headline"].items():
        parts = ", ".join(f"vs {p}: {v['geomean']:.3f}x (n={v['models']})" for p, v in by_peer.items()
                          if v["geomean"])
        say(f"  {variant:<18} {parts}")

    tuned_rows = [r for r in rows if METASCHEDULE in r.tuning or TUNED in r.tuning
                  or METASCHEDULE in r.latency_ms or TUNED in r.latency_ms]
    if tuned_rows:
        say("\ntuned with the same trial budget, fresh stores: TVM + MetaSchedule vs ours")
        say(f"{'model':<16}{'trials':>7}{METASCHEDULE:>18}{TUNED:>18}{'ours/MS':>9}{'compile s MS/ours':>19}"
            f"{'MS tasks tuned':>16}{'MS valid rec.':>15}{'measured MS/ours':>18}")
        for r in tuned_rows:
            ms_info, ours_info = r.tuning.get(METASCHEDULE, {}), r.tuning.get(TUNED, {})
            ms_v, ours_v = r.latency_ms.get(METASCHEDULE), r.latency_ms.get(TUNED)
            ratio = f"{ours_v / ms_v:.3f}x" if ms_v and ours_v else "n/a"
            tune_s = "/".join(f"{r.compile_s[k]:.0f}" if r.compile_s.get(k) else "-" for k in (METASCHEDULE, TUNED))
            tasks = f"{ms_info['tasks_scheduled']}/{ms_info['tasks']}" if ms_info else "-"
            records = f"{ms_info['valid_records']}/{ms_info['records']}" if ms_info else "-"
            trials = ms_info.get("trials") or ours_info.get("trials") or "-"
            measured = f"{ms_info.get('measured', '-')}/{ours_info.get('measured', '-')}"
            say(f"{r.model:<16}{trials:>7}{_cell(ms_v, None, 18)}{_cell(ours_v, None, 18)}{ratio:>9}{tune_s:>19}"
                f"{tasks:>16}{records:>15}{measured:>18}")
        say("  (measured: candidates sent to the runner; ours adds its default schedules and knob points "
            "to the trials)")
        t = summary["tuned"]
        if t["geomean"]:
            say(f"  geomean {t['ratio']}: {t['geomean']:.3f}x (n={t['models']})")

    a = summary["auto"]
    if a["per_model"]:
        say(f"\n{AUTO} (--approve auto: every proposed decision tried, measured winners kept) vs plain {BASE}:")
        for model, v in a["per_model"].items():
            flag = "  SLOWER beyond noise" if v["slower_beyond_noise"] else ""
            say(f"  {model:<16} {v['ratio']:.3f}x{flag}")
        say(f"  geomean {a['ratio']}: {a['geomean']:.3f}x (n={a['models']}); slower beyond noise on "
            f"{len(a['slower_beyond_noise'])} model(s){': ' + ', '.join(a['slower_beyond_noise']) if a['slower_beyond_noise'] else ''}")

    curious = [r for r in rows if r.latency_ms.get(UNSCHEDULED)]
    if curious:
        say(f"\nnote: {UNSCHEDULED_NOTE}")
        for r in curious:
            base = r.latency_ms.get(BASE)
            say(f"  {r.model:<16} {r.latency_ms[UNSCHEDULED]:.3f} ms"
                + (f"  ({BASE} / {UNSCHEDULED}: {base / r.latency_ms[UNSCHEDULED]:.4f}x)" if base else ""))
    for r in rows:
        for note in r.notes:
            say(f"  note [{r.model}] {note}")


def write_results(rows: list[Row], summary: dict, settings: dict, also: str | None = None,
                  results: Path = RESULTS, now: float | None = None) -> list[Path]:
    """The run's raw data and summary, with date, CPU and versions (run_record)."""
    payload = {"settings": settings, "models": [asdict(r) for r in rows], "summary": summary}
    return write_raw("compare", payload, THREADS, also=also, results=results, now=now)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=None)
    ap.add_argument("--quick", action="store_true", help="every model, few runs")
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--json", default=None, help="also write the raw JSON here (it always goes to bench/results/)")
    ap.add_argument("--cotune-trials", type=int, default=None,
                    help="co-tune every group, N trials per method (default: 8 on the sample models only "
                         "in --quick, 8 everywhere otherwise; 0: off). The tuning store makes reruns fast.")
    ap.add_argument("--tune-trials", type=int, default=TUNE_TRIALS,
                    help=f"trials in all for TVM + MetaSchedule and for ours, each (default {TUNE_TRIALS}; 0: "
                         "no tuned pair)")
    ap.add_argument("--tune-models", nargs="*", default=TUNE_MODELS,
                    help=f"the models that get the tuned pair (default: {' '.join(TUNE_MODELS)})")
    ap.add_argument("--arch", default=None,
                    help="build our variants for this llvm -mcpu (e.g. haswell: AVX2 code on an AVX-512 "
                         "machine); the peers stay native, so only our side's ratios change")
    ap.add_argument("--peer-isa", choices=peer_isa.CHOICES, default="native",
                    help="avx2: onnxruntime runs its AVX2 kernels (CPUID hides AVX-512 from the process: "
                         "bench/peer_isa.py; Linux, CPUs with CPUID faulting) and the MetaSchedule peer builds "
                         "for --arch; with --arch haswell an AVX2-to-AVX2 comparison on an AVX-512 machine")
    ap.add_argument("--unscheduled-runs", type=int, default=None,
                    help="runs of the unscheduled TVM build (default 3 in --quick, else 10; 0: skip it)")
    args = ap.parse_args(argv)
    if args.peer_isa != "native" and args.arch is None:
        print(f"--peer-isa {args.peer_isa} compares with our code for that ISA: add --arch (e.g. haswell)",
              file=sys.stderr)
        return 2
    try:
        peer_isa.ensure(args.peer_isa, [str(Path(__file__).resolve()), *(sys.argv[1:] if argv is None else argv)])
    except peer_isa.PeerIsaError as err:
        print(err, file=sys.stderr)
        return 2
    models = args.models or QUICK_MODELS
    runs = args.runs or (10 if args.quick else 30)
    unscheduled_runs = args.unscheduled_runs if args.unscheduled_runs is not None else (3 if args.quick else 10)
    absent = [m for m in args.tune_models if m not in models] if args.tune_trials else []
    if absent:
        print(f"--tune-models not among --models (no tuned pair): {', '.join(absent)}", file=sys.stderr)
    started = time.time()
    rows = []
    for spec in models:
        start = time.perf_counter()
        cotune = args.cotune_trials if args.cotune_trials is not None else (
            0 if args.quick and spec.startswith("zoo:") else 8)
        trials = args.tune_trials if spec in args.tune_models else 0
        rows.append(bench_model(spec, runs, unscheduled_runs, cotune, trials, args.arch,
                                args.arch if args.peer_isa != "native" else None))
        print(f"[{spec}] measured in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    summary = summarise(rows)
    print_table(rows, summary)
    command = " ".join(["bench/compare.py", *(sys.argv[1:] if argv is None else argv)])
    if args.peer_isa != "native":
        print(f"peers: onnxruntime ran its {args.peer_isa} kernels (CPUID hid AVX-512 from this process), "
              f"MetaSchedule built for --arch {args.arch}")
    settings = {"command": command, "runs": runs, "unscheduled_runs": unscheduled_runs, "arch": args.arch,
                "peer_isa": args.peer_isa,
                "tune_trials": args.tune_trials, "tune_models": args.tune_models,
                "wall_s": round(time.time() - started, 1)}
    for path in write_results(rows, summary, settings, also=args.json):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
