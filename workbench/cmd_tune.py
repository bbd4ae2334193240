"""Tuning options of `workbench compile`: --tune-trials, --rpc, --tune-db."""

from __future__ import annotations


def add_tune_arguments(p) -> None:
    from workbench.cli import positive_int

    p.add_argument("--tune-trials", type=positive_int, metavar="N",
                   help="tune the heaviest kernels with MetaSchedule, N trials in all (default: no tuning)")
    p.add_argument("--rpc", metavar="HOST:PORT:KEY",
                   help="measure tuning candidates on devices registered at this RPC tracker")
    p.add_argument("--tune-db", metavar="DIR",
                   help="folder of the tuning databases (default: .blockwise/tune)")


def tune_hook(args, progress):
    """The CompileOptions.tune hook these arguments ask for, or None."""
    if not getattr(args, "tune_trials", None):
        return None
    from engine.tuning import KernelTuner, RpcEndpoint, TuneOptions

    rpc = RpcEndpoint.parse(args.rpc) if args.rpc else None
    return KernelTuner(TuneOptions(trials=args.tune_trials, rpc=rpc, db_root=args.tune_db), progress=progress)
