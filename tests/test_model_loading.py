import numpy as np
import onnx
import onnxruntime as ort
import pytest

from engine.errors import ModelLoadError, UnsupportedOpError
from engine.model import load_model, zoo_names
from tests.conftest import SAMPLES


def test_zoo_lists_the_light_models():
    names = zoo_names()
    assert {"inception_v1", "squeezenet", "resnet50", "densenet121"} <= set(names)


@pytest.mark.parametrize("name", ["squeezenet", "inception_v1", "shufflenet"])
def test_zoo_weights_become_random_initializers(name):
    model = load_model(f"zoo:{name}")
    ops = {n.op_type for n in model.proto.graph.node}
    assert "ConstantOfShape" not in ops
    assert model.weights_replaced > 0
    assert [i.name for i in model.inputs] == [model.proto.graph.input[0].name]  # only real data left
    sess = ort.InferenceSession(model.proto.SerializeToString(), providers=["CPUExecutionProvider"])
    a = sess.run(None, model.random_inputs(0))[0]
    b = sess.run(None, model.random_inputs(1))[0]
    assert np.isfinite(a).all() and a.std() > 0
    assert not np.allclose(a, b)  # outputs depend on the data: weights are not all equal


def test_seeded_weights_are_reproducible():
    a = load_model("zoo:squeezenet", seed=3).proto.graph.initializer
    b = load_model("zoo:squeezenet", seed=3).proto.graph.initializer
    assert [x.raw_data for x in a] == [y.raw_data for y in b]


def test_missing_file():
    with pytest.raises(ModelLoadError, match="model file not found: nope.onnx"):
        load_model("nope.onnx")


def test_unknown_zoo_name():
    with pytest.raises(ModelLoadError, match="unknown zoo model 'alexnet9'"):
        load_model("zoo:alexnet9")


def test_dynamic_shape_needs_override(tmp_path):
    model = onnx.load(SAMPLES / "fire_module.onnx")
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    path = tmp_path / "dyn.onnx"
    onnx.save(model, path)
    # the suggested shape keeps the static dims (it said 1,1,1,1, which the model does not take)
    with pytest.raises(ModelLoadError, match=r"input 'input' has dynamic dimensions \['N'\].*--shape input=1,96,28,28$"):
        load_model(str(path))
    fixed = load_model(str(path), {"input": (2, 96, 28, 28)})
    assert fixed.inputs[0].shape == (2, 96, 28, 28)


def test_unsupported_op_is_named(tmp_path):
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4])
    node = onnx.helper.make_node("Celu", ["x"], ["h"], name="celu0")
    node2 = onnx.helper.make_node("MelWeightMatrix", [], [], name="mel")  # not converted by TVM
    graph = onnx.helper.make_graph([node, onnx.helper.make_node("Relu", ["h"], ["y"])], "g", [x], [y])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)], ir_version=8)
    from tvm.relax.frontend.onnx.onnx_frontend import _get_convert_map
    from engine.converters import CONVERTERS  # ours: Celu since the conformance work

    missing = next(op for op in ("Celu", "Hardmax", "DFT", "STFT", "LSTM")
                   if op not in _get_convert_map() and op not in CONVERTERS)
    model.graph.node[0].op_type = missing
    del node2
    path = tmp_path / "u.onnx"
    onnx.save(model, path)
    with pytest.raises(UnsupportedOpError, match=f"unsupported op for the TVM ONNX frontend: {missing} \\(node 'celu0'\\)"):
        load_model(str(path))


def test_an_ir_version_onnxruntime_cannot_read_is_lowered_to_one_it_reads(tmp_path):
    from engine.model import _reference_reads

    if _reference_reads(onnx.IR_VERSION):
        pytest.skip(f"this onnxruntime reads onnx's newest IR version ({onnx.IR_VERSION})")
    model = onnx.load(SAMPLES / "fire_module.onnx")
    model.ir_version = onnx.IR_VERSION
    path = tmp_path / "new.onnx"
    onnx.save(model, path)
    loaded = load_model(str(path))
    assert loaded.proto.ir_version < onnx.IR_VERSION and _reference_reads(loaded.proto.ir_version)
    ort.InferenceSession(loaded.reference.SerializeToString(), providers=["CPUExecutionProvider"])


def test_an_opset_onnxruntime_does_not_support_fails_before_any_work(tmp_path):
    from engine.events import CompileOptions
    from engine.model import _reference_opens
    from engine.session import Session

    newest = onnx.defs.onnx_opset_version()
    if _reference_opens(newest):
        pytest.skip(f"this onnxruntime supports onnx's newest opset ({newest})")
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4])
    graph = onnx.helper.make_graph([onnx.helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    path = tmp_path / "new_opset.onnx"
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", newest)]), path)
    events = []
    with pytest.raises(ModelLoadError, match=f"does not support ai.onnx opset {newest} \\(newest: \\d+\\)"):
        Session(str(path)).compile(CompileOptions(timing=False), progress=events.append)
    assert [e.stage.value for e in events] == ["import", "import"]  # start, fail: nothing built


def _save_with_external_weights(tmp_path):
    from onnx import helper, numpy_helper

    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, tmp_path / "m.onnx", save_as_external_data=True, location="m.data", size_threshold=0)
    return tmp_path / "m.onnx"


def test_weights_in_an_external_file_beside_the_model_are_read(tmp_path, monkeypatch):
    """Models over 2 GB and most Hugging Face exports keep their weights in a second file,
    named relative to the model's folder (they failed the checker: "not regular file")."""
    path = _save_with_external_weights(tmp_path)
    monkeypatch.chdir(tmp_path.parent)  # not the model's folder
    (w,) = load_model(str(path)).proto.graph.initializer
    assert onnx.numpy_helper.to_array(w)[3, 2] == 11.0


def test_a_missing_external_weights_file_is_one_line(tmp_path):
    path = _save_with_external_weights(tmp_path)
    (tmp_path / "m.data").unlink()
    with pytest.raises(ModelLoadError, match="the weights of 'w' are in an external file 'm.data', which is not there"):
        load_model(str(path))
