"""`workbench batch`: manifest checks, per-run reports and the summary, failures that do not
stop the batch, re-runs, one schedule per model and target, --jobs and Ctrl-C."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import onnx
import pytest

from conftest import ROOT, default_sigint, run_cli
from engine.parallel.plan import DecisionKind, DecisionStatus
from engine.session import Session
from engine.targets import TargetSpec
from workbench.batch_manifest import Variant
from workbench.cli import main

TWO_BY_TWO = """
[defaults]
variants = ["base", "both"]
runs = 3
export = false
[[model]]
spec = "fire_module"
[[model]]
spec = "inception_block"
"""


def batch(*args: str) -> SimpleNamespace:
    """`workbench batch ARGS` in this process: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["batch", *args])
    return SimpleNamespace(code=code, out=out.getvalue(), err=err.getvalue())


def rows(out_dir) -> dict[str, dict]:
    return {f"{r['model']}/{r['target']}/{r['variant']}": r
            for r in json.loads((out_dir / "summary.json").read_text())["runs"]}


@pytest.fixture(scope="module")
def two_by_two(tmp_path_factory):
    """fire_module and inception_block x base, both on llvm, counting the schedules made."""
    folder = tmp_path_factory.mktemp("batch")
    (folder / "m.toml").write_text(TWO_BY_TWO)
    scheduled = []
    original = TargetSpec.schedule
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(TargetSpec, "schedule",
                   lambda self, mod, target: scheduled.append(self.name) or original(self, mod, target))
        res = batch(str(folder / "m.toml"), "--out", str(folder / "out"))
    return SimpleNamespace(folder=folder, out=folder / "out", res=res, scheduled=scheduled)


BAD = [
    ("bogus = 1\n", "m.toml: unknown key 'bogus'"),
    ('[[model]]\nspec = "fire_module"\ncolour = 1\n', "model 1 (fire_module): unknown key 'colour'"),
    ('[[model]]\nspec = "fire_module"\nvariants = ["fast"]\n', "model 1 (fire_module): unknown variant 'fast'"),
    ('[[model]]\nspec = "fire_module"\n[[model]]\nspec = "fire_module"\ntargets = ["tpu"]\n',
     "model 2 (fire_module): unknown target 'tpu'; known: llvm, cuda"),
    ('[[model]]\nspec = "missing.onnx"\n', "model 1 (missing.onnx): model file not found"),
    ('[[model]]\nspec = "fire_module"\nvariants = ["cotuned"]\n', "variant 'cotuned' needs cotune_trials > 0"),
    ('[defaults]\nruns = "3"\n[[model]]\nspec = "fire_module"\n', "model 1 (fire_module): runs must be int"),
    ('[[model]]\nspec = "fire_module"\ninputs = "in.npz"\n', "model 1 (fire_module): inputs "),
    ("[[model\n", "not a TOML manifest"),
    ("out = 'x'\n", "no models"),
]


@pytest.mark.parametrize("text, message", BAD, ids=[m for _, m in BAD])
def test_a_bad_manifest_is_one_line_exit_2_and_writes_nothing(tmp_path, text, message):
    (tmp_path / "m.toml").write_text(text)
    res = batch(str(tmp_path / "m.toml"), "--out", str(tmp_path / "out"))
    assert res.code == 2 and res.out == ""
    assert res.err.count("\n") == 1 and res.err.startswith("workbench: error: ") and message in res.err
    assert not (tmp_path / "out").exists()


def test_a_json_manifest_is_checked_the_same_way(tmp_path):
    (tmp_path / "m.json").write_text(json.dumps({"model": [{"spec": "fire_module", "variants": ["fast"]}]}))
    res = batch(str(tmp_path / "m.json"), "--out", str(tmp_path / "out"))
    assert res.code == 2 and "model 1 (fire_module): unknown variant 'fast'" in res.err
    assert not (tmp_path / "out").exists()


