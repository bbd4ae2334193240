"""Inference Dropout is the identity (engine/converters/dropout.py): it adds no kernel output
and no work to its producer's kernel, whose operators stay its producer's."""

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from engine.events import CompileOptions
from engine.session import Session


def _fc_relu_dropout(tmp_path, mask: bool) -> str:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((256, 128)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(128).astype(np.float32), "b")
    ratio = numpy_helper.from_array(np.array(0.5, np.float32), "ratio")
    outs = ["y", "mask"] if mask else ["y"]
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["fc"], name="fc"),
             helper.make_node("Relu", ["fc"], ["r"], name="relu"),
             helper.make_node("Dropout", ["r", "ratio"], outs, name="drop")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 256])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 128])]
                              + ([helper.make_tensor_value_info("mask", onnx.TensorProto.BOOL, [1, 128])]
                                 if mask else []), [w, b, ratio])
    path = tmp_path / "fc.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), path)
    return str(path)


@pytest.mark.parametrize("mask", [False, True])
def test_inference_dropout_leaves_the_matmul_kernel_alone(tmp_path, mask):
    # relax's nn.dropout made its float mask of ones a second output of the matmul's kernel,
    # which no matmul rule took (alexnet's fc6: 140 ms instead of 4)
    session = Session(_fc_relu_dropout(tmp_path, mask))
    result = session.compile(CompileOptions(timing=False))
    assert result.verification.passed
    labels = {session.graph.node(o).label: k.func for k in result.kernels for o in k.ops}
    assert labels["fc"] == labels["relu"] and "drop" not in labels  # the relu is not the dropout's
    assert labels["fc"].endswith("_prepacked"), labels  # the matmul rule scheduled it
