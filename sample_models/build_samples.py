"""Build the small sample ONNX models used by blockwise.

Run as ``python sample_models/build_samples.py``; the ``.onnx`` files are
written next to this script.  Everything is deterministic (a seeded numpy
RNG per model, no timestamps), so re-running produces byte-identical files.

Models (all float32, opset 17, IR version 8, batch 1, static shapes, a single
graph input called ``input`` and a single graph output called ``output``):

* ``inception_block.onnx`` - GoogLeNet-style Inception module, [1,64,28,28]
* ``fire_module.onnx``     - SqueezeNet fire module, [1,96,28,28]
* ``mha_block.onnx``       - 4-head self-attention block with residual, [1,64,128]
* ``moe_block.onnx``       - two-expert gated mixture block, [1,32,128]
* ``vit_block.onnx``       - pre-norm transformer encoder block as torch exports it
  (one qkv MatMul, shape-arithmetic Reshape, Split into q/k/v, Erf GELU), [1,64,128]
* ``res2net_block.onnx``   - Res2Net block (channel Split into 4 hierarchical groups,
  Concat) with squeeze-excitation and residual, [1,64,28,28]
* ``mobilenet_block.onnx`` - MobileNetV2 inverted residuals, [1,32,28,28]
* ``lstm_block.onnx``      - one-layer LSTM over 16 steps with a linear head, as torch
  exports ``nn.LSTM(batch_first=True)``, [1,16,64]
* ``bigru_block.onnx``     - bidirectional GRU (linear_before_reset=1, as torch's), [1,16,64]
* ``shufflenet_unit.onnx`` - two ShuffleNet v2 units as torch exports them: channel shuffle
  views computed by Shape -> Gather -> Div (floor fix-up) -> Concat -> Reshape chains, [1,48,14,14]

``build_all(out_dir)`` writes all of them and returns their paths.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
PRODUCER = "blockwise.sample_models"

HERE = os.path.dirname(os.path.abspath(__file__))


class GraphBuilder:
    """Tiny helper that accumulates nodes and initializers for one graph."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: List[onnx.NodeProto] = []
        self.inits: List[onnx.TensorProto] = []

    # -- initializers -----------------------------------------------------
    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def weight(self, name: str, shape: Sequence[int], fan_in: int) -> str:
        w = self.rng.standard_normal(tuple(shape)) / math.sqrt(fan_in)
        return self.const(name, w.astype(np.float32))

    def bias(self, name: str, size: int, scale: float = 0.01) -> str:
        b = self.rng.standard_normal((size,)) * scale
        return self.const(name, b.astype(np.float32))

    # -- nodes ------------------------------------------------------------
    def node(self, op: str, inputs: Sequence[str], name: str,
             output: Optional[str] = None, **attrs) -> str:
        out = output if output is not None else name
        self.nodes.append(helper.make_node(op, list(inputs), [out], name=name, **attrs))
        return out

    def node_outputs(self, op: str, inputs: Sequence[str], name: str, n: int,
                     **attrs) -> List[str]:
        """A node with ``n`` outputs, named ``<name>_output_<i>`` as torch names them."""
        outs = [f"{name}_output_{i}" for i in range(n)]
        self.nodes.append(helper.make_node(op, list(inputs), outs, name=name, **attrs))
        return outs

    # -- composite layers -------------------------------------------------
    def conv(self, x: str, prefix: str, c_in: int, c_out: int, k: int,
             pad: int = 0) -> str:
        w = self.weight(f"{prefix}.weight", (c_out, c_in, k, k), c_in * k * k)
        b = self.bias(f"{prefix}.bias", c_out)
        return self.node("Conv", [x, w, b], f"{prefix}/conv",
                         kernel_shape=[k, k], pads=[pad] * 4, strides=[1, 1])

    def conv_relu(self, x: str, prefix: str, c_in: int, c_out: int, k: int,
                  pad: int = 0) -> str:
        y = self.conv(x, prefix, c_in, c_out, k, pad)
        return self.node("Relu", [y], f"{prefix}/relu")

    def linear(self, x: str, prefix: str, d_in: int, d_out: int,
               with_bias: bool = True) -> str:
        w = self.weight(f"{prefix}.weight", (d_in, d_out), d_in)
        y = self.node("MatMul", [x, w], f"{prefix}/matmul")
        if with_bias:
            b = self.bias(f"{prefix}.bias", d_out)
            y = self.node("Add", [y, b], f"{prefix}/add")
        return y

    # -- finish -----------------------------------------------------------
    def model(self, graph_name: str, in_shape: Sequence[int], out: str,
              out_shape: Sequence[int], doc: str) -> onnx.ModelProto:
        assert out == "output", "the last node must produce the graph output 'output'"
        graph = helper.make_graph(
            self.nodes,
            graph_name,
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(in_shape))],
            [helper.make_tensor_value_info("output", TensorProto.FLOAT, list(out_shape))],
            initializer=self.inits,
            doc_string=doc,
        )
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", OPSET)],
            producer_name=PRODUCER,
            producer_version="1",
            ir_version=IR_VERSION,
        )
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
        onnx.checker.check_model(model, full_check=True)
        return model


