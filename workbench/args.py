"""Argument types shared by the subcommands, and the Session their model arguments open."""

from __future__ import annotations

import argparse

from engine.events import CompileOptions
from engine.session import Session, target_info, target_names

DEFAULT_TARGET = CompileOptions().target  # the engine's default: this machine's CPU


def parse_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """`name=1,3,224,224` -> ("name", (1, 3, 224, 224))."""
    name, sep, dims = text.rpartition("=")
    try:
        shape = tuple(int(d) for d in dims.split(","))
    except ValueError:
        shape = ()
    if not sep or not name or not shape or min(shape) <= 0:
        raise argparse.ArgumentTypeError(f"bad --shape '{text}', expected NAME=D1,D2,... with positive dims")
    return name, shape


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'")
    return value


def add_target_arguments(p: argparse.ArgumentParser, blocks: bool = False) -> None:
    """--target (from the engine's target table) and --arch, each target's help from its row;
    `blocks`: say what a block is on each target."""
    names = target_names()
    what = ("schedules to analyse; a block is " + ", ".join(f"{n}: {target_info(n).block_axis}" for n in names)
            if blocks else "code generation target")
    p.add_argument("--target", default=DEFAULT_TARGET, choices=names, help=what)
    p.add_argument("--arch", help="target architecture: " + "; ".join(f"{n}: {target_info(n).arch_help}"
                                                                     for n in names))


def session_from_args(args: argparse.Namespace, model: str | None = None) -> Session:
    """The Session of the common model arguments (--shape, --seed, --inputs); `model` overrides args.model."""
    return Session(model or args.model, shapes=dict(args.shape), seed=args.seed, inputs_from=args.inputs)
