"""`workbench` command line. Every subcommand drives engine.session.Session."""

from __future__ import annotations

import argparse
import sys

from engine.errors import BlockwiseError
from workbench import cmd_blockdeps, cmd_compile, cmd_inspect, cmd_plan, cmd_tui
from workbench.args import parse_shape

# Each module owns one or more subcommands: `register(subparsers, model_cmd)` adds them.
COMMAND_MODULES = (cmd_inspect, cmd_compile, cmd_tui, cmd_plan, cmd_blockdeps)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, no usage dump
        sys.stderr.write(f"workbench: error: {message} (see --help)\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="workbench", description="blockwise: block-level dependencies and "
                     "parallel-operator fusion on Apache TVM")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def model_cmd(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("model", help="ONNX file, bundled sample name, or zoo:NAME (e.g. zoo:inception_v1)")
        p.add_argument("--shape", action="append", type=parse_shape, default=[], metavar="NAME=D1,D2,..",
                       help="static shape for a dynamic input (repeatable)")
        p.add_argument("--seed", type=int, default=0, help="seed for random weights and inputs")
        return p

    for module in COMMAND_MODULES:
        module.register(sub, model_cmd)
    return parser


def _commands(parser: argparse.ArgumentParser) -> set[str]:
    return {name for action in parser._subparsers._group_actions for name in action.choices}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    first = next((i for i, a in enumerate(argv) if not a.startswith("-")), None)
    if first is not None and argv[first] not in _commands(parser):
        argv.insert(first, "tui")  # `workbench MODEL` opens the TUI
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    try:
        return args.run(args) or 0
    except BlockwiseError as err:
        sys.stderr.write(f"workbench: error: {err}\n")
        return err.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("workbench: interrupted\n")
        return 130
    except Exception as err:  # never a traceback for the user unless asked
        if args.debug:
            raise
        msg = str(err).strip().splitlines()[0] if str(err).strip() else ""
        sys.stderr.write(f"workbench: internal error: {type(err).__name__}: {msg} (rerun with --debug)\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
