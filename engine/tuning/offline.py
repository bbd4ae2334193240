"""Offline measurement: for a device the tuner cannot reach.

    batch = sample_candidates(kernel_mod, target, n=16)       # MetaSchedule samples
    export_candidates(batch, target, "cands/")                 # cands/candidates.so + manifest.json
    # on the device, with only the TVM runtime:
    #   python engine/tuning/offline_runner.py cands/        -> cands/timings.json
    import_timings("cands/", store.database())                 # tuning records, as if tuned online

Every candidate is one global function of the library (`cand_<i>`); the manifest keeps,
for each, its argument shapes, its workload and its trace (MetaSchedule JSON), so the
timings come back as ordinary tuning records and `query_schedule` replays the best.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import tvm
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

from engine.tuning.builder import import_intrinsics
from engine.tuning.measure import device_type

MANIFEST = "manifest.json"
LIBRARY = "candidates.so"
TIMINGS = "timings.json"


@dataclass(frozen=True)
class Candidate:
    name: str  # the kernel it implements
    workload: tvm.IRModule  # {"main": unscheduled kernel}
    schedule: object  # tvm.s_tir.Schedule (its trace is what the database stores)


def sample_candidates(wmod: tvm.IRModule, target, n: int, seed: int = 1, name: str = "main") -> list[Candidate]:
    """`n` random points of MetaSchedule's design space for `wmod`, post-processed."""
    import_intrinsics()
    ctx = ms.TuneContext(mod=wmod, target=target, space_generator="post-order-apply",
                         search_strategy="replay-trace", rand_state=seed)
    spaces = ctx.space_generator.generate_design_space(wmod)
    postprocs = ctx.space_generator.postprocs
    out, attempt = [], 0
    while len(out) < n and attempt < 20 * n:
        space = spaces[attempt % len(spaces)]
        attempt += 1
        sch = tvm.s_tir.Schedule(wmod, seed=seed + attempt)
        space.trace.apply_to_schedule(sch, remove_postproc=True,
                                      decision_provider=lambda inst, inputs, attrs, decision: None)
        if all(p.apply(sch) for p in postprocs):
            out.append(Candidate(name, wmod, sch))
    return out


def export_candidates(candidates: list[Candidate], target, out_dir) -> Path:
    """Build every candidate into one library next to a manifest; returns the manifest path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    funcs, entries = {}, []
    for i, cand in enumerate(candidates):
        symbol = f"cand_{i}"
        kernel = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(cand.schedule.mod)["main"]
        funcs[symbol] = kernel.with_attr("global_symbol", symbol)
        args = ms.arg_info.ArgInfo.from_entry_func(cand.schedule.mod, remove_preproc=True)
        record = ms.database.TuningRecord(cand.schedule.trace, ms.database.Workload(cand.workload),
                                          None, target, args)
        entries.append({"symbol": symbol, "kernel": cand.name,
                        "args": [{"shape": [int(s) for s in a.shape], "dtype": str(a.dtype)} for a in args],
                        "workload": ms.database.Workload(cand.workload).as_json(),
                        "record": record.as_json()})
    tvm.compile(tvm.IRModule(funcs), target=target).export_library(str(out / LIBRARY))
    manifest = {"format": 1, "target": str(target), "device": device_type(target), "library": LIBRARY,
                "candidates": entries}
    path = out / MANIFEST
    path.write_text(json.dumps(manifest))
    return path


def import_timings(out_dir, database) -> int:
    """Commit the device's timings (timings.json) as tuning records; returns how many."""
    out = Path(out_dir)
    manifest = json.loads((out / MANIFEST).read_text())
    timings = json.loads((out / TIMINGS).read_text())["seconds"]
    count = 0
    for entry in manifest["candidates"]:
        secs = timings.get(entry["symbol"])
        if not secs:
            continue  # failed or skipped on the device
        workload = database.commit_workload(ms.database.Workload.from_json(entry["workload"]).mod)
        rec = ms.database.TuningRecord.from_json(entry["record"], workload)
        database.commit_tuning_record(ms.database.TuningRecord(
            rec.trace, workload, [float(s) for s in secs], rec.target, rec.args_info))
        count += 1
    return count