def test_variants_approve_their_kinds_of_decision():
    # mha_block: horizontal, branch-stage and row-band decisions; res2net_block: one-to-one
    plans = [Session(spec).propose("llvm").plan for spec in ("mha_block", "res2net_block")]
    kinds = {v: set().union(*({d.kind for d in v.plan(p).approved()} for p in plans))
             for v in Variant if v is not Variant.BASE}
    assert kinds[Variant.PARALLEL] == {DecisionKind.HORIZONTAL, DecisionKind.BRANCH_STAGE}
    assert kinds[Variant.BLOCK] == {DecisionKind.VERTICAL_BLOCK, DecisionKind.VERTICAL_ROWS}
    assert kinds[Variant.BOTH] == kinds[Variant.COTUNED] == {d.kind for p in plans for d in p.decisions
                                                             if d.status is not DecisionStatus.REJECTED}
    assert kinds[Variant.AUTO] == set() and Variant.AUTO.policy.value == "auto"  # the policy tries them all
    for proposed in plans:
        assert Variant.BASE.plan(proposed) is None
        assert all(d.status is DecisionStatus.PROPOSED for d in Variant.AUTO.plan(proposed).decisions
                   if d.status is not DecisionStatus.REJECTED)


def test_a_batch_writes_a_report_per_run_and_the_summary(two_by_two):
    res, out = two_by_two.res, two_by_two.out
    assert res.code == 0, res.err
    lines = res.out.splitlines()
    assert lines[0].startswith("[1/4] fire_module llvm base ... ok 4 launches ")
    # both: the concat's producers write into its slices (one launch with them), and inception's
    # reduce stage keeps its horizontal fusion without the 1x1 branch the slices took
    assert lines[1].startswith("[2/4] fire_module llvm both ... ok 2 launches ") and "x base)" in lines[1]
    assert lines[3].startswith("[4/4] inception_block llvm both ... ok 2 launches ")
    got = rows(out)
    assert {k: r["launches"] for k, r in got.items()} == {
        "fire_module/llvm/base": 4, "fire_module/llvm/both": 2, "inception_block/llvm/base": 8,
        "inception_block/llvm/both": 2}
    for key, row in got.items():
        report = json.loads((out / row["report"]).read_text())
        assert row["status"] == "ok" and row["verification"] == "passed (cpu)" and row["latency_ms"] > 0
        assert report["verification"]["passed"] and report["launches_per_inference"] == row["launches"]
        assert (out / key / "run.json").is_file() and (out / key / "timing.svg").is_file()
        assert ("fusion" in report) is key.endswith("both")
    assert got["fire_module/llvm/base"]["vs_base"] == 1.0
    md = (out / "summary.md").read_text().splitlines()
    assert md[2] == ("| model | target | variant | status | launches | latency ms | vs onnxruntime | vs base "
                     "| verification | seconds |")
    assert md[4].startswith("| fire_module | llvm | base | ok | 4 | ") and md[7].startswith(
        "| inception_block | llvm | both | ok | 2 | ")
    assert "4 of 4 runs ok" in md


def test_the_schedule_is_made_once_per_model_and_target(two_by_two):
    assert two_by_two.scheduled == ["llvm", "llvm"]  # fire_module, inception_block
    for row in rows(two_by_two.out).values():
        stages = {s["name"]: s for s in json.loads((two_by_two.out / row["report"]).read_text())["stages"]}
        assert all(stages[s]["status"] == "skip" and "reused" in stages[s]["message"]
                   for s in ("import", "fuse", "schedule"))
        assert stages["verify"]["status"] == "done"


