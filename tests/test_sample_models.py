"""Tests for the committed sample ONNX models in sample_models/.

Fast (onnx + onnxruntime only; deliberately does not import tvm).
"""

from __future__ import annotations

import collections
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from sample_models.build_samples import BUILDERS, build_all  # noqa: E402

SAMPLE_DIR = os.path.join(ROOT, "sample_models")
NAMES = list(BUILDERS)

INPUT_SHAPES = {
    "inception_block": [1, 64, 28, 28],
    "fire_module": [1, 96, 28, 28],
    "mha_block": [1, 64, 128],
    "moe_block": [1, 32, 128],
    "vit_block": [1, 64, 128],
    "res2net_block": [1, 64, 28, 28],
    "mobilenet_block": [1, 32, 28, 28],
    "lstm_block": [1, 16, 64],
    "bigru_block": [1, 16, 64],
    "shufflenet_unit": [1, 48, 14, 14],
    "decoder_block": [1, 64, 28, 28],
}
OUTPUT_SHAPES = {
    "inception_block": [1, 96, 28, 28],
    "fire_module": [1, 128, 28, 28],
    "mha_block": [1, 64, 128],
    "moe_block": [1, 32, 128],
    "vit_block": [1, 64, 128],
    "res2net_block": [1, 64, 28, 28],
    "mobilenet_block": [1, 32, 28, 28],
    "lstm_block": [1, 16, 64],
    "bigru_block": [1, 16, 64],
    "shufflenet_unit": [1, 48, 14, 14],
    "decoder_block": [1, 16, 112, 112],
}
OP_COUNTS = {
    "inception_block": {"Conv": 6, "Relu": 6, "MaxPool": 1, "Concat": 1},
    "fire_module": {"Conv": 3, "Relu": 3, "Concat": 1},
    "mha_block": {"MatMul": 6, "Add": 5, "Reshape": 4, "Transpose": 4,
                  "Mul": 1, "Softmax": 1},
    "moe_block": {"MatMul": 5, "Softmax": 1, "Relu": 1, "Sigmoid": 1,
                  "Mul": 3, "Slice": 2, "Add": 1},
    "vit_block": {"LayerNormalization": 2, "Shape": 1, "Gather": 3, "Unsqueeze": 3,
                  "Concat": 2, "MatMul": 6, "Add": 7, "Reshape": 2, "Transpose": 3,
                  "Split": 1, "Squeeze": 3, "Mul": 3, "Softmax": 1, "Div": 1, "Erf": 1},
    "mobilenet_block": {"Conv": 6, "Clip": 4, "Add": 2},
    "res2net_block": {"Conv": 7, "Relu": 5, "Split": 1, "Add": 4, "Concat": 1,
                      "GlobalAveragePool": 1, "Sigmoid": 1, "Mul": 1},
    "lstm_block": {"Transpose": 2, "LSTM": 1, "Squeeze": 1, "MatMul": 1, "Add": 1},
    "bigru_block": {"Transpose": 3, "GRU": 1, "Reshape": 1},
    # two channel shuffles of 13 shape nodes, 7 Unsqueeze and 10 Constant each, as torch writes them
    "shufflenet_unit": {"Split": 2, "Conv": 6, "Relu": 4, "Concat": 6, "Shape": 2, "Constant": 20,
                        "Gather": 8, "Div": 2, "Less": 4, "Xor": 2, "Mul": 2, "Sub": 4, "Equal": 2,
                        "Not": 2, "And": 2, "Cast": 2, "Unsqueeze": 14, "Reshape": 4, "Transpose": 2},
    "decoder_block": {"ConvTranspose": 2, "Relu": 2},
}


def _path(name: str) -> str:
    return os.path.join(SAMPLE_DIR, f"{name}.onnx")


def _load(name: str) -> onnx.ModelProto:
    return onnx.load(_path(name))


def _nodes(model: onnx.ModelProto):
    return {n.name: n for n in model.graph.node}


def _consumers(model: onnx.ModelProto, tensor: str):
    return sorted(n.name for n in model.graph.node if tensor in n.input)


def _dims(value_info) -> list:
    return [d.dim_value for d in value_info.type.tensor_type.shape.dim]


# ---------------------------------------------------------------------------
# determinism / committed files up to date
# ---------------------------------------------------------------------------

def test_build_all_regenerates_identical_files(tmp_path):
    paths = build_all(str(tmp_path))
    assert [os.path.basename(p) for p in paths] == [f"{n}.onnx" for n in NAMES]
    for p in paths:
        committed = os.path.join(SAMPLE_DIR, os.path.basename(p))
        assert os.path.exists(committed), f"{committed} missing: run sample_models/build_samples.py"
        with open(p, "rb") as f_new, open(committed, "rb") as f_old:
            assert f_new.read() == f_old.read(), (
                f"{os.path.basename(p)} is stale or non-deterministic: "
                "re-run python sample_models/build_samples.py")


