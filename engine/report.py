"""The compiled library as a file (the report itself is the front ends': workbench.present.report)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from engine.files import current_umask, native_stderr_silenced
from engine.pipeline import CompileResult

LIBRARY_NAME = "model.so"


def export_library(result: CompileResult, out_dir: str | os.PathLike) -> Path:
    """Export the executable (CUDA code is compiled by nvcc here); atomic via rename."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    final = out_dir / LIBRARY_NAME
    fd, tmp = tempfile.mkstemp(prefix=".model.", suffix=".so", dir=out_dir)
    os.close(fd)
    try:
        with native_stderr_silenced():
            result.executable.export_library(tmp)
        os.chmod(tmp, 0o755 & ~current_umask())  # a shared library, readable like any build output
        os.replace(tmp, final)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return final
