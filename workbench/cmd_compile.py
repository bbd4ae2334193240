"""`workbench compile`: build, verify, time; write report.json, the library and charts."""

from __future__ import annotations

import sys
from pathlib import Path

from workbench.session_args import session_from_args


def register(sub, model_cmd) -> None:
    from workbench.cli import positive_int
    from workbench.cmd_tune import add_tune_arguments

    p = model_cmd("compile", "compile, verify against onnxruntime and time every kernel")
    p.add_argument("--target", default="llvm", choices=["llvm", "cuda"], help="code generation target")
    p.add_argument("--arch", help="target architecture: llvm -mcpu name or cuda sm_XX / tag")
    p.add_argument("--out", metavar="DIR", help="output folder (default: out/MODEL-TARGET)")
    p.add_argument("--runs", type=positive_int, default=20, help="timed runs after warm-up")
    p.add_argument("--rtol", type=float, default=1e-3, help="relative tolerance vs onnxruntime")
    p.add_argument("--atol", type=float, default=1e-4, help="absolute tolerance vs onnxruntime")
    p.add_argument("--no-export", action="store_true", help="skip exporting the library")
    p.add_argument("--plan", metavar="FILE", help="apply the approved decisions of this fusion plan "
                   "(from `workbench plan --out`)")
    p.add_argument("--approve", metavar="all|none|ID,..", help="approve these decisions (of --plan, "
                   "or of a fresh proposal when no --plan is given)")
    add_tune_arguments(p)
    p.set_defaults(run=compile_cmd)


def _progress(event) -> None:
    if event.status == "start":
        if sys.stderr.isatty():
            sys.stderr.write(f"[{event.stage.value:>10}] ...\r")
    else:
        sys.stderr.write(f"[{event.stage.value:>10}] {event.status} {event.seconds:6.2f}s  {event.message}\n")
    sys.stderr.flush()


def compile_cmd(args) -> int:
    from engine.pipeline import CompileOptions
    from engine.report import export_library, report_data, write_report
    from workbench.plots import timing_chart
    from workbench.cmd_tune import tune_hook

    session = session_from_args(args)
    applier = fusion_applier(session, args)
    options = CompileOptions(target=args.target, arch=args.arch, runs=args.runs, rtol=args.rtol,
                             atol=args.atol, seed=args.seed, apply_plan=applier,
                             tune=tune_hook(args, _progress, applier.plan if applier else None))
    out_dir = Path(args.out or f"out/{session.model.name}-{args.target}")
    result = session.compile(options, progress=_progress)
    data = report_data(result, session.graph)
    if applier is not None and applier.outcome is not None:
        data["fusion"] = fusion_report(applier)
    if options.tune is not None and options.tune.cotuned:
        data["cotuning"] = [r.to_json() for r in options.tune.cotuned]
    written = []
    if not args.no_export:
        written.append(export_library(result, out_dir))
    if result.kernel_times:
        written += timing_chart(result.kernel_times, f"{result.model} on {result.target}: per-kernel time",
                                out_dir / "timing")
    written.append(write_report(data, out_dir))  # last: its presence means the run finished
    print_report(data)
    print("wrote        " + ", ".join(str(p) for p in written))
    return 0


def print_report(data: dict) -> None:
    v = data["verification"]
    print(f"model        {data['model']}   target {data['target']}")
    print("stages       " + "  ".join(f"{s['name']} {s['seconds']:.2f}s" for s in data["stages"]
                                        if s["status"] == "done"))
    print(f"verify       {'OK' if v['passed'] else 'FAILED'}  max abs err {v['max_abs_err']:.2e}  "
          f"max rel err {v['max_rel_err']:.2e}  ({data['ran_on']})")
    print(f"kernels      {data['launches_per_inference']} launches per inference")
    if data["latency"]:
        lat, ort = data["latency"], data["onnxruntime_latency"]
        print(f"latency      {lat['median_ms']:.3f} ms median of {lat['runs']} "
              f"(min {lat['min_ms']:.3f}, p90 {lat['p90_ms']:.3f});  onnxruntime {ort['median_ms']:.3f} ms  "
              f"-> {data['ratio_vs_onnxruntime']:.2f}x onnxruntime")
    for note in data["notes"]:
        print(f"note         {note}")
    if data.get("fusion"):
        print_fusion(data["fusion"])
    if data["kernel_times"]:
        print(f"\n{'kernel':<48} {'calls':>5} {'total ms':>9} {'mean':>8} {'median':>8} {'min':>8} {'max':>8} {'share':>6}")
        for t in data["kernel_times"]:
            print(f"{t['name'][:48]:<48} {t['calls']:>5} {t['total_ms']:>9.3f} {t['mean_ms']:>8.3f} "
                  f"{t['median_ms']:>8.3f} {t['min_ms']:>8.3f} {t['max_ms']:>8.3f} {t['share'] * 100:>5.1f}%")


def fusion_applier(session, args):
    """A PlanApplier for --plan/--approve, or None (no fusion stage)."""
    if not getattr(args, "plan", None) and not getattr(args, "approve", None):
        return None
    from engine.parallel import load_plan, propose
    from engine.parallel.apply import PlanApplier

    if args.plan:
        plan = load_plan(args.plan)
    else:
        plan = propose(session, args.target, args.arch).plan
    if args.approve:
        plan = plan.with_approval(args.approve)
    return PlanApplier(plan)


def fusion_report(applier) -> dict:
    data = applier.outcome.to_json()
    titles = {d.id: (d.kind.value, d.title()) for d in applier.plan.decisions}
    for d in data["decisions"]:
        d["kind"], d["title"] = titles[d["id"]]
    return data


def print_fusion(f: dict) -> None:
    print(f"fusion       launches {f['launches_before']} -> {f['launches_after']} per inference;  "
          f"check: {f['verified']}")
    if f["unfused_latency_ms"] is not None:
        print(f"fusion       end to end, same run: unfused {f['unfused_latency_ms']:.3f} ms, "
              f"fused {f['fused_latency_ms']:.3f} ms "
              f"({f['unfused_latency_ms'] / f['fused_latency_ms']:.2f}x)")
    print(f"{'decision':<8} {'result':<12} {'kernels':>8} {'members ms':>11} {'fused ms':>9} {'speedup':>8}  members")
    for d in f["decisions"]:
        before, fused = d["members_sum_ms"], d["fused_ms"]
        times = (f"{before:>11.3f} {fused:>9.3f} {before / fused:>7.2f}x" if before and fused
                 else f"{'-':>11} {'-':>9} {'-':>8}")
        kernels = f"{d['kernels_before']}->{d['kernels_after']}" if d["result"] == "applied" else "-"
        print(f"{d['id']:<8} {d['result'][:12]:<12} {kernels:>8} {times}  {d['title'][:60]}")
        if d["reason"] and d["result"] != "applied":
            print(f"{'':<8} reason: {d['reason'][:150]}")
