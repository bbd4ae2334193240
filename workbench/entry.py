"""The `workbench` executable: interrupt signals are blocked before anything can start a
thread (importing the engine does), so that workbench.cli's waiting thread receives them."""

from __future__ import annotations

import signal
import sys


def main() -> int:
    # a SIGINT a parent chose to ignore (a shell's background job) stays ignored
    wanted = {s for s in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(s) is not signal.SIG_IGN}
    signal.pthread_sigmask(signal.SIG_BLOCK, wanted)  # inherited by every thread started later
    from workbench.cli import main as cli_main

    return cli_main(sys.argv[1:], signals=wanted)


if __name__ == "__main__":
    sys.exit(main())