def test_a_rerun_skips_finished_runs(two_by_two, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(two_by_two.out, out)  # this process holds the lock of the original
    before = {p: p.stat().st_mtime_ns for p in out.rglob("run.json")}
    res = run_cli("batch", str(two_by_two.folder / "m.toml"), "--out", str(out), timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("(done earlier)") == 4
    assert {p: p.stat().st_mtime_ns for p in out.rglob("run.json")} == before
    assert rows(out).keys() == rows(two_by_two.out).keys()


def test_a_failing_model_fails_its_runs_the_others_go_on_and_force_redoes_them(tmp_path):
    (tmp_path / "broken.onnx").write_text("this is not an ONNX model")
    (tmp_path / "m.toml").write_text('[defaults]\nruns = 3\nexport = false\n[[model]]\nspec = "broken.onnx"\n'
                                     '[[model]]\nspec = "fire_module"\n')
    res = batch(str(tmp_path / "m.toml"), "--out", str(tmp_path / "out"))
    assert res.code == 1
    assert res.err.splitlines()[-1] == "workbench: 1 of 2 runs failed: broken/llvm/base"
    assert "[1/2] broken llvm base ... failed: " in res.out and "broken.onnx: not a" in res.out
    got = rows(tmp_path / "out")
    assert got["broken/llvm/base"]["status"].startswith("failed: ") and got["fire_module/llvm/base"]["status"] == "ok"
    assert not (tmp_path / "out" / "broken" / "llvm" / "base" / "run.json").exists()
    assert "failed: broken/llvm/base" in (tmp_path / "out" / "summary.md").read_text()

    out = tmp_path / "again"
    shutil.copytree(tmp_path / "out", out)
    marker = out / "fire_module" / "llvm" / "base" / "run.json"
    before = marker.stat().st_mtime_ns
    again = run_cli("batch", str(tmp_path / "m.toml"), "--out", str(out), timeout=120)
    assert again.returncode == 1 and "broken llvm base ... failed:" in again.stdout  # tried again
    assert "fire_module llvm base ... ok 4 launches" in again.stdout and "(done earlier)" in again.stdout
    assert marker.stat().st_mtime_ns == before
    forced = run_cli("batch", str(tmp_path / "m.toml"), "--out", str(out), "--force", timeout=120)
    assert forced.returncode == 1 and "(done earlier)" not in forced.stdout
    assert marker.stat().st_mtime_ns != before


def test_a_cuda_run_verifies_in_emulation_when_there_is_no_gpu(tmp_path):
    (tmp_path / "m.toml").write_text('[[model]]\nspec = "fire_module"\ntargets = ["cuda"]\nruns = 3\nexport = false\n')
    res = batch(str(tmp_path / "m.toml"), "--out", str(tmp_path / "out"))
    assert res.code == 0, res.err
    row = rows(tmp_path / "out")["fire_module/cuda/base"]
    if row["latency_ms"] is None:  # no GPU here: compiled, nvcc-checked, verified on the CPU
        assert row["verification"] == "passed (host emulation)" and row["timing"] == "not timed (no GPU)"
        assert "ok 4 launches not timed (no GPU)" in res.out
        assert "| not timed (no GPU) |" in (tmp_path / "out" / "summary.md").read_text()


def test_jobs_run_models_in_their_own_processes(tmp_path):
    (tmp_path / "m.toml").write_text(TWO_BY_TWO.replace('"base", "both"', '"base"'))
    res = run_cli("batch", str(tmp_path / "m.toml"), "--out", str(tmp_path / "out"), "--jobs", "2", timeout=180)
    assert res.returncode == 0, res.stderr
    assert sorted(line.split("] ")[1].split(" ...")[0] for line in res.stdout.splitlines() if line.startswith("[")) == [
        "fire_module llvm base", "inception_block llvm base"]
    assert {r["status"] for r in rows(tmp_path / "out").values()} == {"ok"}


def test_an_interrupt_ends_with_one_line_and_no_summary(tmp_path):
    (tmp_path / "m.toml").write_text('[[model]]\nspec = "fire_module"\nvariants = ["base", "both", "auto"]\n'
                                     'runs = 3\nexport = false\n')
    proc = subprocess.Popen([sys.executable, "-m", "workbench", "batch", str(tmp_path / "m.toml"), "--out",
                             str(tmp_path / "out")], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, preexec_fn=default_sigint)
    try:
        first = proc.stdout.readline()  # the first run ended: the second is under way
        assert first.startswith("[1/3] fire_module llvm base ... ok")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130 and err == "workbench: interrupted\n"
    assert not (tmp_path / "out" / "summary.json").exists() and not (tmp_path / "out" / "summary.md").exists()
    assert not list((tmp_path / "out").rglob(".*.json"))  # no temp file of an atomic write left


def test_a_model_s_inputs_are_verified_on(tmp_path):
    """`inputs` as `--inputs`: a runtime Expand shape that random values cannot be."""
    expand = Path(onnx.__file__).parent / "backend" / "test" / "data" / "simple" / "test_expand_shape_model1"
    (tmp_path / "m.toml").write_text(f'[[model]]\nspec = "{expand / "model.onnx"}"\ninputs = "{expand / "test_data_set_0"}"\n'
                                     'runs = 2\nexport = false\n')
    res = batch(str(tmp_path / "m.toml"), "--out", str(tmp_path / "out"))
    assert res.code == 0, res.err
    assert rows(tmp_path / "out")["test_expand_shape_model1/llvm/base"]["status"] == "ok"
