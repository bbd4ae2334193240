"""bench/gpu: the GPU benchmark payload (pack.py), its weight recipe (regen.py), the ONNX->torch
interpreter (onnx_torch.py) and a CPU dry run of run_gpu.py with the runtime-only TVM.

torch is not in the project venv: the torch checks run in-process when torch imports, else in
the interpreter named by BLOCKWISE_TORCH_PYTHON (a python with torch, numpy, onnx,
onnxruntime, e.g. /tmp/torchvenv/bin/python), else they are skipped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
GPU = ROOT / "bench" / "gpu"
sys.path.insert(0, str(GPU))

MIB = 1024 * 1024


def _pack(out: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(GPU / "pack.py"), "--out", str(out), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def _torch_python() -> str | None:
    """An interpreter with torch: this one, or $BLOCKWISE_TORCH_PYTHON."""
    try:
        import torch  # noqa: F401

        return sys.executable
    except ImportError:
        pass
    other = os.environ.get("BLOCKWISE_TORCH_PYTHON")
    if other and Path(other).exists():
        return other
    return None


def _check_manifest_entry(payload: Path, entry: dict) -> None:
    folder = payload / entry["dir"]
    for name in entry["files"].values():
        assert (folder / name).is_file(), name
    assert entry["launches"] == len(entry["kernels"]) > 0
    assert entry["inputs"] and all(set(i) == {"name", "shape", "dtype"} for i in entry["inputs"])
    assert entry["outputs"] and all(set(o) == {"name", "shape", "dtype"} for o in entry["outputs"])
    with np.load(folder / entry["files"]["inputs"]) as z:
        for spec in entry["inputs"]:
            assert list(z[spec["name"]].shape) == spec["shape"]
            assert z[spec["name"]].dtype.name == spec["dtype"]
    with np.load(folder / entry["files"]["reference"]) as z:
        for spec in entry["outputs"]:
            assert list(z[spec["name"]].shape) == spec["shape"]


def test_pack_fire_module_manifest_and_size(tmp_path):
    out = tmp_path / "payload"
    proc = _pack(out, "--target", "llvm", "--no-runtime", "--models", "fire_module")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "MiB total" in proc.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["target"] == "llvm" and manifest["left_out"] == []
    [entry] = manifest["models"]
    assert entry["model"] == "fire_module" and entry["spec"] == "fire_module"
    assert entry["regenerated_weights"] == []  # 46 KiB of weights: shipped as they are
    _check_manifest_entry(out, entry)
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    assert total <= manifest["limit_bytes"] == 64 * MIB
    assert total < 2 * MIB


def test_pack_leaves_out_what_does_not_fit(tmp_path):
    out = tmp_path / "payload"
    # squeezenet embeds ~4.7 MiB of weights: it cannot fit a 3 MiB limit (1 MiB margin).
    proc = _pack(out, "--target", "llvm", "--no-runtime", "--models", "fire_module,zoo:squeezenet",
                 "--limit-mib", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert [m["model"] for m in manifest["models"]] == ["fire_module"]
    assert [m["model"] for m in manifest["left_out"]] == ["zoo:squeezenet"]
    assert "MiB of weights" in manifest["left_out"][0]["reason"]


def test_regenerated_weights_round_trip():
    """pack's regeneration + strip, then run_gpu's restore, give back the exact model."""
    import onnx
    from onnx import numpy_helper

    from engine.session import Session
    from pack import regenerate_weights, strip_initializers
    from regen import restore_initializers

    model = Session("fire_module").model
    regen_model, entries = regenerate_weights(model, seed=3, min_elements=1000)
    assert len(entries) == 3  # the three conv kernels; biases are small and stay
    stripped = strip_initializers(regen_model.proto, {e["name"] for e in entries})
    shipped = onnx.ModelProto.FromString(stripped.SerializeToString())
    entries = json.loads(json.dumps(entries))  # through the manifest
    assert restore_initializers(shipped, entries) == []
    want = {i.name: numpy_helper.to_array(i) for i in regen_model.proto.graph.initializer}
    got = {i.name: numpy_helper.to_array(i) for i in shipped.graph.initializer}
    assert want.keys() == got.keys()
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])
    # Statistically like the original weights (He scaling kept).
    orig = {i.name: numpy_helper.to_array(i) for i in model.proto.graph.initializer}
    for e in entries:
        assert got[e["name"]].std() == pytest.approx(orig[e["name"]].std(), rel=0.1)
    # A tampered hash is reported.
    entries[0]["sha256"] = "0" * 64
    assert restore_initializers(onnx.ModelProto.FromString(stripped.SerializeToString()), entries) == [entries[0]["name"]]


ONNX_TORCH_MODELS = ["fire_module", "inception_block", "mha_block", "moe_block", "zoo:squeezenet"]


def test_onnx_torch_matches_onnxruntime(tmp_path):
    python = _torch_python()
    if python is None:
        pytest.importorskip("torch")
    import onnx

    from engine.session import Session

    paths = []
    for spec in ONNX_TORCH_MODELS:
        model = Session(spec).model
        path = tmp_path / f"{model.name}.onnx"
        onnx.save(model.proto, str(path))
        paths.append(str(path))
    proc = subprocess.run([python, str(GPU / "onnx_torch.py"), *paths, "--atol", "1e-4"],
                          capture_output=True, text=True, timeout=600)
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(paths), proc.stdout + proc.stderr
    for r in results:
        assert r["ok"], r
    assert proc.returncode == 0


def test_onnx_torch_names_unsupported_op():
    python = _torch_python()
    if python is None:
        pytest.importorskip("torch")
    script = f"""
