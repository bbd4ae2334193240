"""engine.onnx_functions: nodes the import cannot convert become their ONNX function bodies."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from engine.onnx_functions import expand_functions


def _model(op: str, opset: int, **attrs) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], name="n0", **attrs)], "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def test_an_unconvertible_op_becomes_its_body_with_the_same_values():
    model = _model("Celu", 12, alpha=2.0)
    expansion = expand_functions(model, lambda op: op != "Celu")
    assert expansion is not None and expansion.expanded == 1
    ops = [n.op_type for n in expansion.proto.graph.node]
    assert "Celu" not in ops and len(ops) > 1
    onnx.checker.check_model(expansion.proto)
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(_run(expansion.proto, x), _run(model, x), rtol=1e-6, atol=1e-6)


def test_convertible_ops_and_ops_without_a_body_stay():
    assert expand_functions(_model("Celu", 12), lambda op: True) is None
    assert expand_functions(_model("Relu", 13), lambda op: False) is None  # Relu has no body at 13


def test_a_body_whose_ops_changed_since_its_opset_is_not_used():
    """Celu's body is written at opset 12 and uses Div, redefined at 13: at 13 it stays."""
    assert expand_functions(_model("Celu", 13), lambda op: op != "Celu") is None
