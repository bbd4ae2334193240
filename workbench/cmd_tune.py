"""Tuning options of `workbench compile` (--tune-trials, --rpc, --tune-db, --cotune-trials)
and the engine's TuneOptions they ask for."""

from __future__ import annotations

import argparse

from engine.errors import BlockwiseError
from engine.session import target_info, target_names
from engine.tuning.options import RpcEndpoint, TuneOptions
from workbench.args import positive_int


def add_tune_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tune-trials", type=positive_int, metavar="N",
                   help="tune the heaviest kernels, N MetaSchedule trials in all; the default rule's "
                   "other tiles are measured beside them and the fastest kept (default: no tuning)")
    p.add_argument("--rpc", metavar="HOST:PORT:KEY",
                   help="measure tuning candidates on devices registered at this RPC tracker")
    p.add_argument("--tune-db", metavar="DIR",
                   help="folder of the tuning databases (default: .blockwise/tune)")
    p.add_argument("--cotune-trials", type=positive_int, metavar="N",
                   help=f"co-tune every approved fusion decision ({', '.join(_cotuning_targets())}): N trials "
                   "for the joint search and N for the separately-tuned baseline it is compared with")


def tune_options(args: argparse.Namespace) -> TuneOptions | None:
    """The TuneOptions these arguments ask for, or None; checks the flags fit together first."""
    if not args.tune_trials and not args.cotune_trials:
        return None
    if args.cotune_trials and not (args.plan or args.approve):
        raise BlockwiseError("--cotune-trials co-tunes fusion decisions: give --plan FILE or --approve")
    if args.cotune_trials and not target_info(args.target).cotunes:
        raise BlockwiseError(f"--cotune-trials is not implemented for --target {args.target} "
                             f"(only {', '.join(_cotuning_targets())})")
    rpc = RpcEndpoint.parse(args.rpc) if args.rpc else None
    return TuneOptions(trials=args.tune_trials or 0, rpc=rpc, db_root=args.tune_db,
                       cotune_trials=args.cotune_trials or 0)


def _cotuning_targets() -> list[str]:
    return [n for n in target_names() if target_info(n).cotunes]
