"""The compile report: a CompileResult as report.json data and as the lines `workbench
compile` prints (stages, verification, launches, latency, notes, fusion, kernel resources,
kernel times)."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from engine.events import StageStatus
from engine.files import write_atomic
from engine.opgraph import OperatorGraph
from engine.parallel.plan import FusionPlan
from workbench.present.fusion import fusion_json, fusion_lines
from workbench.present.timing import (GAPS, MEDIANS, kernel_rows, kernel_rows_json, kernel_table_lines,
                                      latency_lines)

if TYPE_CHECKING:
    from engine.pipeline import CompileResult
    from engine.resources import KernelResources

REPORT_NAME = "report.json"


def report_json(result: CompileResult, graph: OperatorGraph, plan: FusionPlan | None = None) -> dict:
    """`plan`: the one the compile applied (names the decisions of result.fusion)."""
    def latency(lat):
        return dataclasses.asdict(lat) if lat is not None else None

    v = result.verification
    data = {
        "model": result.model,
        "target": result.target,
        "target_detail": result.target_detail,
        "ran_on": result.ran_on,
        "stages": [{"name": s.stage.value, "seconds": round(s.seconds, 4), "status": s.status.value,
                    "message": s.message} for s in result.stages],
        "verification": {
            "passed": v.passed, "rtol": v.rtol, "atol": v.atol, "max_abs_err": v.max_abs,
            "max_rel_err": v.max_rel, "first_bad_kernel": v.first_bad_kernel,
            "outputs": [dataclasses.asdict(o) for o in v.outputs],
            "kernels_compared": v.kernels_compared, "kernels_total": v.kernels_total,
            "special_ops": list(v.special_ops),
            "special_values": [dataclasses.asdict(o) for o in v.special_values], "notes": list(v.notes)},
        "launches_per_inference": result.launches,
        "kernels": [{"index": k.index, "name": k.func, "ops": list(k.ops),
                     "op_labels": [graph.node(o).label for o in k.ops],
                     "out_shape": list(k.out_shape)} for k in result.kernels],
        "kernel_times": [dataclasses.asdict(t) for t in result.kernel_times],
        "latency": latency(result.latency),
        "onnxruntime_latency": latency(result.onnxruntime_latency),
        "ratio_vs_onnxruntime": _ratio(result),
        "timing": {"model": MEDIANS, "kernel_sum": GAPS,
                   "kernels": kernel_rows_json(kernel_rows(result.kernel_times, result.kernels, graph))},
        "notes": list(result.notes),
    }
    if result.fusion is not None and plan is not None:
        data["fusion"] = fusion_json(result.fusion, plan)
    if result.cotuned:
        data["cotuning"] = [r.to_json() for r in result.cotuned]
    if result.kernel_resources:
        data["kernel_resources"] = {"source": "ptxas -v", "occupancy": "theoretical",
                                    "kernels": [k.to_json() for k in result.kernel_resources]}
    return data


def write_report(data: dict, out_dir: str | os.PathLike) -> Path:
    return write_atomic(Path(out_dir) / REPORT_NAME, json.dumps(data, indent=1) + "\n")


def report_lines(result: CompileResult, plan: FusionPlan | None = None, graph: OperatorGraph | None = None
                 ) -> list[str]:
    """`graph`: for each kernel's GFLOP/s and GB/s (the operator graph's estimates)."""
    v = result.verification
    lines = [f"model        {result.model}   target {result.target}",
             "stages       " + "  ".join(f"{s.stage.value} {s.seconds:.2f}s" for s in result.stages
                                         if s.status is StageStatus.DONE),
             f"verify       {'OK' if v.passed else 'FAILED'}  {v.figures()}  ({result.ran_on})",
             f"kernels      {result.launches} launches per inference"]
    lines += latency_lines(result.latency, result.onnxruntime_latency, result.kernel_times)
    lines += [f"note         {note}" for note in result.notes]
    if result.fusion is not None and plan is not None:
        lines += fusion_lines(result.fusion, plan)
    if result.kernel_resources:
        lines += [""] + resource_lines(result.kernel_resources)
    if result.kernel_times:
        lines += [""] + kernel_table_lines(kernel_rows(result.kernel_times, result.kernels, graph))
    return lines


def resource_lines(kernels: tuple[KernelResources, ...]) -> list[str]:
    """Per kernel: registers per thread, static shared memory, spills (bytes per thread,
    stores/loads, flagged with !) and theoretical occupancy with what limits it."""
    width = max([len(k.kernel) for k in kernels] + [6])
    lines = ["resources    from ptxas; occupancy theoretical (resident warps / max per SM)",
             f"{'kernel':<{width}} {'regs':>5} {'smem B':>7} {'spills B st/ld':>15} {'threads':>7} "
             f"{'occupancy':>9}  limiter"]
    for k in kernels:
        spills = f"{k.spill_stores}/{k.spill_loads}" + (" !" if k.spills else "  ")
        occupancy = f"{k.occupancy:.0%}" if k.occupancy is not None else "-"
        threads = k.threads_per_block if k.threads_per_block is not None else "-"
        limiter = k.limiter.value if k.limiter is not None else "-"
        lines.append(f"{k.kernel:<{width}} {k.registers:>5} {k.shared_bytes:>7} {spills:>15} {threads:>7} "
                     f"{occupancy:>9}  {limiter}")
    return lines


def _ratio(result: CompileResult) -> float | None:
    lat, ort = result.latency, result.onnxruntime_latency
    return lat.median_ms / ort.median_ms if lat and ort else None

