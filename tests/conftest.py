import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_models"


def run_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run the `workbench` CLI in a subprocess, as a user would."""
    return subprocess.run([sys.executable, "-m", "workbench", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def default_sigint() -> None:
    """Popen preexec_fn: Ctrl-C as a terminal delivers it. A shell starting the test run in
    the background (`pytest &` without job control) leaves SIGINT ignored, which children
    inherit; the interrupt tests would then test the launcher, not the CLI."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture(scope="session")
def cli():
    return run_cli
