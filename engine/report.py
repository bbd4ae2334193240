"""The compiled library as a file (the report itself is the front ends': workbench.present.report)."""

from __future__ import annotations

import os
from pathlib import Path

from engine.files import atomic_output, native_stderr_silenced
from engine.pipeline import CompileResult

LIBRARY_NAME = "model.so"


def export_library(result: CompileResult, out_dir: str | os.PathLike) -> Path:
    """Export the executable (CUDA code is compiled by nvcc here); atomic via rename."""
    final = Path(out_dir) / LIBRARY_NAME
    # a shared library, readable and executable like any build output
    with atomic_output(final, mode=0o777) as tmp, native_stderr_silenced():
        result.executable.export_library(tmp)
    return final
