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

``build_all(out_dir)`` writes all four and returns their paths.
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


BUILDERS: Dict[str, Callable[[], onnx.ModelProto]] = {
    "inception_block": make_inception_block,
    "fire_module": make_fire_module,
    "mha_block": make_mha_block,
    "moe_block": make_moe_block,
}


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
