"""The docs table of a GPU run: bench/gpu/run_gpu.py's JSON -> markdown (runs anywhere,
Python's standard library only).

    python bench/gpu/table.py results.json              # markdown on stdout
    python bench/gpu/table.py results.json --out table.md

Three tables, models x candidates (our variants, stock TVM, torch eager, torch.compile):
median latency (ms, and launches per inference), latency / `base` (our unfused build) and
latency / `tvm` (stock TVM: its own import and default pipeline); lower is better, each with
the geometric mean over the models where both were measured. A cell says why it is empty:
`=parallel` (the same build as that variant, whose figure counts for it), `no dec.` (the plan
has no decision of this kind), `skipped`, `failed` (on the GPU), `pack failed` (not built);
`✗` marks outputs that did not match
onnxruntime. Footnotes give the errors and the run's settings.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

BASE, STOCK, CONTROL = "base", "tvm", "base-embedded"
ORDER = ["base", "parallel", "block", "both", "cotuned", "tvm", "base-embedded", "torch-eager", "torch-compile"]
NO_DECISION = "no decision of this kind"


def resolved(variants: dict, name: str) -> dict:
    """The record of `name`, or of the build it is the same as."""
    v = variants.get(name) or {}
    return variants.get(v["same_as"], v) if v.get("status") == "same_as" else v


def measured_ms(variants: dict, name: str) -> float | None:
    """Median ms of `name`, following `same_as` to the build it equals; None if not measured
    or its outputs did not match."""
    seen = set()
    while name in variants and name not in seen:
        seen.add(name)
        v = variants[name]
        if v.get("status") == "same_as":
            name = v.get("same_as", "")
            continue
        if "median_ms" in v and v.get("ok", True):
            return v["median_ms"]
        return None
    return None


def cell_text(v: dict | None) -> str:
    if v is None:
        return "-"
    status = v.get("status")
    if status == "same_as":
        return f"={v.get('same_as')}"
    if status == NO_DECISION:
        return "no dec."
    if "median_ms" in v:
        return f"{v['median_ms']:.3f}" + ("" if v.get("ok", True) else " ✗")
    return status or "-"


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def columns(results: dict) -> list[str]:
    present = {n for r in results.get("models", []) for n in r.get("variants", {})}
    return [n for n in ORDER if n in present] + sorted(present - set(ORDER))


def latency_table(results: dict, cols: list[str]) -> list[str]:
    lines = ["| model | " + " | ".join(cols) + " | launches (" + "/".join(c for c in cols if c != CONTROL) + ") |",
             "|---" * (len(cols) + 2) + "|"]
    for r in results.get("models", []):
        vs = r.get("variants", {})
        if r.get("status") != "done":
            lines.append(f"| {r['model']} | " + " | ".join([r.get("status", "?")] * len(cols)) + " | |")
            continue
        launches = "/".join(str(resolved(vs, c).get("launches", "-")) for c in cols if c != CONTROL)
        lines.append(f"| {r['model']} | " + " | ".join(cell_text(vs.get(c)) for c in cols) + f" | {launches} |")
    return lines


def ratio_table(results: dict, cols: list[str], ref: str, leave_out: tuple[str, ...] = ()) -> list[str]:
    shown = [c for c in cols if c != ref and c not in leave_out]
    lines = ["| model | " + " | ".join(shown) + " |", "|---" * (len(shown) + 1) + "|"]
    per_col: dict[str, list[float]] = {c: [] for c in shown}
    for r in results.get("models", []):
        vs = r.get("variants", {})
        base = measured_ms(vs, ref)
        cells = []
        for c in shown:
            mine = measured_ms(vs, c)
            if mine is None or base is None:
                v = vs.get(c) or {}
                cells.append("-" if mine is not None else "✗" if v.get("ok") is False else cell_text(v))
                continue
            ratio = mine / base
            per_col[c].append(ratio)
            cells.append(f"{ratio:.2f}x" if ratio >= 0.1 else f"{ratio:.3f}x")
        lines.append(f"| {r['model']} | " + " | ".join(cells) + " |")
    means = [geomean(per_col[c]) for c in shown]
    lines.append("| **geomean** | " + " | ".join(f"{m:.3f}x (n={len(per_col[c])})" if m else "-"
                                                  for c, m in zip(shown, means)) + " |")
    return lines


def footnotes(results: dict) -> list[str]:
    notes = []
    for r in results.get("models", []):
        if r.get("status") not in ("done", None):
            notes.append(f"- {r['model']}: {r.get('status')}: {r.get('error') or r.get('reason', '')}")
        for name, v in r.get("variants", {}).items():
            if v.get("status") in ("failed", "pack failed", "skipped"):
                notes.append(f"- {r['model']} / {name}: {v['status']}: {v.get('error') or v.get('reason', '')}")
            elif v.get("ok") is False:
                notes.append(f"- {r['model']} / {name}: outputs differ from onnxruntime "
                             f"(max abs error {v.get('max_abs_err', float('nan')):.2e}) ✗")
            if "compile_s" in v:
                notes.append(f"- {r['model']} / {name}: compiled in {v['compile_s']} s")
    for m in results.get("payload", {}).get("left_out", []):
        notes.append(f"- left out of the payload: {m['model']} ({m['reason']})")
    return notes


def render(results: dict) -> str:
    env, settings = results.get("environment", {}), results.get("settings", {})
    device = env.get("gpu") or env.get("cpu") or env.get("device", "?")
    head = [f"{device}" + (f" ({env['gpu_capability']})" if env.get("gpu_capability") else "")
            + f", driver {env.get('driver', '-')}, torch {env.get('torch')} (CUDA {env.get('torch_cuda')}), "
            f"TVM {env.get('tvm')} runtime, {env.get('date', '?')}; "
            f"{settings.get('rounds', '?')} interleaved rounds, {settings.get('runs', '?')} timed runs per "
            f"candidate, median; TF32 {'on' if settings.get('tf32') else 'off'} "
            f"(cotune trials: {results.get('payload', {}).get('cotune_trials', '?')})."]
    cols = columns(results)
    out = head + ["", "Median latency, ms (lower is better):", ""] + latency_table(results, cols)
    if BASE in cols:
        out += ["", f"Latency / `{BASE}` (our build, no fusion):", ""] + ratio_table(results, cols, BASE)
    if STOCK in cols:
        out += ["", f"Latency / `{STOCK}` (stock TVM: from_onnx + tvm.compile, default pipeline):", ""] \
            + ratio_table(results, cols, STOCK, leave_out=(CONTROL,))
    notes = footnotes(results)
    if notes:
        out += [""] + notes
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="run_gpu.py's JSON")
    parser.add_argument("--out", type=Path, default=None, help="write the markdown here too")
    args = parser.parse_args(argv)
    text = render(json.loads(args.results.read_text()))
    sys.stdout.write(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
