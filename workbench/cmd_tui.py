"""`workbench tui MODEL` (also `workbench MODEL`): the interactive workbench."""

from __future__ import annotations

from functools import partial

from workbench.args import add_target_arguments, positive_int, session_from_args


def register(sub, model_cmd) -> None:
    p = model_cmd("tui", "open the interactive workbench (graph, block dependencies, fusion, timing)")
    add_target_arguments(p, blocks=True)  # T in the app switches to the next target
    p.add_argument("--out", metavar="DIR", help="export folder for `e` (default: out/MODEL-tui)")
    p.add_argument("--plan", metavar="FILE", help="fusion plan JSON of --target to load and save "
                   "(default: out/MODEL-TARGET/plan.json; other targets keep their default)")
    p.add_argument("--runs", type=positive_int, default=20, help="timed runs per compile")
    p.set_defaults(run=tui_cmd)


def tui_cmd(args) -> int:
    from workbench.tui.app import WorkbenchApp  # textual: loaded only for this command
    from workbench.tui.engine_adapter import EngineAnalyses

    analyses = EngineAnalyses(args.plan, target=args.target, arch=args.arch)
    WorkbenchApp(args.model, session_factory=partial(session_from_args, args), analyses=analyses,
                 out_dir=args.out, runs=args.runs).run()
    return 0
