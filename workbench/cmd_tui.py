"""`workbench tui MODEL` (also `workbench MODEL`): the interactive workbench."""

from __future__ import annotations


def register(sub, model_cmd) -> None:
    from workbench.cli import positive_int

    p = model_cmd("tui", "open the interactive workbench (graph, block dependencies, fusion, timing)")
    p.add_argument("--out", metavar="DIR", help="export folder for `e` (default: out/MODEL-tui)")
    p.add_argument("--plan", metavar="FILE", help="fusion plan JSON to load and save "
                   "(default: out/MODEL-llvm/plan.json)")
    p.add_argument("--runs", type=positive_int, default=20, help="timed runs per compile")
    p.set_defaults(run=tui_cmd)


def tui_cmd(args) -> int:
    from engine.session import Session
    from workbench.tui.app import WorkbenchApp
    from workbench.tui.engine_adapter import EngineAnalyses

    def open_session(spec: str) -> Session:
        return Session(spec, shapes=dict(args.shape), seed=args.seed)

    WorkbenchApp(args.model, session_factory=open_session, analyses=EngineAnalyses(args.plan),
                 out_dir=args.out, runs=args.runs).run()
    return 0
