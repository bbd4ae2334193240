"""ConvTranspose (engine/converters/conv_transpose.py): `output_shape` gives the pads, and a
strided 2-D one by a constant weight runs as stride x stride plain convolutions (phases)."""

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


def _model(tmp_path, x_shape, w_shape, bias=True, **attrs):
    f = onnx.TensorProto.FLOAT
    inits = [numpy_helper.from_array(RNG.standard_normal(w_shape).astype(np.float32), "w")]
    if bias:
        inits.append(numpy_helper.from_array(RNG.standard_normal(w_shape[1]).astype(np.float32), "b"))
    node = helper.make_node("ConvTranspose", ["x", "w", "b"] if bias else ["x", "w"], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", f, x_shape)],
                              [helper.make_empty_tensor_value_info("y")], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    x = RNG.standard_normal(x_shape).astype(np.float32)
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    model.graph.ClearField("output")
    model.graph.output.append(helper.make_tensor_value_info("y", f, want.shape))
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    return str(path), x, want


@pytest.mark.parametrize("x_shape,w_shape,attrs", [
    ((1, 8, 7, 6), (8, 4, 4, 4), dict(strides=[2, 2], pads=[1, 1, 1, 1])),  # a decoder's 2x upsampling
    ((1, 3, 5, 5), (3, 2, 3, 3), dict(strides=[2, 2])),  # odd kernel: phases of 2 and 1 taps
    ((2, 4, 4, 5), (4, 3, 3, 2), dict(strides=[3, 2], pads=[0, 1, 2, 0], output_padding=[1, 1])),
    ((1, 2, 3, 3), (2, 2, 3, 3), dict(strides=[3, 2], output_shape=[10, 8])),  # past the last tap
    ((1, 4, 6, 6), (4, 4, 2, 2), dict(strides=[2, 2])),  # kernel = stride: one tap a phase
])
def test_a_strided_conv_transpose_runs_as_phases_with_onnx_s_answer(tmp_path, x_shape, w_shape, attrs):
    path, x, want = _model(tmp_path, x_shape, w_shape, **attrs)
    result = Session(path).compile(BUILD_ONLY)
    assert not any("transpose" in k.func for k in result.kernels), [k.func for k in result.kernels]
    np.testing.assert_allclose(_run(result.executable, {"x": x}), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("attrs", [dict(strides=[2, 2], dilations=[2, 2]),
                                   dict(strides=[1, 1], pads=[1, 1, 1, 1])])
def test_other_conv_transposes_keep_tvm_s_form(tmp_path, attrs):
    path, x, want = _model(tmp_path, (1, 4, 5, 5), (4, 2, 3, 3), bias=False, **attrs)
    result = Session(path).compile(BUILD_ONLY)
    assert any("conv2d_transpose" in k.func for k in result.kernels)
    np.testing.assert_allclose(_run(result.executable, {"x": x}), want, rtol=1e-4, atol=1e-4)
