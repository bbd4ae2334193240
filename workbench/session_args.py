"""Build an engine Session from the common model arguments of every subcommand."""

from __future__ import annotations

from engine.session import Session


def session_from_args(args) -> Session:
    return Session(args.model, shapes=dict(args.shape), seed=args.seed)