import sys
sys.path.insert(0, {str(GPU)!r})
from onnx import TensorProto, helper
from onnx_torch import OnnxTorch, UnsupportedOnnxOp
graph = helper.make_graph([helper.make_node("Erf", ["x"], ["y"], name="erf0")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
try:
    OnnxTorch(helper.make_model(graph))
except UnsupportedOnnxOp as err:
    print("RAISED", err)
"""
    proc = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "RAISED" in proc.stdout and "Erf (node 'erf0')" in proc.stdout


@pytest.fixture(scope="module")
def llvm_payload(tmp_path_factory):
    """fire_module packed for llvm with a runtime-only TVM for this Python."""
    out = tmp_path_factory.mktemp("gpu_pack") / "payload"
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    proc = _pack(out, "--target", "llvm", "--python", py, "--models", "fire_module")
    if proc.returncode != 0 and "pip download failed" in proc.stdout + proc.stderr:
        pytest.skip("apache-tvm wheels neither cached in /tmp/gpu_wheels nor downloadable")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.mark.slow
def test_runtime_only_tvm_runs_exported_library(llvm_payload, tmp_path):
    manifest = json.loads((llvm_payload / "manifest.json").read_text())
    rt = manifest["runtime"]
    assert rt["bytes"] < 16 * MIB and "libtvm_compiler.so" not in str(rt)
    script = f"""
import json, sys
sys.path.insert(0, {str(GPU)!r})
from pathlib import Path
import numpy as np
import run_gpu
payload = Path({str(llvm_payload)!r})
manifest = json.loads((payload / "manifest.json").read_text())
folder = run_gpu.unpack_runtime(payload, manifest, Path({str(tmp_path)!r}))
tvm = run_gpu.import_tvm(folder)
from tvm import base
import tvm.runtime.vm
assert base._RUNTIME_ONLY, "not runtime-only"
assert Path(tvm.__file__).resolve().is_relative_to(folder.resolve()), tvm.__file__
assert not (folder / "tvm" / "lib" / "libtvm_compiler.so").exists()
entry = manifest["models"][0]
d = payload / entry["dir"]
lib = tvm.runtime.load_module(str(d / "lib.so"))
vm = tvm.runtime.vm.VirtualMachine(lib, tvm.cpu())
inputs = np.load(d / "inputs.npz")
ref = np.load(d / "reference.npz")
out = vm["main"](*[tvm.runtime.tensor(inputs[i["name"]], tvm.cpu()) for i in entry["inputs"]])
err = float(np.abs(out.numpy() - ref[entry["outputs"][0]["name"]]).max())
print(json.dumps({{"err": err, "relax_loaded": "tvm.relax" in sys.modules}}))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["err"] < 1e-4
    assert not result["relax_loaded"]


@pytest.mark.slow
def test_run_gpu_dry_run_on_cpu(llvm_payload, tmp_path):
    python = _torch_python()
    if python is None:
        pytest.skip("no python with torch (set BLOCKWISE_TORCH_PYTHON)")
    out = tmp_path / "results.json"
    proc = subprocess.run([python, str(GPU / "run_gpu.py"), "--payload", str(llvm_payload), "--device", "cpu",
                           "--out", str(out), "--runs", "5", "--warmup", "1", "--skip-compile",
                           "--runtime-cache", str(tmp_path)],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads(out.read_text())
    assert results["environment"]["tvm_runtime_only"] is True
    [rec] = results["models"]
    assert rec["model"] == "fire_module"
    assert rec["ours_vs_onnxruntime"]["ok"] and rec["eager_vs_onnxruntime"]["ok"]
    assert rec["onnxruntime_vs_pack_reference"]["max_abs_err"] < 1e-5
    assert rec["launches_ours"] == rec["launches_ours_static"] == 4
    assert rec["ours"]["median_ms"] > 0 and rec["torch_eager"]["median_ms"] > 0
    assert rec["torch_compile"] == {"skipped": "--skip-compile"}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_pack_cuda_fire_module_ships_fatbin(tmp_path):
    import hashlib

    out = tmp_path / "payload"
    proc = _pack(out, "--no-runtime", "--models", "fire_module")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["target"] == "cuda" and manifest["arch"] == "sm_90"
    [entry] = manifest["models"]
    _check_manifest_entry(out, entry)
    assert entry["cuda"]["arch"] == "sm_90a"
    fatbin = (out / entry["dir"] / entry["files"]["fatbin"]).read_bytes()
    assert len(fatbin) == entry["cuda"]["fatbin_bytes"] > 0
    # The source the loader will hand to tvm_callback_cuda_compile is in the library.
    assert entry["cuda"]["source_in_lib"] is True
    assert len(entry["cuda"]["source_sha256"]) == len(hashlib.sha256().hexdigest())
