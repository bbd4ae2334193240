"""`workbench inspect` as a user runs it, including every bad input the foundation handles."""

import json
import subprocess
import sys

import onnx
import pytest

from tests.conftest import ROOT, SAMPLES


def test_inspect_prints_graph_facts(cli):
    res = cli("inspect", "zoo:squeezenet")
    assert res.returncode == 0, res.stderr
    assert "operators    66   edges 73" in res.stdout
    assert "Conv 26" in res.stdout and "widest parallel levels" in res.stdout


def test_inspect_json_conv_count(cli):
    res = cli("inspect", "zoo:inception_v1", "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert sum(n["op"] == "Conv" for n in data["nodes"]) == 57
    assert {"src", "dst", "tensor"} == set(data["edges"][0])


def test_inspect_svg(cli, tmp_path):
    out = tmp_path / "g.svg"
    res = cli("inspect", str(SAMPLES / "inception_block.onnx"), "--svg", str(out))
    assert res.returncode == 0, res.stderr
    svg = out.read_text()
    assert svg.startswith("<?xml") and "</svg>" in svg
    assert "branch3x3/conv" in svg and "Conv 1x32x28x28" in svg


def _fails(res, message: str):
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr  # one line, no traceback
    assert "Traceback" not in res.stderr
    assert message in lines[0], lines[0]


def test_missing_file(cli):
    _fails(cli("inspect", "no/such/model.onnx"), "model file not found: no/such/model.onnx")


def test_non_onnx_file(cli, tmp_path):
    path = tmp_path / "notes.onnx"
    path.write_text("this is not a model\n" * 20)
    _fails(cli("inspect", str(path)), "not a valid ONNX file")


def test_truncated_file(cli, tmp_path):
    data = (SAMPLES / "inception_block.onnx").read_bytes()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: len(data) // 3])
    _fails(cli("inspect", str(path)), "not a valid ONNX file (truncated, corrupt or another format)")


def test_invalid_model(cli, tmp_path):
    model = onnx.load(SAMPLES / "fire_module.onnx")
    model.graph.node[0].input[0] = "does_not_exist"
    path = tmp_path / "bad.onnx"
    onnx.save(model, path)
    _fails(cli("inspect", str(path)), "invalid ONNX model")


def test_unsupported_op(cli, tmp_path):
    from tvm.relax.frontend.onnx.onnx_frontend import _get_convert_map
    op = next(o for o in ("Hardmax", "DFT", "STFT", "LSTM", "Celu") if o not in _get_convert_map())
    model = onnx.load(SAMPLES / "fire_module.onnx")
    model.graph.node[1].op_type = op  # squeeze1x1/relu
    path = tmp_path / "u.onnx"
    onnx.save(model, path)
    _fails(cli("inspect", str(path)), f"unsupported op for the TVM ONNX frontend: {op} (node 'squeeze1x1/relu')")


def test_dynamic_input_without_shape(cli, tmp_path):
    model = onnx.load(SAMPLES / "fire_module.onnx")
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    path = tmp_path / "dyn.onnx"
    onnx.save(model, path)
    _fails(cli("inspect", str(path)), "input 'input' has dynamic dimensions ['batch']")
    ok = cli("inspect", str(path), "--shape", "input=1,96,28,28")
    assert ok.returncode == 0, ok.stderr


def test_bad_flag(cli):
    _fails(cli("inspect", "zoo:squeezenet", "--shape", "x=1,a"), "bad --shape 'x=1,a'")
    _fails(cli("inspect", "zoo:squeezenet", "--no-such-flag"), "unrecognized arguments")
    # targets come from the engine's target table
    _fails(cli("compile", "fire_module", "--target", "bogus"), "invalid choice: 'bogus' (choose from 'llvm', 'cuda')")


def test_engine_never_imports_ui_libraries():
    code = ("import sys, engine.session, engine.model, engine.opgraph, engine.relax_import, "
            "engine.graphviz\n"
            "import pkgutil, importlib, engine\n"
            "for m in pkgutil.iter_modules(engine.__path__): importlib.import_module('engine.' + m.name)\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('workbench', 'textual', 'rich', 'matplotlib'))\n"
            "print(bad); sys.exit(1 if bad else 0)")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
