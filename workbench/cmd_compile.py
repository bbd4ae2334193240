"""`workbench compile`: build, verify, time; write report.json, the library and charts."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from engine.events import CompileOptions, FusionPolicy, StageEvent, StageStatus
from workbench.args import add_target_arguments, positive_int, session_from_args
from workbench.cmd_tune import add_tune_arguments, tune_options
from workbench.outdir import claim_out_dir
from workbench.plots import timing_chart
from workbench.present.report import report_json, report_lines, write_report
from workbench.present.timing import chart_rows

if TYPE_CHECKING:
    from engine.parallel.plan import FusionPlan
    from engine.pipeline import CompileResult
    from engine.session import Session


def register(sub, model_cmd) -> None:
    p = model_cmd("compile", "compile, verify against onnxruntime and time every kernel")
    add_target_arguments(p)
    p.add_argument("--out", metavar="DIR", help="output folder (default: out/MODEL-TARGET)")
    p.add_argument("--runs", type=positive_int, default=20, help="timed runs after warm-up")
    p.add_argument("--rtol", type=float, default=1e-3, help="relative tolerance vs onnxruntime")
    p.add_argument("--atol", type=float, default=1e-4, help="absolute tolerance vs onnxruntime")
    p.add_argument("--no-export", action="store_true", help="skip exporting the library")
    p.add_argument("--plan", metavar="FILE", help="apply the approved decisions of this fusion plan "
                   "(from `workbench plan --out`)")
    p.add_argument("--approve", metavar="auto|all|none|ID,..", help="approve these decisions (of --plan, "
                   "or of a fresh proposal when no --plan is given); auto: try every proposed decision "
                   "and keep those measured faster than their members on this machine")
    add_tune_arguments(p)
    p.set_defaults(run=compile_cmd)


def _progress(event: StageEvent) -> None:
    if event.status is StageStatus.START:
        if sys.stderr.isatty():
            sys.stderr.write(f"[{event.stage.value:>10}] ...\r")
    else:
        sys.stderr.write(f"[{event.stage.value:>10}] {event.status.value} {event.seconds:6.2f}s  {event.message}\n")
    sys.stderr.flush()


def compile_cmd(args) -> int:
    tuning = tune_options(args)  # bad flag combinations fail before any work
    session = session_from_args(args)
    name = session.model.name  # a model or --inputs that cannot be read fails before the folder is made
    out_dir = claim_out_dir(args.out or f"out/{name}-{args.target}")  # before any other work
    plan, policy = None, FusionPolicy.APPROVED
    if args.plan or args.approve:  # --plan (validated against the model) or a fresh proposal
        auto = args.approve == FusionPolicy.MEASURED_WINNERS.value
        plan = session.plan(args.target, args.arch, path=args.plan, approve=None if auto else args.approve)
        policy = FusionPolicy.MEASURED_WINNERS if auto else policy
    options = CompileOptions(target=args.target, arch=args.arch, runs=args.runs, rtol=args.rtol,
                             atol=args.atol, seed=args.seed, plan=plan, fusion_policy=policy, tuning=tuning)
    result = session.compile(options, progress=_progress)
    native = getattr(args, "native_log", None)
    data, written = write_outputs(session, result, plan, out_dir, export=not args.no_export,
                                  tvm_log=native.lines() if native else [])
    print("\n".join(report_lines(result, plan, session.graph)))
    if data["tvm_log"]:
        print(f"note         TVM printed {len(data['tvm_log'])} log lines: see tvm_log in the report")
    print("wrote        " + ", ".join(str(p) for p in written))
    return 0


def write_outputs(session: Session, result: CompileResult, plan: FusionPlan | None, out_dir: Path,
                  export: bool = True, tvm_log: list[str] | None = None) -> tuple[dict, list[Path]]:
    """What one compile writes into out_dir: the library, the timing charts and report.json
    (last: its presence means the run finished). `tvm_log`: C++ warnings, kept off the
    terminal. Returns the report data and the paths written."""
    data = report_json(result, session.graph, plan)
    data["tvm_log"] = list(tvm_log or [])
    written = []
    if export:
        written.append(session.export_library(result, out_dir))
    rows, series, note = chart_rows(result.fusion, {"this compile": result.kernel_times},
                                    {op: f"k{k.index}" for k in result.kernels for op in k.ops})
    if rows:
        written += timing_chart(rows, f"{result.model} on {result.target}: time per kernel", out_dir / "timing",
                                series, note)
    written.append(write_report(data, out_dir))
    return data, written
