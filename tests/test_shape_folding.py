"""Torch exports with shape arithmetic (engine/onnx_folding.py, engine/model.py).

torch.onnx writes `x.view(b, 2, c // 2, h, w)` as Shape -> Gather -> Div, torch's
floor-division fix-up (Less, Xor, Mul, Sub, Equal, Not, And, Cast) -> Unsqueeze -> Concat
-> Reshape, with its constants as Constant nodes. TVM's ONNX frontend rejects such chains;
onnxruntime's constant folding turns them into initializers before Relax. The models here
are built the way torch exports them (torch is not a dependency).
"""

from collections import Counter

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import engine.pipeline as pipeline
from engine.events import CompileOptions
from engine.model import load_model
from engine.session import Session

OPTIONS = CompileOptions(runs=2, timing=False)
SHAPE_OPS = {"Shape", "Gather", "Div", "Less", "Xor", "Sub", "Mul", "Equal", "Not", "And", "Cast",
             "Unsqueeze", "Constant"}


class _Export:
    """Nodes named and wired the way torch.onnx names them (`/Op_3`, `/Op_3_output_0`)."""

    def __init__(self, seed=0):
        self.nodes, self.inits, self.rng = [], [], np.random.default_rng(seed)

    def op(self, op, inputs, outputs=None, **attrs):
        name = f"/{op}_{len(self.nodes)}"
        outputs = outputs or [f"{name}_output_0"]
        self.nodes.append(helper.make_node(op, inputs, outputs, name=name, **attrs))
        return outputs[0] if len(outputs) == 1 else outputs

    def const(self, value):
        return self.op("Constant", [], value=numpy_helper.from_array(np.asarray(value)))

    def weight(self, name, shape, scale):
        self.inits.append(numpy_helper.from_array((self.rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def conv(self, x, name, c_in, c_out, k=1, groups=1):
        w = self.weight(f"{name}.weight", (c_out, c_in // groups, k, k), (2.0 / (c_in // groups * k * k)) ** 0.5)
        b = self.weight(f"{name}.bias", (c_out,), 0.1)
        return self.op("Conv", [x, w, b], kernel_shape=[k, k], pads=[k // 2] * 4, group=groups)

    def sizes(self, x, rank=4):
        """b, c, h, w = x.size(): one Gather per dimension of one Shape."""
        shape = self.op("Shape", [x])
        return [self.op("Gather", [shape, self.const(np.array(k, np.int64))], axis=0) for k in range(rank)]

    def floordiv(self, a, b):
        """a // b as torch.onnx exports floor_divide of two int64 scalars."""
        q = self.op("Div", [a, b])
        zero = self.const(np.array(0, np.int64))
        negative = self.op("Xor", [self.op("Less", [a, zero]), self.op("Less", [b, zero])])
        remainder = self.op("Sub", [a, self.op("Mul", [q, b])])
        fixup = self.op("And", [negative, self.op("Not", [self.op("Equal", [remainder, zero])])])
        return self.op("Sub", [q, self.op("Cast", [fixup], to=TensorProto.INT64)])

    def view(self, x, dims):
        """x.view(*dims): dims are int64 scalars (kept) or Python ints (constants)."""
        axes = self.const(np.array([0], np.int64))
        parts = [self.const(np.array([d], np.int64)) if isinstance(d, int) else self.op("Unsqueeze", [d, axes])
                 for d in dims]
        return self.op("Reshape", [x, self.op("Concat", parts, axis=0)])

    def channel_shuffle(self, x, groups=2):
        """ShuffleNet: x.view(b, g, c // g, h, w).transpose(1, 2).contiguous().view(b, -1, h, w)."""
        b, c, h, w = self.sizes(x)
        per_group = self.floordiv(c, self.const(np.array(groups, np.int64)))
        t = self.op("Transpose", [self.view(x, [b, groups, per_group, h, w])], perm=[0, 2, 1, 3, 4])
        return self.view(t, [b, -1, h, w])

    def save(self, path, out, in_shape, out_shape):
        graph = helper.make_graph(self.nodes, "main_graph",
                                  [helper.make_tensor_value_info("input", TensorProto.FLOAT, in_shape)],
                                  [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape)], self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8,
                                  producer_name="pytorch")
        onnx.checker.check_model(model)
        onnx.save(model, path)
        return str(path)


def _views_model(tmp_path):
    """x.chunk(2, 1); conv on one half; cat; y = x.view(b, c // 4, 4, h * w).transpose(2, 3)
    .reshape(b, -1) -> [1, 1024]."""
    m = _Export()
    x1, x2 = m.op("Split", ["input", m.const(np.array([8, 8], np.int64))], ["x1", "x2"], axis=1)
    y = m.op("Concat", [x1, m.op("Relu", [m.conv(x2, "branch.conv", 8, 8)])], axis=1)
    b, c, h, w = m.sizes(y)
    v = m.view(y, [b, m.floordiv(c, m.const(np.array(4, np.int64))), 4, m.op("Mul", [h, w])])
    t = m.op("Transpose", [v], perm=[0, 1, 3, 2])
    m.op("Reshape", [t, m.op("Concat", [m.op("Unsqueeze", [b, m.const(np.array([0], np.int64))]),
                                        m.const(np.array([-1], np.int64))], axis=0)], ["output"])
    return m.save(tmp_path / "views.onnx", "output", [1, 16, 8, 8], [1, 1024])


def _shufflenet_unit(tmp_path):
    """A ShuffleNet v2 basic unit: chunk, (1x1 conv, relu, 3x3 depthwise, 1x1 conv, relu)
    on one half, cat, channel shuffle."""
    m = _Export()
    x1, x2 = m.op("Split", ["input", m.const(np.array([12, 12], np.int64))], ["x1", "x2"], axis=1)
    h = m.op("Relu", [m.conv(x2, "branch2.0", 12, 12)])
    h = m.conv(h, "branch2.3", 12, 12, k=3, groups=12)
    h = m.op("Relu", [m.conv(h, "branch2.5", 12, 12)])
    y = m.channel_shuffle(m.op("Concat", [x1, h], axis=1))
    m.op("Identity", [y], ["output"])
    return m.save(tmp_path / "shufflenet_unit.onnx", "output", [1, 24, 14, 14], [1, 24, 14, 14])


@pytest.mark.parametrize("build", [_views_model, _shufflenet_unit])
def test_torch_export_with_shape_arithmetic_compiles_and_verifies(build, tmp_path, monkeypatch):
    path = build(tmp_path)
    refs = []
    real = pipeline.onnxruntime_session

    def recording(model_bytes, threads):
        refs.append(Counter(n.op_type for n in onnx.load_from_string(model_bytes).graph.node))
        return real(model_bytes, threads)

    monkeypatch.setattr(pipeline, "onnxruntime_session", recording)
    session = Session(path)
    ops = Counter(n.op_type for n in session.model.proto.graph.node)
    assert not ops.keys() & {"Shape", "Gather", "Div", "Xor", "Cast", "Unsqueeze", "Constant"}
    assert ops["Reshape"] == 2 and ops["Split"] == 1
    result = session.compile(OPTIONS)
    assert result.verification.passed
    # onnxruntime's reference ran the model as exported, shape chains and all
    assert refs and all(r["Shape"] == 1 and r["Xor"] == 1 for r in refs)


def test_folding_keeps_every_other_operator(tmp_path):
    """Only constant folding: no Conv+BatchNormalization or MatMul+Add fusion, Dropout and
    Identity stay, node names stay; the shape chain becomes one initializer."""
    m = _Export()
    c = m.conv("input", "conv", 4, 4)
    bn = [m.weight(f"bn.{k}", (4,), 0.1) for k in ("scale", "bias", "mean")]
    var = m.weight("bn.var", (4,), 0.1)
    m.inits[-1] = numpy_helper.from_array(np.abs(numpy_helper.to_array(m.inits[-1])) + 1, var)
    y = m.op("BatchNormalization", [c, *bn, var])
    y = m.op("Identity", [m.op("Dropout", [y])])
    b, ch, h, w = m.sizes(y)
    flat = m.view(y, [b, m.op("Mul", [m.op("Mul", [ch, h]), w])])
    out = m.op("Add", [m.op("MatMul", [flat, m.weight("fc.weight", (64, 8), 0.1)]), m.weight("fc.bias", (8,), 0.1)])
    m.op("Relu", [out], ["output"])
    path = m.save(tmp_path / "keep.onnx", "output", [1, 4, 4, 4], [1, 8])
    original = onnx.load(path)
    model = load_model(path)
    kept = [(n.name, n.op_type) for n in original.graph.node if n.op_type not in SHAPE_OPS | {"Concat"}]
    assert [(n.name, n.op_type) for n in model.proto.graph.node] == kept
    assert model.folded_nodes == len(original.graph.node) - len(kept)
    assert Counter(n.op_type for n in model.reference.graph.node) == Counter(n.op_type for n in original.graph.node)
    assert Session(path).compile(OPTIONS).verification.passed


def test_models_without_shape_arithmetic_are_not_touched():
    model = load_model("zoo:inception_v1")  # constant weight reshapes: TVM folds them itself
    assert model.folded_nodes == 0 and model.reference is model.proto
