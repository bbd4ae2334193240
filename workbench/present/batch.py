"""The rows of `workbench batch`: one per (model, target, variant), from its CompileResult
or its failure, as JSON (the run's marker and OUT/summary.json), as the progress line and as
the markdown table of OUT/summary.md.

    [3/12] fire_module llvm both ... ok 3 launches 0.162 ms (0.95x base) 4.1 s
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from engine.session import target_info

if TYPE_CHECKING:
    from engine.pipeline import CompileResult

OK = "ok"


@dataclass(frozen=True)
class RunRow:
    model: str
    target: str
    variant: str
    status: str  # "ok" or "failed: <one line>"
    seconds: float
    launches: int | None = None
    latency_ms: float | None = None  # median; None: not timed (see `timing`)
    onnxruntime_ms: float | None = None
    timing: str = ""  # why there is no latency ("not timed (no GPU)")
    verification: str = ""  # "passed (cpu)", "passed (host emulation)"
    report: str | None = None  # report.json, relative to the batch's output folder
    options: dict = field(default_factory=dict)  # what the run was asked to do
    earlier: bool = False  # finished by an earlier batch (skipped this time)

    @property
    def key(self) -> str:
        return f"{self.model}/{self.target}/{self.variant}"

    @property
    def ok(self) -> bool:
        return self.status == OK

    def to_json(self) -> dict:
        data = asdict(self)
        del data["earlier"]
        return data

    @staticmethod
    def from_json(data: dict, earlier: bool = True) -> "RunRow":
        return RunRow(**data, earlier=earlier)


def row_of(model: str, variant: str, result: CompileResult, seconds: float, report: str,
           options: dict) -> RunRow:
    """The row of a finished compile."""
    spec = target_info(result.target)
    lat, ort = result.latency, result.onnxruntime_latency
    timing = "" if lat else ("not timed (no GPU)" if result.ran_on != spec.device_kind and spec.host_emulation
                             else "not timed")
    v = result.verification
    return RunRow(model, result.target, variant, OK, seconds, launches=result.launches,
                  latency_ms=lat.median_ms if lat else None, onnxruntime_ms=ort.median_ms if ort else None,
                  timing=timing, verification=f"{'passed' if v.passed else 'FAILED'} ({result.ran_on})",
                  report=report, options=options)


def failed_row(model: str, target: str, variant: str, error: str, seconds: float) -> RunRow:
    return RunRow(model, target, variant, f"failed: {error}", seconds)


def vs_base(row: RunRow, rows: list[RunRow]) -> float | None:
    """row's latency over the `base` variant's of the same model and target (both timed)."""
    base = next((r for r in rows if (r.model, r.target, r.variant) == (row.model, row.target, "base")), None)
    if row.latency_ms is None or base is None or base.latency_ms is None:
        return None
    return row.latency_ms / base.latency_ms


def _ratio(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def _latency(row: RunRow) -> str:
    return f"{row.latency_ms:.3f} ms" if row.latency_ms is not None else row.timing or "-"


def progress_result(row: RunRow, rows: list[RunRow]) -> str:
    """What follows `[3/12] model target variant ... ` once the run ended."""
    if not row.ok:
        return f"{row.status} {row.seconds:.1f} s"
    base = vs_base(row, rows)
    text = f"ok {row.launches} launches {_latency(row)}" + (f" ({base:.2f}x base)" if base is not None else "")
    return text + (" (done earlier)" if row.earlier else f" {row.seconds:.1f} s")


_COLUMNS = ("model", "target", "variant", "status", "launches", "latency ms", "vs onnxruntime", "vs base",
            "verification", "seconds")


def summary_json(rows: list[RunRow], manifest: str, out: str) -> dict:
    def ratio(r: RunRow):
        ort = r.latency_ms / r.onnxruntime_ms if r.latency_ms and r.onnxruntime_ms else None
        return {"vs_onnxruntime": ort, "vs_base": vs_base(r, rows)}

    return {"manifest": manifest, "out": out, "runs": [{**r.to_json(), **ratio(r)} for r in rows],
            "failed": [r.key for r in rows if not r.ok]}


def summary_markdown(rows: list[RunRow], manifest: str) -> str:
    def cells(r: RunRow) -> tuple[str, ...]:
        latency = f"{r.latency_ms:.3f}" if r.latency_ms is not None else (r.timing or "-")
        ort = r.latency_ms / r.onnxruntime_ms if r.latency_ms and r.onnxruntime_ms else None
        status = r.status.replace("|", "\\|")
        return (r.model, r.target, r.variant, status, str(r.launches) if r.launches is not None else "-",
                latency, _ratio(ort), _ratio(vs_base(r, rows)), r.verification or "-", f"{r.seconds:.1f}")

    lines = [f"# workbench batch {manifest}", "", "| " + " | ".join(_COLUMNS) + " |",
             "|" + "|".join("---" for _ in _COLUMNS) + "|"]
    lines += ["| " + " | ".join(cells(r)) + " |" for r in rows]
    failed = [r.key for r in rows if not r.ok]
    lines += ["", f"{len(rows) - len(failed)} of {len(rows)} runs ok"
              + (f"; failed: {', '.join(failed)}" if failed else "")]
    return "\n".join(lines) + "\n"

