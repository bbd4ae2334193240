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


@pytest.fixture(scope="session")
def cli():
    return run_cli
