"""Tuning options of `workbench compile`: --tune-trials, --rpc, --tune-db."""

from __future__ import annotations


def add_tune_arguments(p) -> None:
    from workbench.cli import positive_int

    p.add_argument("--tune-trials", type=positive_int, metavar="N",
                   help="tune the heaviest kernels, N MetaSchedule trials in all; the default rule's "
                   "other tiles are measured beside them and the fastest kept (default: no tuning)")
    p.add_argument("--rpc", metavar="HOST:PORT:KEY",
                   help="measure tuning candidates on devices registered at this RPC tracker")
    p.add_argument("--tune-db", metavar="DIR",
                   help="folder of the tuning databases (default: .blockwise/tune)")
    p.add_argument("--cotune-trials", type=positive_int, metavar="N",
                   help="co-tune every approved fusion decision (llvm): N trials for the joint search "
                   "and N for the separately-tuned baseline it is compared with")


def tune_hook(args, progress, plan=None):
    """The CompileOptions.tune hook these arguments ask for, or None."""
    cotune = getattr(args, "cotune_trials", None)
    if not getattr(args, "tune_trials", None) and not cotune:
        return None
    from engine.errors import BlockwiseError
    from engine.tuning import KernelTuner, RpcEndpoint, TuneOptions

    if cotune and plan is None:
        raise BlockwiseError("--cotune-trials co-tunes fusion decisions: give --plan FILE or --approve")
    if cotune and getattr(args, "target", "llvm") != "llvm":
        raise BlockwiseError("--cotune-trials is implemented for --target llvm only")
    rpc = RpcEndpoint.parse(args.rpc) if args.rpc else None
    options = TuneOptions(trials=args.tune_trials or 0, rpc=rpc, db_root=args.tune_db, cotune_trials=cotune or 0)
    return KernelTuner(options, progress=progress, plan=plan)
