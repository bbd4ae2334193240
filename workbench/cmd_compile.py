"""`workbench compile`: build, verify, time; write report.json, the library and charts."""

from __future__ import annotations

import sys
from pathlib import Path

from workbench.session_args import session_from_args


def register(sub, model_cmd) -> None:
    from workbench.cli import positive_int

    p = model_cmd("compile", "compile, verify against onnxruntime and time every kernel")
    p.add_argument("--target", default="llvm", choices=["llvm", "cuda"], help="code generation target")
    p.add_argument("--arch", help="target architecture: llvm -mcpu name or cuda sm_XX / tag")
    p.add_argument("--out", metavar="DIR", help="output folder (default: out/MODEL-TARGET)")
    p.add_argument("--runs", type=positive_int, default=20, help="timed runs after warm-up")
    p.add_argument("--rtol", type=float, default=1e-3, help="relative tolerance vs onnxruntime")
    p.add_argument("--atol", type=float, default=1e-4, help="absolute tolerance vs onnxruntime")
    p.add_argument("--no-export", action="store_true", help="skip exporting the library")
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

    session = session_from_args(args)
    options = CompileOptions(target=args.target, arch=args.arch, runs=args.runs, rtol=args.rtol,
                             atol=args.atol, seed=args.seed)
    out_dir = Path(args.out or f"out/{session.model.name}-{args.target}")
    result = session.compile(options, progress=_progress)
    data = report_data(result, session.graph)
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
    print(f"stages       " + "  ".join(f"{s['name']} {s['seconds']:.2f}s" for s in data["stages"]
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
    if data["kernel_times"]:
        print(f"\n{'kernel':<48} {'calls':>5} {'total ms':>9} {'mean':>8} {'median':>8} {'min':>8} {'max':>8} {'share':>6}")
        for t in data["kernel_times"]:
            print(f"{t['name'][:48]:<48} {t['calls']:>5} {t['total_ms']:>9.3f} {t['mean_ms']:>8.3f} "
                  f"{t['median_ms']:>8.3f} {t['min_ms']:>8.3f} {t['max_ms']:>8.3f} {t['share'] * 100:>5.1f}%")
