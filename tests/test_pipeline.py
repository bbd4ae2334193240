"""The compile pipeline on llvm: stages, kernels traced to operators, verification, timing."""

import json

import numpy as np
import pytest

from engine.errors import CompileError
from engine.pipeline import STAGES, CompileOptions, Stage, compile_model
from engine.session import Session
from tests.conftest import SAMPLES


@pytest.fixture(scope="module")
def fire():
    session = Session(str(SAMPLES / "fire_module.onnx"))
    events = []
    result = session.compile(CompileOptions(runs=5), progress=events.append)
    return session, result, events


def test_stages_report_in_order(fire):
    _, result, events = fire
    assert [s.value for s in STAGES] == ["import", "fuse", "schedule", "apply plan", "build", "verify", "time"]
    done = [e.stage for e in events if e.status in ("done", "skip")]
    assert done == list(STAGES)
    starts = [e.stage for e in events if e.status == "start"]
    assert Stage.APPLY_PLAN not in starts  # no plan: skipped, not started


def test_kernels_are_traced_to_operators(fire):
    session, result, _ = fire
    graph = session.graph
    labels = [[graph.node(o).label for o in k.ops] for k in result.kernels]
    assert labels == [["squeeze1x1/conv", "squeeze1x1/relu"], ["expand1x1/conv", "expand1x1/relu"],
                      ["expand3x3/conv", "expand3x3/relu"], ["concat/concat"]]
    assert result.launches == 4


def test_verified_and_timed(fire):
    _, result, _ = fire
    assert result.verification.passed and result.verification.max_abs < 1e-4
    assert result.ran_on == "cpu"
    names = {t.name for t in result.kernel_times}
    assert names == {k.func for k in result.kernels}
    assert all(t.calls == 1 and t.min_ms <= t.median_ms <= t.max_ms for t in result.kernel_times)
    assert abs(sum(t.share for t in result.kernel_times) - 1) < 1e-6
    assert result.latency.median_ms > 0 and result.onnxruntime_latency.median_ms > 0


def test_cpu_kernels_get_a_parallel_schedule(fire):
    _, result, _ = fire
    for k in result.kernels:
        assert "T.parallel" in result.module[k.func].script(), k.func


def test_mismatch_names_the_first_bad_kernel(monkeypatch):
    """Break one scheduled kernel on purpose: verification fails and names it."""
    import tvm
    from tvm import tirx

    import engine.targets as targets

    spec = targets.TARGETS["llvm"]
    original = type(spec).schedule

    def broken_schedule(mod, target):
        mod = original(spec, mod, target)
        victim = next(gv for gv, f in mod.functions_items()
                      if isinstance(f, tirx.PrimFunc) and "expand3x3" not in gv.name_hint
                      and gv.name_hint.startswith("fused_conv2d2"))
        func = mod[victim]
        # Scale the output by 2: replace the body's stores through a simple rewrite.
        script = func.script().replace("T.max(", "T.float32(2) * T.max(", 1)
        assert script != func.script()
        path = __import__("tempfile").mktemp(suffix=".py")
        open(path, "w").write("from tvm.script import tirx as T\n" + script)
        import importlib.util
        spec_ = importlib.util.spec_from_file_location("broken_kernel", path)
        module = importlib.util.module_from_spec(spec_)
        spec_.loader.exec_module(module)
        mod[victim] = module.main.with_attr("global_symbol", victim.name_hint)
        return mod

    monkeypatch.setattr(spec.__class__, "schedule", lambda self, mod, target: broken_schedule(mod, target))
    session = Session(str(SAMPLES / "fire_module.onnx"))
    with pytest.raises(CompileError, match=r"DIFFERS from onnxruntime.*first kernel whose output differs: fused_conv2d2"):
        session.compile(CompileOptions(runs=2))


def test_compile_cli_writes_report(cli, tmp_path):
    out = tmp_path / "o"
    res = cli("compile", "inception_block", "--out", str(out), "--runs", "3")
    assert res.returncode == 0, res.stderr
    data = json.loads((out / "report.json").read_text())
    assert data["verification"]["passed"] and data["launches_per_inference"] == 8
    assert {k["name"] for k in data["kernels"]} == {t["name"] for t in data["kernel_times"]}
    assert [s["name"] for s in data["stages"]] == [s.value for s in STAGES]
    assert (out / "model.so").stat().st_size > 0
    assert (out / "timing.svg").read_text().rstrip().endswith("</svg>")
    assert (out / "timing.png").read_bytes()[:4] == b"\x89PNG"
    assert "launches per inference" in res.stdout and "Traceback" not in res.stderr


def test_failed_compile_leaves_no_report(cli, tmp_path):
    out = tmp_path / "o"
    res = cli("compile", "inception_block", "--out", str(out), "--target", "nope")
    assert res.returncode == 2 and not (out / "report.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["zoo:squeezenet", "zoo:inception_v1"])
def test_zoo_models_verify_and_list_every_kernel(name):
    session = Session(name)
    result = session.compile(CompileOptions(runs=5))
    assert result.verification.passed
    assert {t.name for t in result.kernel_times} == {k.func for k in result.kernels}
    covered = {o for k in result.kernels for o in k.ops}
    assert covered >= {n.id for n in session.graph.nodes if n.op == "Conv"}


def test_cuda_compile_exports_and_verifies_by_emulation(cli, tmp_path):
    out = tmp_path / "c"
    res = cli("compile", "fire_module", "--target", "cuda", "--out", str(out))
    assert res.returncode == 0, res.stderr
    data = json.loads((out / "report.json").read_text())
    assert data["ran_on"] == "host emulation" and data["verification"]["passed"]
    assert any(n.startswith("nvcc compiled 4 CUDA kernels for sm_90") for n in data["notes"])
    assert data["kernel_times"] == [] and data["latency"] is None  # no device: no invented timings
    assert (out / "model.so").stat().st_size > 0


@pytest.mark.slow
def test_inception_v1_cuda_compile(cli, tmp_path):
    res = cli("compile", "zoo:inception_v1", "--target", "cuda", "--out", str(tmp_path))
    assert res.returncode == 0, res.stderr
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["verification"]["passed"] and data["ran_on"] == "host emulation"