# ---------------------------------------------------------------------------
# generic properties of every model
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_model_is_valid_and_runs(name):
    path = _path(name)
    assert os.path.getsize(path) < 1_000_000
    model = _load(name)
    onnx.checker.check_model(model, full_check=True)
    assert model.ir_version == 8
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 17)]

    # single static float32 input called "input", batch 1
    assert [i.name for i in model.graph.input] == ["input"]
    inp = model.graph.input[0]
    assert inp.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert _dims(inp) == INPUT_SHAPES[name]
    assert [o.name for o in model.graph.output] == ["output"]
    assert _dims(model.graph.output[0]) == OUTPUT_SHAPES[name]

    # weights are initializers, float32 (int64 only for shape/slice constants)
    for t in model.graph.initializer:
        assert t.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.INT64), t.name
    # every node has a unique, non-empty, meaningful name
    names = [n.name for n in model.graph.node]
    assert all(names) and len(set(names)) == len(names)
    assert all("/" in n for n in names)

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal(INPUT_SHAPES[name]).astype(np.float32)
    (y,) = sess.run(None, {"input": x})
    assert list(y.shape) == OUTPUT_SHAPES[name]
    assert y.dtype == np.float32
    assert np.isfinite(y).all()
    # init keeps activations O(1): neither vanishing nor exploding
    assert 0.05 < float(y.std()) < 10.0


@pytest.mark.parametrize("name", NAMES)
def test_op_counts(name):
    model = _load(name)
    counts = collections.Counter(n.op_type for n in model.graph.node)
    assert dict(counts) == OP_COUNTS[name]


# ---------------------------------------------------------------------------
# structural facts per model
# ---------------------------------------------------------------------------

def test_inception_structure():
    model = _load("inception_block")
    nodes = _nodes(model)
    # four branches fan out from the input: three 1x1 convs and the maxpool
    assert _consumers(model, "input") == [
        "branch1x1/conv", "branch3x3_reduce/conv", "branch5x5_reduce/conv",
        "branch_pool/maxpool"]
    assert nodes["branch3x3/conv"].input[0] == nodes["branch3x3_reduce/relu"].output[0]
    assert nodes["branch5x5/conv"].input[0] == nodes["branch5x5_reduce/relu"].output[0]
    assert nodes["branch_pool_proj/conv"].input[0] == nodes["branch_pool/maxpool"].output[0]
    concat = nodes["concat/concat"]
    assert list(concat.input) == [nodes[f"{b}/relu"].output[0] for b in
                                  ("branch1x1", "branch3x3", "branch5x5", "branch_pool_proj")]
    assert onnx.helper.get_attribute_value(concat.attribute[0]) == 1
    # every conv has a bias
    assert all(len(n.input) == 3 for n in model.graph.node if n.op_type == "Conv")


def test_fire_structure():
    model = _load("fire_module")
    nodes = _nodes(model)
    assert _consumers(model, "input") == ["squeeze1x1/conv"]
    squeeze_out = nodes["squeeze1x1/relu"].output[0]
    assert _consumers(model, squeeze_out) == ["expand1x1/conv", "expand3x3/conv"]
    assert list(nodes["concat/concat"].input) == [
        nodes["expand1x1/relu"].output[0], nodes["expand3x3/relu"].output[0]]


def test_mha_structure():
    model = _load("mha_block")
    nodes = _nodes(model)
    # Q, K, V projections read the same input; the residual Add reads it too
    assert _consumers(model, "input") == [
        "k_proj/matmul", "q_proj/matmul", "residual/add", "v_proj/matmul"]
    perms = {n.name: list(onnx.helper.get_attribute_value(n.attribute[0]))
             for n in model.graph.node if n.op_type == "Transpose"}
    assert perms == {"q_proj/transpose": [0, 2, 1, 3],
                     "k_proj/transpose": [0, 2, 3, 1],
                     "v_proj/transpose": [0, 2, 1, 3],
                     "attn/transpose": [0, 2, 1, 3]}
    qk = nodes["attn/qk_matmul"]
    assert list(qk.input) == ["q_proj/transpose", "k_proj/transpose"]
    assert list(nodes["attn/pv_matmul"].input) == ["attn/softmax", "v_proj/transpose"]
    softmax = nodes["attn/softmax"]
    assert onnx.helper.get_attribute_value(softmax.attribute[0]) == -1
    assert nodes["out_proj/matmul"].input[0] == "attn/reshape"
    # shape-inferred intermediate shapes are recorded in the file
    shapes = {vi.name: _dims(vi) for vi in model.graph.value_info}
    assert shapes["q_proj/transpose"] == [1, 4, 64, 32]
    assert shapes["k_proj/transpose"] == [1, 4, 32, 64]
    assert shapes["attn/qk_matmul"] == [1, 4, 64, 64]


