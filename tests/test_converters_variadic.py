"""Sum/Max/Min/Mean as chains of binary ops (engine/converters/variadic.py): the same values
as onnx's reference, with broadcasting, and a residual Sum + Relu that fuses into the conv;
nan through Max, Min (variadic.py) and Sign (elementwise.py) as onnxruntime gives it."""

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from engine.events import CompileOptions, Stage
from engine.session import Session
from tests.test_symbolic_shapes import _run

BUILD_ONLY = CompileOptions(timing=False, stop_after=Stage.BUILD)
RNG = np.random.default_rng(0)


def _save(tmp_path, nodes, inputs, inits=()):
    def info(name, shape):
        return helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, shape)

    graph = helper.make_graph(nodes, "g", [info(n, a.shape) for n, a in inputs.items()],
                              [helper.make_empty_tensor_value_info("y")], list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    (want,) = ReferenceEvaluator(model).run(None, inputs)
    model.graph.ClearField("output")
    model.graph.output.append(info("y", want.shape))
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    return str(path), want


@pytest.mark.parametrize("op", ["Sum", "Max", "Min", "Mean"])
def test_variadic_ops_broadcast_as_onnx_does(op, tmp_path):
    inputs = {"a": RNG.standard_normal((2, 3, 4)).astype(np.float32),
              "b": RNG.standard_normal((3, 1)).astype(np.float32),
              "c": RNG.standard_normal((4,)).astype(np.float32)}
    path, want = _save(tmp_path, [helper.make_node(op, list(inputs), ["y"])], inputs)
    result = Session(path).compile(BUILD_ONLY)
    np.testing.assert_allclose(_run(result.executable, inputs), want, rtol=1e-6, atol=1e-6)


def test_residual_sum_and_relu_fuse_into_the_conv(tmp_path):
    """ResNet's unit ends Conv -> Sum(conv, shortcut) -> Relu: one kernel, not a conv, a
    stack + sum and a relu."""
    x = {"x": RNG.standard_normal((1, 8, 6, 6)).astype(np.float32)}
    w = numpy_helper.from_array(RNG.standard_normal((8, 8, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Sum", ["c", "x"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    path, want = _save(tmp_path, nodes, x, [w])
    result = Session(path).compile(BUILD_ONLY)
    assert len(result.kernels) == 1 and "conv2d" in result.kernels[0].func
    np.testing.assert_allclose(_run(result.executable, x), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op", ["Max", "Min"])
def test_max_and_min_propagate_nan_whichever_side_it_is_on(op, tmp_path):
    """As onnxruntime, numpy and torch do; TVM's `a > b ? a : b` gave max(nan, 1) = 1."""
    inputs = {"a": np.array([np.nan, 1, np.nan, 2, -np.inf], np.float32),
              "b": np.array([1, np.nan, np.nan, 3, np.nan], np.float32)}
    path, _ = _save(tmp_path, [helper.make_node(op, list(inputs), ["y"])], inputs)
    got = _run(Session(path).compile(BUILD_ONLY).executable, inputs)
    want = (np.maximum if op == "Max" else np.minimum)(inputs["a"], inputs["b"])
    np.testing.assert_array_equal(got, want)


def test_sign_of_nan_is_nan(tmp_path):
    inputs = {"a": np.array([np.nan, -0.0, 3, -np.inf], np.float32)}
    path, _ = _save(tmp_path, [helper.make_node("Sign", ["a"], ["y"])], inputs)
    np.testing.assert_array_equal(_run(Session(path).compile(BUILD_ONLY).executable, inputs), np.sign(inputs["a"]))