# ---------------------------------------------------------------------------
# Model definitions
# ---------------------------------------------------------------------------

def make_inception_block() -> onnx.ModelProto:
    g = GraphBuilder(seed=1001)
    x = "input"
    c = 64
    b1 = g.conv_relu(x, "branch1x1", c, 32, 1)

    b2 = g.conv_relu(x, "branch3x3_reduce", c, 24, 1)
    b2 = g.conv_relu(b2, "branch3x3", 24, 32, 3, pad=1)

    b3 = g.conv_relu(x, "branch5x5_reduce", c, 8, 1)
    b3 = g.conv_relu(b3, "branch5x5", 8, 16, 5, pad=2)

    b4 = g.node("MaxPool", [x], "branch_pool/maxpool",
                kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    b4 = g.conv_relu(b4, "branch_pool_proj", c, 16, 1)

    y = g.node("Concat", [b1, b2, b3, b4], "concat/concat", output="output", axis=1)
    return g.model("inception_block", [1, 64, 28, 28], y, [1, 96, 28, 28],
                   "Inception module: 1x1 | 1x1->3x3 | 1x1->5x5 | pool->1x1, concat on channels")


def make_fire_module() -> onnx.ModelProto:
    g = GraphBuilder(seed=1002)
    s = g.conv_relu("input", "squeeze1x1", 96, 16, 1)
    e1 = g.conv_relu(s, "expand1x1", 16, 64, 1)
    e3 = g.conv_relu(s, "expand3x3", 16, 64, 3, pad=1)
    y = g.node("Concat", [e1, e3], "concat/concat", output="output", axis=1)
    return g.model("fire_module", [1, 96, 28, 28], y, [1, 128, 28, 28],
                   "SqueezeNet fire module: squeeze 1x1 -> (expand 1x1 | expand 3x3), concat")


def make_mha_block() -> onnx.ModelProto:
    seq, hidden, heads = 64, 128, 4
    head_dim = hidden // heads
    g = GraphBuilder(seed=1003)
    x = "input"
    split_shape = g.const("heads_shape", np.array([1, seq, heads, head_dim], np.int64))
    merge_shape = g.const("merged_shape", np.array([1, seq, hidden], np.int64))
    scale = g.const("attn_scale", np.array(1.0 / math.sqrt(head_dim), np.float32))

    def heads_of(name: str, perm: List[int]) -> str:
        p = g.linear(x, f"{name}_proj", hidden, hidden)
        r = g.node("Reshape", [p, split_shape], f"{name}_proj/reshape")
        return g.node("Transpose", [r], f"{name}_proj/transpose", perm=perm)

    q = heads_of("q", [0, 2, 1, 3])  # [1,4,64,32]
    k = heads_of("k", [0, 2, 3, 1])  # [1,4,32,64]  (K^T)
    v = heads_of("v", [0, 2, 1, 3])  # [1,4,64,32]

    s = g.node("MatMul", [q, k], "attn/qk_matmul")          # [1,4,64,64]
    s = g.node("Mul", [s, scale], "attn/scale")
    p = g.node("Softmax", [s], "attn/softmax", axis=-1)
    c = g.node("MatMul", [p, v], "attn/pv_matmul")          # [1,4,64,32]
    c = g.node("Transpose", [c], "attn/transpose", perm=[0, 2, 1, 3])  # [1,64,4,32]
    c = g.node("Reshape", [c, merge_shape], "attn/reshape")  # [1,64,128]
    o = g.linear(c, "out_proj", hidden, hidden)
    y = g.node("Add", [o, x], "residual/add", output="output")
    return g.model("mha_block", [1, seq, hidden], y, [1, seq, hidden],
                   "Multi-head self-attention (4 heads x 32) with output projection and residual")


def make_moe_block() -> onnx.ModelProto:
    tokens, hidden, ffn, n_exp = 32, 128, 256, 2
    g = GraphBuilder(seed=1004)
    x = "input"

    gate_logits = g.linear(x, "gate", hidden, n_exp, with_bias=False)
    gate = g.node("Softmax", [gate_logits], "gate/softmax", axis=-1)  # [1,32,2]

    axes = g.const("gate_slice.axes", np.array([2], np.int64))

    # expert 0: MatMul -> Relu -> MatMul
    h0 = g.linear(x, "expert0/fc1", hidden, ffn, with_bias=False)
    h0 = g.node("Relu", [h0], "expert0/relu")
    e0 = g.linear(h0, "expert0/fc2", ffn, hidden, with_bias=False)

    # expert 1: MatMul -> SiLU (x * sigmoid(x)) -> MatMul
    h1 = g.linear(x, "expert1/fc1", hidden, ffn, with_bias=False)
    sg = g.node("Sigmoid", [h1], "expert1/sigmoid")
    h1 = g.node("Mul", [h1, sg], "expert1/silu_mul")
    e1 = g.linear(h1, "expert1/fc2", ffn, hidden, with_bias=False)

    weighted = []
    for i, e in enumerate((e0, e1)):
        st = g.const(f"gate_slice{i}.starts", np.array([i], np.int64))
        en = g.const(f"gate_slice{i}.ends", np.array([i + 1], np.int64))
        gi = g.node("Slice", [gate, st, en, axes], f"combine/gate{i}_slice")  # [1,32,1]
        weighted.append(g.node("Mul", [e, gi], f"combine/expert{i}_scale"))
    y = g.node("Add", weighted, "combine/add", output="output")
    return g.model("moe_block", [1, tokens, hidden], y, [1, tokens, hidden],
                   "Two-expert soft MoE: softmax gate, ReLU-MLP and SiLU-MLP experts, gated sum")


def make_vit_block() -> onnx.ModelProto:
    """Pre-norm ViT encoder block in the shape torch.onnx.export gives it (timm's Block):
    views are Reshapes whose target shape is computed from ``Shape`` by Gather/Unsqueeze/
    Concat, ``qkv.unbind(0)`` is a Split + Squeeze, q is scaled before ``q @ k^T`` (as
    timm's Attention does), GELU is the exact Erf form."""
    seq, dim, heads, mlp = 64, 128, 4, 256
    head_dim = dim // heads
    g = GraphBuilder(seed=1005)
    x = "input"

    def layer_norm(v: str, prefix: str) -> str:
        scale = g.const(f"{prefix}.weight", (1.0 + 0.1 * g.rng.standard_normal(dim)).astype(np.float32))
        shift = g.bias(f"{prefix}.bias", dim, scale=0.1)
        return g.node("LayerNormalization", [v, scale, shift], f"{prefix}/LayerNormalization",
                      axis=-1, epsilon=1e-5)

    def linear(v: str, prefix: str, d_in: int, d_out: int) -> str:
        w = g.weight(f"{prefix}.weight", (d_in, d_out), d_in)
        b = g.bias(f"{prefix}.bias", d_out)
        y = g.node("MatMul", [v, w], f"{prefix}/MatMul")
        return g.node("Add", [y, b], f"{prefix}/Add")

    def const_i64(name: str, values) -> str:
        return g.const(name, np.array(values, np.int64))

    def index(name: str, i: int) -> str:  # a 0-d index: Gather then yields a scalar
        g.inits.append(numpy_helper.from_array(np.array(i, np.int64), name))
        return name

    h = layer_norm(x, "norm1")
    # B, N, C = x.shape
    shape = g.node("Shape", [h], "attn/Shape")
    dims = [g.node("Gather", [shape, index(f"attn/Constant_{i}", i)], f"attn/Gather_{i}", axis=0)
            for i in range(3)]
    axes0 = const_i64("attn/axes_0", [0])
    b, n, c = (g.node("Unsqueeze", [d, axes0], f"attn/Unsqueeze_{i}") for i, d in enumerate(dims))
    # self.qkv(x).reshape(B, N, 3, heads, head_dim).permute(2, 0, 3, 1, 4)
    qkv = linear(h, "attn/qkv", dim, 3 * dim)
    tail = const_i64("attn/qkv_shape_tail", [3, heads, head_dim])
    qkv_shape = g.node("Concat", [b, n, tail], "attn/Concat", axis=0)
    qkv = g.node("Reshape", [qkv, qkv_shape], "attn/Reshape")            # [1,64,3,4,32]
    qkv = g.node("Transpose", [qkv], "attn/Transpose", perm=[2, 0, 3, 1, 4])  # [3,1,4,64,32]
    # q, k, v = qkv.unbind(0)
    parts = g.node_outputs("Split", [qkv, const_i64("attn/split", [1, 1, 1])], "attn/Split", 3, axis=0)
    q, k, v = (g.node("Squeeze", [p, axes0], f"attn/Squeeze_{i}") for i, p in enumerate(parts))
    # q = q * scale; attn = q @ k.transpose(-2, -1); softmax; @ v   (timm's Attention)
    scale = g.const("attn/scale", np.array(1.0 / math.sqrt(head_dim), np.float32))
    q = g.node("Mul", [q, scale], "attn/Mul")
    kt = g.node("Transpose", [k], "attn/Transpose_1", perm=[0, 1, 3, 2])
    s = g.node("MatMul", [q, kt], "attn/MatMul")                         # [1,4,64,64]
    p = g.node("Softmax", [s], "attn/Softmax", axis=-1)
    o = g.node("MatMul", [p, v], "attn/MatMul_1")                        # [1,4,64,32]
    # .transpose(1, 2).reshape(B, N, C)
    o = g.node("Transpose", [o], "attn/Transpose_2", perm=[0, 2, 1, 3])
    out_shape = g.node("Concat", [b, n, c], "attn/Concat_1", axis=0)
    o = g.node("Reshape", [o, out_shape], "attn/Reshape_1")
    o = linear(o, "attn/proj", dim, dim)
    x1 = g.node("Add", [x, o], "residual1/Add")

    h = layer_norm(x1, "norm2")
    h = linear(h, "mlp/fc1", dim, mlp)
    # nn.GELU(): x * 0.5 * (1 + erf(x / sqrt(2)))
    e = g.node("Div", [h, g.const("mlp/act/sqrt2", np.array(math.sqrt(2.0), np.float32))], "mlp/act/Div")
    e = g.node("Erf", [e], "mlp/act/Erf")
    e = g.node("Add", [e, g.const("mlp/act/one", np.array(1.0, np.float32))], "mlp/act/Add")
    e = g.node("Mul", [h, e], "mlp/act/Mul")
    e = g.node("Mul", [e, g.const("mlp/act/half", np.array(0.5, np.float32))], "mlp/act/Mul_1")
    h = linear(e, "mlp/fc2", mlp, dim)
    y = g.node("Add", [x1, h], "residual2/Add", output="output")
    return g.model("vit_block", [1, seq, dim], y, [1, seq, dim],
                   "Pre-norm ViT encoder block (4 heads x 32, MLP 256) as exported by torch: "
                   "one qkv projection split into q/k/v, shape-arithmetic views, Erf GELU")


def make_mobilenet_block() -> onnx.ModelProto:
    """MobileNetV2 inverted residual, twice, as torch exports it with BatchNorm folded:
    1x1 expand -> Clip(0, 6), 3x3 depthwise (group = channels) -> Clip, 1x1 project, residual Add.
    The depthwise -> pointwise pairs are the block-level fusion candidates of mobile nets."""
    g = GraphBuilder(seed=1006)
    lo, hi = g.const("relu6.min", np.array(0.0, np.float32)), g.const("relu6.max", np.array(6.0, np.float32))
    x, c, expand = "input", 32, 6

    def relu6(y: str, name: str) -> str:
        return g.node("Clip", [y, lo, hi], name)

    for i in range(2):
        p = f"block{i}"
        h = relu6(g.conv(x, f"{p}/expand", c, c * expand, 1), f"{p}/expand/relu6")
        w = g.weight(f"{p}/dw.weight", (c * expand, 1, 3, 3), 9)
        b = g.bias(f"{p}/dw.bias", c * expand)
        h = g.node("Conv", [h, w, b], f"{p}/dw/conv", kernel_shape=[3, 3], pads=[1] * 4, strides=[1, 1],
                   group=c * expand)
        h = relu6(h, f"{p}/dw/relu6")
        h = g.conv(h, f"{p}/project", c * expand, c, 1)
        x = g.node("Add", [x, h], f"{p}/add", output="output" if i == 1 else None)
    return g.model("mobilenet_block", [1, 32, 28, 28], x, [1, 32, 28, 28],
                   "MobileNetV2 inverted residual x2: 1x1 expand, 3x3 depthwise, 1x1 project, add")


def make_res2net_block() -> onnx.ModelProto:
    """Res2Net bottleneck: 1x1 conv, Split into 4 channel groups, group 0 passed through,
    group i > 0 is relu(conv3x3(split_i + out_{i-1})), Concat, 1x1 conv, squeeze-excitation
    and the residual Add."""
    c, width, scales, hw, se = 64, 64, 4, 28, 16
    gw = width // scales
    g = GraphBuilder(seed=1006)
    h = g.conv_relu("input", "conv1", c, width, 1)
    parts = g.node_outputs("Split", [h, g.const("split/sizes", np.array([gw] * scales, np.int64))],
                           "split/Split", scales, axis=1)
    outs = [parts[0]]
    for i in range(1, scales):
        v = g.node("Add", [parts[i], outs[-1]], f"group{i}/add")
        outs.append(g.conv_relu(v, f"group{i}", gw, gw, 3, pad=1))
    h = g.node("Concat", outs, "concat/concat", axis=1)
    h = g.conv(h, "conv3", width, c, 1)
    s = g.node("GlobalAveragePool", [h], "se/avgpool")
    s = g.conv_relu(s, "se/fc1", c, se, 1)
    s = g.conv(s, "se/fc2", se, c, 1)
    s = g.node("Sigmoid", [s], "se/sigmoid")
    h = g.node("Mul", [h, s], "se/scale")
    y = g.node("Add", [h, "input"], "residual/add", output="output")
    return g.model("res2net_block", [1, c, hw, hw], y, [1, c, hw, hw],
                   "Res2Net block (4 scales x 16 channels, hierarchical 3x3 convs) with "
                   "squeeze-excitation and residual")


def _rnn_weights(g: GraphBuilder, prefix: str, gates: int, dirs: int, d_in: int, hidden: int) -> List[str]:
    """W, R, B of an ONNX LSTM/GRU node, uniform(-1/sqrt(hidden), 1/sqrt(hidden)) as torch initialises them."""
    bound = 1.0 / math.sqrt(hidden)

    def uniform(name: str, shape) -> str:
        return g.const(name, g.rng.uniform(-bound, bound, shape).astype(np.float32))

    return [uniform(f"{prefix}.W", (dirs, gates * hidden, d_in)),
            uniform(f"{prefix}.R", (dirs, gates * hidden, hidden)),
            uniform(f"{prefix}.B", (dirs, 2 * gates * hidden))]


def make_lstm_block() -> onnx.ModelProto:
    """``nn.LSTM(64, 64, batch_first=True)`` then ``nn.Linear(64, 64)``, as torch exports them:
    Transpose to time-major, LSTM, Squeeze the direction axis, Transpose back, MatMul + Add.
    blockwise hoists the input projections of the four gates out of the recurrence: four
    matmuls reading the same input, a parallel group."""
    seq, dim, hidden = 16, 64, 64
    g = GraphBuilder(seed=1007)
    x = g.node("Transpose", ["input"], "lstm/Transpose", perm=[1, 0, 2])  # [16,1,64]
    y = g.node_outputs("LSTM", [x, *_rnn_weights(g, "lstm", 4, 1, dim, hidden)], "lstm/LSTM", 3,
                       hidden_size=hidden)[0]  # Y [16,1,1,64]
    y = g.node("Squeeze", [y, g.const("lstm/axes", np.array([1], np.int64))], "lstm/Squeeze")  # [16,1,64]
    y = g.node("Transpose", [y], "lstm/Transpose_1", perm=[1, 0, 2])  # [1,16,64]
    y = g.node("MatMul", [y, g.weight("head.weight", (hidden, dim), hidden)], "head/matmul")
    y = g.node("Add", [y, g.bias("head.bias", dim)], "head/add", output="output")
    return g.model("lstm_block", [1, seq, dim], "output", [1, seq, dim],
                   "One-layer LSTM (16 steps, hidden 64) with a linear head, as exported by torch")


def make_bigru_block() -> onnx.ModelProto:
    """``nn.GRU(64, 32, batch_first=True, bidirectional=True)`` as torch exports it
    (linear_before_reset=1): Y [seq, 2, batch, 32] -> Transpose -> Reshape [seq, batch, 64]
    -> Transpose back to batch-first. Six gate projections (three per direction) read the input."""
    seq, dim, hidden = 16, 64, 32
    g = GraphBuilder(seed=1008)
    x = g.node("Transpose", ["input"], "gru/Transpose", perm=[1, 0, 2])  # [16,1,64]
    y = g.node_outputs("GRU", [x, *_rnn_weights(g, "gru", 3, 2, dim, hidden)], "gru/GRU", 2,
                       hidden_size=hidden, direction="bidirectional", linear_before_reset=1)[0]  # [16,2,1,32]
    y = g.node("Transpose", [y], "gru/Transpose_1", perm=[0, 2, 1, 3])  # [16,1,2,32]
    y = g.node("Reshape", [y, g.const("gru/shape", np.array([seq, 1, 2 * hidden], np.int64))], "gru/Reshape")
    y = g.node("Transpose", [y], "gru/Transpose_2", output="output", perm=[1, 0, 2])  # [1,16,64]
    return g.model("bigru_block", [1, seq, dim], y, [1, seq, 2 * hidden],
                   "Bidirectional GRU (16 steps, hidden 32 per direction), as exported by torch")


def make_shufflenet_unit() -> onnx.ModelProto:
    """Two ShuffleNet v2 basic units as torch.onnx exports them: ``x.chunk(2, 1)``, a branch
    (1x1 conv, relu, 3x3 depthwise conv, 1x1 conv, relu) on one half, cat, then the channel
    shuffle ``x.view(b, 2, c // 2, h, w).transpose(1, 2).contiguous().view(b, -1, h, w)``
    whose view shapes come from ``x.size()``: Shape -> Gather -> Div with torch's floor-division
    fix-up (Less, Xor, Mul, Sub, Equal, Not, And, Cast) -> Unsqueeze -> Concat -> Reshape.
    Scalars are Constant nodes, as torch writes them."""
    c, hw = 48, 14
    g = GraphBuilder(seed=1009)

    def const(name: str, value) -> str:
        return g.node("Constant", [], name, value=numpy_helper.from_array(np.asarray(value), name))

    def floordiv(p: str, a: str, b: str) -> str:
        q = g.node("Div", [a, b], f"{p}/Div")
        zero = const(f"{p}/Constant_zero", np.array(0, np.int64))
        negative = g.node("Xor", [g.node("Less", [a, zero], f"{p}/Less"), g.node("Less", [b, zero], f"{p}/Less_1")],
                          f"{p}/Xor")
        remainder = g.node("Sub", [a, g.node("Mul", [q, b], f"{p}/Mul")], f"{p}/Sub")
        inexact = g.node("Not", [g.node("Equal", [remainder, zero], f"{p}/Equal")], f"{p}/Not")
        fixup = g.node("Cast", [g.node("And", [negative, inexact], f"{p}/And")], f"{p}/Cast", to=TensorProto.INT64)
        return g.node("Sub", [q, fixup], f"{p}/Sub_1")

    def view(p: str, x: str, dims, output: Optional[str] = None) -> str:
        axes = const(f"{p}/Constant_axes", np.array([0], np.int64))
        parts = [const(f"{p}/Constant_{k}", np.array([d], np.int64)) if isinstance(d, int)
                 else g.node("Unsqueeze", [d, axes], f"{p}/Unsqueeze_{k}") for k, d in enumerate(dims)]
        return g.node("Reshape", [x, g.node("Concat", parts, f"{p}/Concat", axis=0)], f"{p}/Reshape", output=output)

    x = "input"
    for u in range(2):
        p = f"/stage2/unit{u}"
        x1, x2 = g.node_outputs("Split", [x, g.const(f"{p}/split", np.array([c // 2, c // 2], np.int64))],
                                f"{p}/Split", 2, axis=1)
        h = g.conv_relu(x2, f"{p}/branch2.0", c // 2, c // 2, 1)
        w = g.weight(f"{p}/branch2.3.weight", (c // 2, 1, 3, 3), 9)
        h = g.node("Conv", [h, w, g.bias(f"{p}/branch2.3.bias", c // 2)], f"{p}/branch2.3/conv",
                   kernel_shape=[3, 3], pads=[1] * 4, strides=[1, 1], group=c // 2)
        h = g.conv_relu(h, f"{p}/branch2.5", c // 2, c // 2, 1)
        y = g.node("Concat", [x1, h], f"{p}/Concat", axis=1)
        # channel_shuffle(y, 2)
        shape = g.node("Shape", [y], f"{p}/shuffle/Shape")
        b, ch, hh, ww = (g.node("Gather", [shape, const(f"{p}/shuffle/Constant_{k}", np.array(k, np.int64))],
                                f"{p}/shuffle/Gather_{k}", axis=0) for k in range(4))
        per_group = floordiv(f"{p}/shuffle", ch, const(f"{p}/shuffle/Constant_groups", np.array(2, np.int64)))
        v = view(f"{p}/shuffle/view", y, [b, 2, per_group, hh, ww])
        t = g.node("Transpose", [v], f"{p}/shuffle/Transpose", perm=[0, 2, 1, 3, 4])
        x = view(f"{p}/shuffle/view_1", t, [b, -1, hh, ww], output="output" if u == 1 else None)
    return g.model("shufflenet_unit", [1, c, hw, hw], x, [1, c, hw, hw],
                   "Two ShuffleNet v2 units with torch-exported channel shuffles (shape-arithmetic views)")


def make_bert_encoder(layers: int = 2, seq: int = 128, dim: int = 768, heads: int = 12,
                      ffn: int = 3072) -> onnx.ModelProto:
    """BERT-base's encoder layers (post-norm; hidden 768, 12 heads, FFN 3072, exact Erf GELU),
    two of them at sequence length 128, as HuggingFace's BertLayer exports: separate q/k/v
    projections reading one input (a parallel group), heads split by Reshape + Transpose.
    57 MB of weights: generated on first use (GENERATED), not committed."""
    g = GraphBuilder(seed=1010)
    hd = dim // heads
    x = "input"

    def ln(v: str, p: str, output: Optional[str] = None) -> str:
        s = g.const(f"{p}.weight", (1.0 + 0.1 * g.rng.standard_normal(dim)).astype(np.float32))
        b = g.bias(f"{p}.bias", dim, scale=0.1)
        return g.node("LayerNormalization", [v, s, b], f"{p}/LayerNormalization", output=output, axis=-1,
                      epsilon=1e-12)

    def lin(v: str, p: str, d_in: int, d_out: int) -> str:
        w, b = g.weight(f"{p}.weight", (d_in, d_out), d_in), g.bias(f"{p}.bias", d_out)
        return g.node("Add", [g.node("MatMul", [v, w], f"{p}/MatMul"), b], f"{p}/Add")

    heads_shape = g.const("heads_shape", np.array([1, seq, heads, hd], np.int64))
    merged = g.const("merged_shape", np.array([1, seq, dim], np.int64))
    scale = g.const("attn_scale", np.array(1.0 / math.sqrt(hd), np.float32))
    for l in range(layers):
        p = f"layer{l}"

        def split_heads(t: str, name: str, perm: List[int]) -> str:
            r = g.node("Reshape", [t, heads_shape], f"{p}/attention/{name}/Reshape")
            return g.node("Transpose", [r], f"{p}/attention/{name}/Transpose", perm=perm)
        q = split_heads(lin(x, f"{p}/attention/query", dim, dim), "query", [0, 2, 1, 3])
        k = split_heads(lin(x, f"{p}/attention/key", dim, dim), "key", [0, 2, 3, 1])
        v = split_heads(lin(x, f"{p}/attention/value", dim, dim), "value", [0, 2, 1, 3])
        s = g.node("MatMul", [q, k], f"{p}/attention/scores/MatMul")
        s = g.node("Mul", [s, scale], f"{p}/attention/scores/Mul")
        a = g.node("Softmax", [s], f"{p}/attention/Softmax", axis=-1)
        o = g.node("MatMul", [a, v], f"{p}/attention/context/MatMul")
        o = g.node("Transpose", [o], f"{p}/attention/context/Transpose", perm=[0, 2, 1, 3])
        o = g.node("Reshape", [o, merged], f"{p}/attention/context/Reshape")
        o = lin(o, f"{p}/attention/output", dim, dim)
        x = ln(g.node("Add", [o, x], f"{p}/attention/residual/Add"), f"{p}/attention/output/LayerNorm")
        h = lin(x, f"{p}/intermediate", dim, ffn)
        e = g.node("Div", [h, g.const(f"{p}/sqrt2", np.array(math.sqrt(2.0), np.float32))], f"{p}/gelu/Div")
        e = g.node("Erf", [e], f"{p}/gelu/Erf")
        e = g.node("Add", [e, g.const(f"{p}/one", np.array(1.0, np.float32))], f"{p}/gelu/Add")
        e = g.node("Mul", [h, e], f"{p}/gelu/Mul")
        e = g.node("Mul", [e, g.const(f"{p}/half", np.array(0.5, np.float32))], f"{p}/gelu/Mul_1")
        h = lin(e, f"{p}/output", ffn, dim)
        x = ln(g.node("Add", [h, x], f"{p}/output/residual/Add"), f"{p}/output/LayerNorm",
               output="output" if l == layers - 1 else None)
    return g.model("bert_encoder", [1, seq, dim], "output", [1, seq, dim],
                   f"BERT-base-like encoder: {layers} layers, seq {seq}, hidden {dim}, {heads} heads, FFN {ffn}")


def make_decoder_block() -> onnx.ModelProto:
    """A U-Net / FCN decoder's upsampling as torch exports ``nn.ConvTranspose2d(k=4, stride=2,
    padding=1)``: 64 -> 32 -> 16 channels, 28x28 -> 112x112, each followed by ReLU."""
    g = GraphBuilder(seed=1011)
    x = "input"
    for i, (c_in, c_out) in enumerate([(64, 32), (32, 16)]):
        p = f"up{i}"
        w = g.weight(f"{p}.weight", (c_in, c_out, 4, 4), c_in * 4)
        b = g.bias(f"{p}.bias", c_out)
        h = g.node("ConvTranspose", [x, w, b], f"{p}/ConvTranspose", kernel_shape=[4, 4], strides=[2, 2],
                   pads=[1, 1, 1, 1])
        x = g.node("Relu", [h], f"{p}/Relu", output="output" if i == 1 else None)
    return g.model("decoder_block", [1, 64, 28, 28], x, [1, 16, 112, 112],
                   "decoder upsampling: ConvTranspose 4x4 stride 2 + ReLU, twice (64 -> 32 -> 16 channels)")


BUILDERS: Dict[str, Callable[[], onnx.ModelProto]] = {
    "inception_block": make_inception_block,
    "fire_module": make_fire_module,
    "mha_block": make_mha_block,
    "moe_block": make_moe_block,
    "vit_block": make_vit_block,
    "res2net_block": make_res2net_block,
    "mobilenet_block": make_mobilenet_block,
    "lstm_block": make_lstm_block,
    "bigru_block": make_bigru_block,
    "shufflenet_unit": make_shufflenet_unit,
    "decoder_block": make_decoder_block,
}


# Samples too large to commit, written next to the others on first use (engine.model).
GENERATED: Dict[str, Callable[[], onnx.ModelProto]] = {
    "bert_encoder": make_bert_encoder,
}


def build_generated(name: str, out_dir: Optional[str] = None) -> str:
    """Write the generated sample `name` into ``out_dir`` (default: this folder) atomically
    (a concurrent reader never sees half a file); returns its path."""
    out_dir = HERE if out_dir is None else os.fspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{name}.onnx")
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(GENERATED[name]().SerializeToString(deterministic=True))
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def build_all(out_dir: Optional[str] = None) -> List[str]:
    """Write every sample model into ``out_dir`` (default: this folder).

    Returns the list of written paths, in ``BUILDERS`` order.
    """
    out_dir = HERE if out_dir is None else os.fspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for name, fn in BUILDERS.items():
        path = os.path.join(out_dir, f"{name}.onnx")
        data = fn().SerializeToString(deterministic=True)
        with open(path, "wb") as f:
            f.write(data)
        paths.append(path)
    return paths


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    out_dir = argv[0] if argv else HERE
    for p in build_all(out_dir):
        print(f"{p}  ({os.path.getsize(p)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