def test_moe_structure():
    model = _load("moe_block")
    nodes = _nodes(model)
    assert _consumers(model, "input") == [
        "expert0/fc1/matmul", "expert1/fc1/matmul", "gate/matmul"]
    ops = {e: [n.op_type for n in model.graph.node if n.name.startswith(f"expert{e}/")]
           for e in (0, 1)}
    assert ops[0] == ["MatMul", "Relu", "MatMul"]
    assert ops[1] == ["MatMul", "Sigmoid", "Mul", "MatMul"]
    # SiLU: x * sigmoid(x)
    assert sorted(nodes["expert1/silu_mul"].input) == sorted(
        ["expert1/fc1/matmul", "expert1/sigmoid"])
    # both gate slices read the softmax, each expert output is scaled by its slice
    assert _consumers(model, "gate/softmax") == ["combine/gate0_slice", "combine/gate1_slice"]
    for e in (0, 1):
        assert sorted(nodes[f"combine/expert{e}_scale"].input) == sorted(
            [f"expert{e}/fc2/matmul", f"combine/gate{e}_slice"])
    assert sorted(nodes["combine/add"].input) == ["combine/expert0_scale", "combine/expert1_scale"]


def test_moe_matches_numpy_reference():
    """Independent numpy re-implementation of the MoE combine."""
    from onnx import numpy_helper
    model = _load("moe_block")
    w = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    x = np.random.default_rng(1).standard_normal([1, 32, 128]).astype(np.float32)
    logits = x @ w["gate.weight"]
    gate = np.exp(logits - logits.max(-1, keepdims=True))
    gate /= gate.sum(-1, keepdims=True)
    e0 = np.maximum(x @ w["expert0/fc1.weight"], 0) @ w["expert0/fc2.weight"]
    h1 = x @ w["expert1/fc1.weight"]
    e1 = (h1 / (1 + np.exp(-h1))) @ w["expert1/fc2.weight"]
    ref = e0 * gate[..., 0:1] + e1 * gate[..., 1:2]
    sess = ort.InferenceSession(_path("moe_block"), providers=["CPUExecutionProvider"])
    (y,) = sess.run(None, {"input": x})
    np.testing.assert_allclose(y, ref, atol=1e-4, rtol=1e-4)


def test_recurrent_structure():
    """torch's nn.LSTM / bidirectional nn.GRU exports: time-major Transpose in, weights as
    initializers of ONNX's shapes ([dirs, gates*hidden, in]), GRU with linear_before_reset=1."""
    from onnx import numpy_helper
    for name, op, gates, dirs, hidden in (("lstm_block", "LSTM", 4, 1, 64), ("bigru_block", "GRU", 3, 2, 32)):
        model = _load(name)
        w = {t.name: numpy_helper.to_array(t).shape for t in model.graph.initializer}
        (cell,) = [n for n in model.graph.node if n.op_type == op]
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in cell.attribute}
        assert attrs["hidden_size"] == hidden
        assert cell.input[0] == _nodes(model)[f"{op.lower()}/Transpose"].output[0]
        assert [w[i] for i in cell.input[1:4]] == [(dirs, gates * hidden, 64), (dirs, gates * hidden, hidden),
                                                   (dirs, 2 * gates * hidden)]
        assert attrs.get("direction", b"forward") == (b"bidirectional" if dirs == 2 else b"forward")
    assert {a.name: a.i for a in _nodes(_load("bigru_block"))["gru/GRU"].attribute}["linear_before_reset"] == 1


def test_shufflenet_views_are_computed_from_shape():
    """Every channel-shuffle Reshape's target shape is computed from a Shape node, the first
    view of each shuffle through a Div, as torch exports `x.view(b, g, c // g, h, w)` (what
    engine/onnx_folding.py folds)."""
    model = _load("shufflenet_unit")
    producer = {o: n for n in model.graph.node for o in n.output}

    def ancestor_ops(tensor):
        seen, todo = {}, [tensor]
        while todo:
            n = producer.get(todo.pop())
            if n is not None and n.name not in seen:
                seen[n.name] = n.op_type
                if n.op_type != "Shape":  # what Shape reads is data, not shape arithmetic
                    todo.extend(n.input)
        return set(seen.values())

    chains = [ancestor_ops(n.input[1]) for n in model.graph.node if n.op_type == "Reshape"]
    assert len(chains) == 4
    assert all({"Shape", "Gather", "Unsqueeze", "Concat"} <= ops for ops in chains)
    assert sum("Div" in ops for ops in chains) == 2
