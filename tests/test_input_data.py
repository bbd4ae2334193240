"""Inputs given to verify on (`--inputs`, engine/input_data.py): read from a .npz, an ONNX
test-data folder or a .pb; checked against the model; they fix dynamic dimensions; a model
onnxruntime cannot run on random inputs says to give some."""

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from engine.errors import CompileError, ModelLoadError
from engine.events import CompileOptions, Stage
from engine.model import load_model
from engine.session import Session

EXPAND = Path(onnx.__file__).parent / "backend" / "test" / "data" / "simple" / "test_expand_shape_model1"
VERIFY = CompileOptions(timing=False, stop_after=Stage.VERIFY)


def _dynamic_relu(tmp_path):
    f = onnx.TensorProto.FLOAT
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", f, ["n", 4])],
                              [helper.make_tensor_value_info("y", f, ["n", 4])])
    path = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return str(path)


def test_a_runtime_shape_input_verifies_on_the_given_test_data():
    """Random int64 values are no shape: onnxruntime refuses them ("invalid expand shape")."""
    with pytest.raises(CompileError, match="cannot run the model on random inputs.*--inputs FILE"):
        Session(str(EXPAND / "model.onnx")).compile(VERIFY)
    result = Session(str(EXPAND / "model.onnx"), inputs_from=str(EXPAND / "test_data_set_0")).compile(VERIFY)
    assert result.verification.passed


def test_given_inputs_are_used_and_the_second_input_keeps_the_integer_ones():
    model = load_model(str(EXPAND / "model.onnx"), inputs_from=str(EXPAND / "test_data_set_0"))
    (shape_input,) = [s.name for s in model.inputs if s.dtype == "int64"]
    given = model.given[shape_input]
    assert np.array_equal(model.sample_inputs(0)[shape_input], given)
    assert np.array_equal(model.sample_inputs(0, second=True)[shape_input], given)
    (data,) = [s.name for s in model.inputs if s.dtype == "float32"]
    assert np.array_equal(model.sample_inputs(0)[data], model.given[data])
    assert not np.array_equal(model.sample_inputs(0, second=True)[data], model.given[data])


def test_a_npz_fixes_a_dynamic_dimension_and_missing_inputs_are_random(tmp_path):
    path = _dynamic_relu(tmp_path)
    np.savez(tmp_path / "in.npz", x=np.ones((3, 4), np.float32))
    model = load_model(path, inputs_from=str(tmp_path / "in.npz"))
    assert model.inputs[0].shape == (3, 4)
    empty = tmp_path / "none.npz"
    np.savez(empty)
    with pytest.raises(ModelLoadError, match="dynamic dimensions"):
        load_model(path, inputs_from=str(empty))


@pytest.mark.parametrize("arrays,message", [
    ({"z": np.ones((3, 4), np.float32)}, "'z' not an input of the model \\(its inputs: x\\)"),
    ({"x": np.ones((3, 4), np.float64)}, "'x' is float64, the model's input float32"),
])
def test_given_inputs_that_do_not_fit_are_one_line(tmp_path, arrays, message):
    path = _dynamic_relu(tmp_path)
    np.savez(tmp_path / "in.npz", **arrays)
    with pytest.raises(ModelLoadError, match=message):
        load_model(path, shapes={"x": (3, 4)}, inputs_from=str(tmp_path / "in.npz"))


def test_a_shape_other_than_the_model_s_is_refused(tmp_path):
    np.savez(tmp_path / "in.npz", x=np.ones((2, 4), np.float32))
    with pytest.raises(ModelLoadError, match="'x' has shape \\(2, 4\\), the model's input \\(3, 4\\)"):
        load_model(_dynamic_relu(tmp_path), shapes={"x": (3, 4)}, inputs_from=str(tmp_path / "in.npz"))


@pytest.mark.parametrize("name,content,message", [
    ("missing.npz", None, "no such file or folder"),
    ("broken.npz", b"not a zip", "not a .npz of arrays"),
    ("broken.pb", b"\xff\xff\xff", "not an ONNX tensor file"),
    ("x.npy", None, "one unnamed array \\(.npy\\): save a .npz by input name"),
])
def test_unreadable_inputs_are_one_line(tmp_path, name, content, message):
    if name.endswith(".npy"):
        np.save(tmp_path / name, np.ones((3, 4), np.float32))
    elif content is not None:
        (tmp_path / name).write_bytes(content)
    with pytest.raises(ModelLoadError, match=message):
        load_model(_dynamic_relu(tmp_path), shapes={"x": (3, 4)}, inputs_from=str(tmp_path / name))


def test_a_single_pb_tensor_is_read_by_its_name(tmp_path):
    tensor = numpy_helper.from_array(np.full((3, 4), 2.0, np.float32), "x")
    onnx.save_tensor(tensor, str(tmp_path / "x.pb"))
    model = load_model(_dynamic_relu(tmp_path), inputs_from=str(tmp_path / "x.pb"))
    assert model.inputs[0].shape == (3, 4) and float(model.sample_inputs(0)["x"][0, 0]) == 2.0
