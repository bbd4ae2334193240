"""The raw record of a benchmark run: what was measured, when, and on which machine.

Every run of bench/compare.py and bench/tuning_squeezenet.py writes one JSON file into
bench/results/ (committed: the raw data behind docs/performance.md), named by the script
and the UTC time, e.g. `compare-20261203-0440.json`.

    >>> sorted(machine(threads=2))
    ['cores', 'cpu', 'date', 'logical_cpus', 'onnxruntime', 'python', 'threads', 'tvm']
"""

from __future__ import annotations

import json
import os
import platform
import time
from importlib import metadata
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The first "model name" of /proc/cpuinfo (the processor name elsewhere)."""
    try:
        for line in Path(cpuinfo).read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine(threads: int, now: float | None = None) -> dict:
    """Date (UTC), CPU model, core counts, the runtime's thread count and library versions."""
    from engine.cores import physical_cores

    def version(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "not installed"

    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(now)), "cpu": cpu_model(),
            "cores": physical_cores(), "logical_cpus": os.cpu_count(), "threads": threads,
            "tvm": version("apache-tvm"), "onnxruntime": version("onnxruntime"),
            "python": platform.python_version()}


def write_raw(kind: str, payload: dict, threads: int, also: str | os.PathLike | None = None,
              results: Path = RESULTS, now: float | None = None) -> list[Path]:
    """Write `payload` with the machine facts into results/<kind>-YYYYMMDD-HHMM.json (and to
    `also` when given); returns the paths written."""
    now = time.time() if now is None else now
    data = {"machine": machine(threads, now), **payload}
    paths = [results / f"{kind}-{time.strftime('%Y%m%d-%H%M', time.gmtime(now))}.json"]
    if also is not None and Path(also).resolve() != paths[0].resolve():
        paths.append(Path(also))
    text = json.dumps(data, indent=1, default=str)
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return paths
