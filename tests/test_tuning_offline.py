"""Offline measurement round trip on the CPU: export candidates, time them with the
runtime-only runner script, import the timings into a tuning database."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tvm
from tvm.s_tir import meta_schedule as ms

from engine.targets import get_target
from engine.tuning import TuneStore
from engine.tuning.offline import export_candidates, import_timings, sample_candidates
from tests.test_tuning import matmul_module

RUNNER = Path(__file__).resolve().parent.parent / "engine" / "tuning" / "offline_runner.py"


@pytest.mark.slow  # ~20 s idle, more on a busy machine
def test_offline_round_trip(tmp_path):
    target = get_target("llvm").target(None)
    mod = matmul_module(64)
    wmod = tvm.IRModule({"main": mod["matmul"].with_attr("global_symbol", "main")})
    cands = sample_candidates(wmod, target, n=4, seed=3, name="matmul")
    assert len(cands) == 4
    manifest = export_candidates(cands, target, tmp_path / "batch")
    data = json.loads(manifest.read_text())
    assert [c["symbol"] for c in data["candidates"]] == [f"cand_{i}" for i in range(4)]
    assert (tmp_path / "batch" / data["library"]).exists()

    # The runner as on the device: a plain script, TVM in runtime-only mode, no blockwise.
    env = {**os.environ, "TVM_USE_RUNTIME_LIB": "1", "PYTHONPATH": ""}
    out = subprocess.run([sys.executable, str(RUNNER), str(tmp_path / "batch"), "--repeat", "2"],
                         capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    timings = json.loads((tmp_path / "batch" / "timings.json").read_text())
    assert len(timings["seconds"]) == 4 and not timings["errors"]

    db = TuneStore(tmp_path / "db").database()
    assert import_timings(tmp_path / "batch", db) == 4
    records = db.get_all_tuning_records()
    assert len(records) == 4
    fastest = min(min(v) for v in timings["seconds"].values())
    assert min(min(float(x) for x in r.run_secs) for r in records) == pytest.approx(fastest)
    sch = db.query_schedule(wmod, target=target, workload_name="main")
    assert sch is not None  # the best candidate's trace replays on the workload
