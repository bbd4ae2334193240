"""Models older than opset 7 are upgraded at load (engine/onnx_upgrade.py): onnxruntime runs
none of them, and TVM's frontend reads their broadcasting with opset 7's rules."""

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from engine.events import CompileOptions, Stage
from engine.model import load_model
from engine.onnx_upgrade import OLDEST_OPSET, ai_onnx_opset
from engine.session import Session
from tests.test_symbolic_shapes import _run

BUILD_ONLY = CompileOptions(timing=False, stop_after=Stage.BUILD)
TORCH_TESTS = Path(onnx.__file__).parent / "backend" / "test" / "data" / "pytorch-converted"
RNG = np.random.default_rng(0)


def _opset6(tmp_path, node, x_shape, y_shape, inits=()):
    f = onnx.TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info(node.input[0], f, x_shape)]
    inputs += [helper.make_tensor_value_info(i.name, f, i.dims) for i in inits]  # IR 3: weights are inputs
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info(node.output[0], f, y_shape)],
                              list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 6)], ir_version=3)
    path = tmp_path / "old.onnx"
    onnx.save(model, path)
    return str(path)


def test_an_opset_6_prelu_slope_is_per_channel(tmp_path):
    """Opset 6's PRelu applies a slope of C values along axis 1; onnx's converter leaves the
    [C] slope, which opset 7 would broadcast along the last axis (here a shape error)."""
    slope = np.array([0.1, 0.5, 2.0], np.float32)
    path = _opset6(tmp_path, helper.make_node("PRelu", ["x", "s"], ["y"]), [2, 3, 4, 5], [2, 3, 4, 5],
                   [numpy_helper.from_array(slope, "s")])
    model = load_model(path)
    assert model.upgraded_from == 6 and ai_onnx_opset(model.proto) == OLDEST_OPSET
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    got = _run(Session(path).compile(BUILD_ONLY).executable, {"x": x})
    np.testing.assert_allclose(got, np.where(x < 0, x * slope.reshape(1, 3, 1, 1), x), rtol=1e-6)


def test_an_opset_6_add_broadcasts_along_its_axis(tmp_path):
    """Opset 6's Add broadcast=1, axis=1 aligns [3] with axis 1 of [2, 3, 4], not the last."""
    b = RNG.standard_normal(3).astype(np.float32)
    node = helper.make_node("Add", ["x", "b"], ["y"], broadcast=1, axis=1)
    path = _opset6(tmp_path, node, [2, 3, 4], [2, 3, 4], [numpy_helper.from_array(b, "b")])
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    got = _run(Session(path).compile(BUILD_ONLY).executable, {"x": x})
    np.testing.assert_allclose(got, x + b.reshape(1, 3, 1), rtol=1e-6)


def test_an_old_torch_export_compiles_and_verifies_and_says_it_was_upgraded():
    events = []
    result = Session(str(TORCH_TESTS / "test_AvgPool2d" / "model.onnx")).compile(
        CompileOptions(timing=False, stop_after=Stage.VERIFY), progress=events.append)
    assert result.verification.passed
    imported = next(e for e in events if e.stage is Stage.IMPORT and e.message)
    assert "ai.onnx opset 6 upgraded to 7" in imported.message


def test_a_model_file_called_model_is_named_for_its_folder():
    assert load_model(str(TORCH_TESTS / "test_Softsign" / "model.onnx")).name == "test_Softsign"


@pytest.mark.parametrize("opset", [7, 13])
def test_newer_models_are_left_as_they_are(tmp_path, opset):
    f = onnx.TensorProto.FLOAT
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", f, [2])], [helper.make_tensor_value_info("y", f, [2])])
    path = tmp_path / "new.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=7), path)
    model = load_model(str(path))
    assert model.upgraded_from is None and ai_onnx_opset(model.proto) == opset


def test_an_opset_6_mul_broadcasts_a_runtime_input_along_its_axis(tmp_path):
    f = onnx.TensorProto.FLOAT
    node = helper.make_node("Mul", ["x", "s"], ["y"], broadcast=1, axis=1)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", f, [2, 3, 4]),
                                            helper.make_tensor_value_info("s", f, [3])],
                              [helper.make_tensor_value_info("y", f, [2, 3, 4])])
    path = tmp_path / "old.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 6)], ir_version=3), path)
    x, s = RNG.standard_normal((2, 3, 4)).astype(np.float32), RNG.standard_normal(3).astype(np.float32)
    got = _run(Session(str(path)).compile(BUILD_ONLY).executable, {"x": x, "s": s})
    np.testing.assert_allclose(got, x * s.reshape(1, 3, 1), rtol=1e-6)


def test_a_torch_export_s_numeric_input_names_raise_no_warning():
    """TVM's frontend warned "Renaming name 0 to input_0" onto the terminal for every torch export."""
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        Session(str(TORCH_TESTS / "test_Softsign" / "model.onnx")).compile(BUILD_ONLY)
    assert not [w for w in seen if "Renaming name" in str(w.message)]
