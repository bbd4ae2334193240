"""`workbench` command line. Every subcommand drives engine.session.Session."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import signal
import sys
import threading

from engine.errors import BlockwiseError
from engine.files import NativeLog
from engine.model import names_a_model
from workbench import cmd_batch, cmd_blockdeps, cmd_compile, cmd_inspect, cmd_plan, cmd_tui
from workbench.args import parse_shape

# Each module owns one or more subcommands: `register(subparsers, model_cmd)` adds them.
COMMAND_MODULES = (cmd_inspect, cmd_compile, cmd_tui, cmd_plan, cmd_blockdeps, cmd_batch)


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
        p.add_argument("--inputs", metavar="FILE", help="inputs to verify on instead of random ones (shapes, "
                       "token ids, masks): a .npz by input name, an ONNX test_data_set folder of input_N.pb "
                       "or one .pb tensor; inputs it lacks are random; their shapes fix dynamic dimensions")
        return p

    for module in COMMAND_MODULES:
        module.register(sub, model_cmd)
    return parser


def _commands(parser: argparse.ArgumentParser) -> set[str]:
    return {name for action in parser._subparsers._group_actions for name in action.choices}


def stop_cleanly_on(signals: set) -> None:
    """SIGINT/SIGTERM end the run within moments, wherever it is (a TVM pass in C++ never
    returns to Python's own handlers until it is done): one line, no traceback, the temp
    files of writes in progress removed, exit 130/143. `signals` were blocked in every
    thread from the start (workbench.entry); one waiting thread takes them."""
    from engine.files import remove_live_temps

    terminal = os.dup(2)  # fd 2 itself may be redirected later (engine.files.NativeLog)

    def wait() -> None:
        signum = signal.sigwait(signals)
        remove_live_temps()
        os.write(terminal, b"workbench: interrupted\n")
        os._exit(128 + signum)

    threading.Thread(target=wait, name="signals", daemon=True).start()


def main(argv: list[str] | None = None, signals: set | None = None) -> int:
    """The `workbench` command. `signals`: the interrupt signals workbench.entry blocked
    for the clean stop (None in tests calling this directly)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser()
    except KeyboardInterrupt:  # while loading the engine, before the handler is in place
        sys.stderr.write("workbench: interrupted\n")
        return 130
    first = next((i for i, a in enumerate(argv) if not a.startswith("-")), None)
    if first is not None and argv[first] not in _commands(parser):
        if not names_a_model(argv[first]):  # a mistyped command must not open the TUI on it
            guess = difflib.get_close_matches(argv[first], sorted(_commands(parser)), n=1)
            hint = f"did you mean '{guess[0]}'? " if guess else ""
            sys.stderr.write(f"workbench: error: '{argv[first]}' is neither a command nor a model ({hint}"
                             f"commands: {', '.join(sorted(_commands(parser)))}; a model is an ONNX file, "
                             "a sample name or zoo:NAME)\n")
            return 2
        argv.insert(first, "tui")  # `workbench MODEL` opens the TUI
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    if signals and args.command == "tui":  # the TUI takes Ctrl-C as a key and restores the terminal
        signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)
    elif signals:
        stop_cleanly_on(signals)
    # TVM's C++ warnings go to the report (compile) or one note, not the terminal
    native = NativeLog() if signals and args.command != "tui" and not args.debug else None
    try:
        with native or contextlib.nullcontext():
            args.native_log = native
            code = args.run(args) or 0
        if native and native.lines() and args.command != "compile":
            sys.stderr.write(f"workbench: note: TVM printed {len(native.lines())} log lines "
                             "(rerun with --debug to see them)\n")
        return code
    except BlockwiseError as err:
        if args.debug and err.exit_code != 2:
            raise
        hint = " (rerun with --debug for the traceback)" if err.exit_code != 2 else ""
        sys.stderr.write(f"workbench: error: {err}{hint}\n")
        return err.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("workbench: interrupted\n")
        return 130
    except BrokenPipeError:  # `workbench inspect M | head`: the reader left, as with any Unix tool
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 141
    except Exception as err:  # never a traceback for the user unless asked
        if args.debug:
            raise
        msg = str(err).strip().splitlines()[0] if str(err).strip() else ""
        sys.stderr.write(f"workbench: internal error: {type(err).__name__}: {msg} (rerun with --debug)\n")
        return 1


if __name__ == "__main__":  # `python -m workbench` is the entry that also stops cleanly
    sys.exit(main())
