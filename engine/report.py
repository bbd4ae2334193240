"""The compile report: a CompileResult as JSON-ready data, and the output files."""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from pathlib import Path

from engine.files import current_umask, native_stderr_silenced, write_atomic
from engine.opgraph import OperatorGraph
from engine.pipeline import CompileResult

LIBRARY_NAME = "model.so"


def report_data(result: CompileResult, graph: OperatorGraph) -> dict:
    def latency(lat):
        return dataclasses.asdict(lat) if lat is not None else None

    ratio = (result.latency.median_ms / result.onnxruntime_latency.median_ms
             if result.latency and result.onnxruntime_latency else None)
    return {
        "model": result.model,
        "target": result.target,
        "target_detail": result.target_detail,
        "ran_on": result.ran_on,
        "stages": [{"name": s.stage.value, "seconds": round(s.seconds, 4), "status": s.status,
                    "message": s.message} for s in result.stages],
        "verification": {
            "passed": result.verification.passed, "rtol": result.verification.rtol,
            "atol": result.verification.atol, "max_abs_err": result.verification.max_abs,
            "max_rel_err": result.verification.max_rel,
            "first_bad_kernel": result.verification.first_bad_kernel,
            "outputs": [dataclasses.asdict(o) for o in result.verification.outputs]},
        "launches_per_inference": result.launches,
        "kernels": [{"index": k.index, "name": k.func, "ops": list(k.ops),
                     "op_labels": [graph.node(o).label for o in k.ops],
                     "out_shape": list(k.out_shape)} for k in result.kernels],
        "kernel_times": [dataclasses.asdict(t) for t in result.kernel_times],
        "latency": latency(result.latency),
        "onnxruntime_latency": latency(result.onnxruntime_latency),
        "ratio_vs_onnxruntime": ratio,
        "notes": list(result.notes),
    }


def write_report(data: dict, out_dir: str | os.PathLike) -> Path:
    return write_atomic(Path(out_dir) / "report.json", json.dumps(data, indent=1) + "\n")


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
