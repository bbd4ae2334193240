"""A small ONNX -> torch interpreter: an nn.Module that runs an ONNX graph node by node.

Used by the GPU benchmark (bench/gpu/run_gpu.py) as the torch eager / torch.compile peer
of our compiled models: the SAME graph and weights, executed with torch.nn.functional
ops. Only torch, numpy and onnx are needed (no TVM, no project code), so the file can run
on the GPU machine as it is.

    from onnx_torch import OnnxTorch
    module = OnnxTorch(proto).to("cuda").eval()
    outputs = module(*input_tensors)          # a tuple, one tensor per graph output

Initializers become buffers (they move with `.to(device)`); integer initializers are also
kept as tuples of Python ints for the inputs read as shapes, axes or slice bounds, so
`torch.compile` sees constants there. Ops outside `SUPPORTED_OPS` raise `UnsupportedOnnxOp` naming the op and node
when the module is built, not at the first call.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import helper, numpy_helper

__all__ = ["OnnxTorch", "UnsupportedOnnxOp", "SUPPORTED_OPS"]


class UnsupportedOnnxOp(NotImplementedError):
    """An ONNX op (or attribute value) the interpreter does not implement."""


class Node(NamedTuple):
    """A graph node as plain Python data (dynamo cannot trace protobuf containers)."""

    op_type: str
    name: str
    input: tuple[str, ...]
    output: tuple[str, ...]


def _plain(value):
    if isinstance(value, (list, tuple)) or type(value).__name__.startswith("Repeated"):
        return [_plain(v) for v in value]
    if isinstance(value, bytes):
        return value.decode()
    return value


def _attrs(node: onnx.NodeProto) -> dict:
    return {a.name: _plain(helper.get_attribute_value(a)) for a in node.attribute}


def _pads_split(pads, spatial: int):
    """ONNX pads [b1, b2, ..., e1, e2, ...] -> (begin list, end list)."""
    pads = list(pads or [0] * (2 * spatial))
    return pads[:spatial], pads[spatial:]


def _torch_pad(begin, end):
    """F.pad wants (last-dim begin, last-dim end, previous-dim begin, ...)."""
    out = []
    for b, e in zip(reversed(begin), reversed(end)):
        out += [int(b), int(e)]
    return out


def _check_auto_pad(node, attrs):
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if auto_pad not in ("NOTSET", "VALID"):
        raise UnsupportedOnnxOp(f"{node.op_type} (node '{node.name or node.output[0]}'): "
                                f"auto_pad={auto_pad} is not supported")
    return auto_pad


def _conv_fn(rank: int):
    return {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[rank]


def _pool_fn(kind: str, rank: int):
    table = {"max": {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d},
             "avg": {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}}
    return table[kind][rank]


# --- op implementations: fn(module, node, attrs, inputs) -> list of outputs ------------------
# `inputs` are torch tensors for data and float weights, Python/numpy values for integer
# constants (see OnnxTorch._value); a missing optional input is None.


def _conv(m, node, a, x):
    data, weight = x[0], x[1]
    bias = x[2] if len(x) > 2 else None
    rank = data.dim() - 2
    auto_pad = _check_auto_pad(node, a)
    begin, end = _pads_split(a.get("pads") if auto_pad == "NOTSET" else None, rank)
    strides = a.get("strides", [1] * rank)
    dilations = a.get("dilations", [1] * rank)
    groups = a.get("group", 1)
    if begin == end:
        padding = begin
    else:
        data = F.pad(data, _torch_pad(begin, end))
        padding = [0] * rank
    return [_conv_fn(rank)(data, weight, bias, stride=strides, padding=padding,
                           dilation=dilations, groups=groups)]


def _pool(kind):
    def run(m, node, a, x):
        data = x[0]
        rank = data.dim() - 2
        auto_pad = _check_auto_pad(node, a)
        kernel = a["kernel_shape"]
        strides = a.get("strides", [1] * rank)
        begin, end = _pads_split(a.get("pads") if auto_pad == "NOTSET" else None, rank)
        ceil_mode = bool(a.get("ceil_mode", 0))
        if kind == "max":
            if a.get("dilations", [1] * rank) != [1] * rank or len(node.output) > 1:
                raise UnsupportedOnnxOp(f"MaxPool (node '{node.name or node.output[0]}'): "
                                        "dilations / Indices output are not supported")
            symmetric = begin == end and all(2 * p <= k for p, k in zip(begin, kernel))
            if not symmetric:
                data = F.pad(data, _torch_pad(begin, end), value=-math.inf)
                begin = [0] * rank
            return [_pool_fn("max", rank)(data, kernel, strides, begin, ceil_mode=ceil_mode)]
        # AveragePool: pad explicitly, divide by the number of real elements unless
        # count_include_pad=1 (ONNX default 0).
        include_pad = bool(a.get("count_include_pad", 0))
        if not any(begin) and not any(end):
            return [_pool_fn("avg", rank)(data, kernel, strides, 0, ceil_mode=ceil_mode)]
        pad = _torch_pad(begin, end)
        total = _pool_fn("avg", rank)(F.pad(data, pad), kernel, strides, 0, ceil_mode=ceil_mode)
        if include_pad:
            return [total]
        ones = torch.ones((1, 1) + tuple(data.shape[2:]), dtype=data.dtype, device=data.device)
        frac = _pool_fn("avg", rank)(F.pad(ones, pad), kernel, strides, 0, ceil_mode=ceil_mode)
        return [total / frac]
    return run


def _global_pool(kind):
    def run(m, node, a, x):
        dims = tuple(range(2, x[0].dim()))
        if kind == "avg":
            return [x[0].mean(dim=dims, keepdim=True)]
        return [x[0].amax(dim=dims, keepdim=True)]
    return run


def _gemm(m, node, a, x):
    A, B = x[0], x[1]
    C = x[2] if len(x) > 2 else None
    if a.get("transA", 0):
        A = A.t()
    if a.get("transB", 0):
        B = B.t()
    alpha, beta = a.get("alpha", 1.0), a.get("beta", 1.0)
    y = A @ B
    if alpha != 1.0:
        y = y * alpha
    if C is not None:
        y = y + (C * beta if beta != 1.0 else C)
    return [y]


def _softmax(m, node, a, x):
    data = x[0]
    if m.opset >= 13:
        return [torch.softmax(data, dim=a.get("axis", -1))]
    # opset < 13: coerce to 2D at `axis` (default 1), softmax over the flattened tail.
    axis = a.get("axis", 1) % max(data.dim(), 1)
    shape = data.shape
    flat = data.reshape(math.prod(shape[:axis]), -1)
    return [torch.softmax(flat, dim=1).reshape(shape)]


def _reshape(m, node, a, x):
    data, shape = x[0], [int(v) for v in m.const(node.input[1])]
    allowzero = a.get("allowzero", 0)
    out = [data.shape[i] if (v == 0 and not allowzero) else v for i, v in enumerate(shape)]
    return [data.reshape(out)]


def _transpose(m, node, a, x):
    perm = a.get("perm", list(reversed(range(x[0].dim()))))
    return [x[0].permute(*perm)]


def _flatten(m, node, a, x):
    axis = a.get("axis", 1)
    if axis < 0:
        axis += x[0].dim()
    lead = math.prod(x[0].shape[:axis])
    return [x[0].reshape(lead, -1)]


def _lrn(m, node, a, x):
    # ONNX: square_sum[c] = sum over c' in [c - floor((size-1)/2), c + ceil((size-1)/2)];
    # y = x / (bias + alpha / size * square_sum) ** beta.
    data = x[0]
    size = int(a["size"])
    alpha, beta, bias = a.get("alpha", 1e-4), a.get("beta", 0.75), a.get("bias", 1.0)
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = data * data
    pad = [0, 0] * (data.dim() - 2) + [lo, hi]
    padded = F.pad(sq, pad)
    channels = data.shape[1]
    square_sum = sum(padded[:, k:k + channels] for k in range(size))
    return [data / (bias + (alpha / size) * square_sum) ** beta]


def _batchnorm(m, node, a, x):
    data, scale, bias, mean, var = x[:5]
    return [F.batch_norm(data, mean, var, scale, bias, False, 0.0, a.get("epsilon", 1e-5))]


def _slice(m, node, a, x):
    data = x[0]
    if m.opset < 10:
        starts, ends = a["starts"], a["ends"]
        axes = a.get("axes", list(range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts = [int(v) for v in m.const(node.input[1])]
        ends = [int(v) for v in m.const(node.input[2])]
        axes = ([int(v) for v in m.const(node.input[3])] if len(node.input) > 3 and node.input[3]
                else list(range(len(starts))))
        steps = ([int(v) for v in m.const(node.input[4])] if len(node.input) > 4 and node.input[4]
                 else [1] * len(starts))
    index = [slice(None)] * data.dim()
    for start, end, axis, step in zip(starts, ends, axes, steps):
        if step <= 0:
            raise UnsupportedOnnxOp(f"Slice (node '{node.name or node.output[0]}'): step {step} "
                                    "is not supported (positive steps only)")
        dim = data.shape[axis]
        start = max(0, min(dim, start + dim if start < 0 else start))
        end = max(0, min(dim, end + dim if end < 0 else end))
        index[axis] = slice(start, end, step)
    return [data[tuple(index)]]


def _axes(m, node, a):
    if m.opset < 13:
        return a.get("axes")
    if len(node.input) > 1 and node.input[1]:
        return [int(v) for v in m.const(node.input[1])]
    return None


def _unsqueeze(m, node, a, x):
    data = x[0]
    axes = _axes(m, node, a)
    rank = data.dim() + len(axes)
    for axis in sorted(ax % rank for ax in axes):
        data = data.unsqueeze(axis)
    return [data]


def _squeeze(m, node, a, x):
    data = x[0]
    axes = _axes(m, node, a)
    if axes is None:
        return [data.squeeze()]
    for axis in sorted((ax % data.dim() for ax in axes), reverse=True):
        data = data.squeeze(axis)
    return [data]


def _sum(m, node, a, x):
    out = x[0]
    for t in x[1:]:
        out = out + t
    return [out]


def _concat(m, node, a, x):
    return [torch.cat(list(x), dim=a["axis"])]


def _dropout(m, node, a, x):
    outs = [x[0]]
    if len(node.output) > 1:  # mask output: all ones in inference
        outs.append(torch.ones_like(x[0], dtype=torch.bool))
    return outs


def _binary(fn):
    return lambda m, node, a, x: [fn(x[0], x[1])]


def _unary(fn):
    return lambda m, node, a, x: [fn(x[0])]


_OPS = {
    "Conv": _conv,
    "Relu": _unary(torch.relu),
    "Sigmoid": _unary(torch.sigmoid),
    "Tanh": _unary(torch.tanh),
    "MaxPool": _pool("max"),
    "AveragePool": _pool("avg"),
    "GlobalAveragePool": _global_pool("avg"),
    "GlobalMaxPool": _global_pool("max"),
    "Concat": _concat,
    "Gemm": _gemm,
    "MatMul": _binary(torch.matmul),
    "Add": _binary(torch.add),
    "Sub": _binary(torch.sub),
    "Mul": _binary(torch.mul),
    "Div": _binary(torch.div),
    "Softmax": _softmax,
    "Reshape": _reshape,
    "Transpose": _transpose,
    "Flatten": _flatten,
    "Dropout": _dropout,
    "LRN": _lrn,
    "BatchNormalization": _batchnorm,
    "Slice": _slice,
    "Sum": _sum,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Identity": _unary(lambda t: t),
}
SUPPORTED_OPS = tuple(sorted(_OPS) + ["Constant"])

# Inputs (by op and slot) that are integer constants read at build time, not tensors.
_CONST_SLOTS = {"Reshape": (1,), "Slice": (1, 2, 3, 4), "Unsqueeze": (1,), "Squeeze": (1,)}


class OnnxTorch(torch.nn.Module):
    """Execute an ONNX graph with torch ops. forward(*inputs) -> tuple of outputs."""

    def __init__(self, proto: onnx.ModelProto):
        super().__init__()
        graph = proto.graph
        self.opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 13)
        self._consts: dict[str, tuple[int, ...]] = {}
        self._buffer_of: dict[str, str] = {}
        for init in graph.initializer:
            self._add_constant(init.name, numpy_helper.to_array(init))
        self.nodes = []
        unsupported = []
        for node in graph.node:
            if node.op_type == "Constant":
                value = next(a for a in node.attribute if a.name in ("value", "value_float",
                                                                     "value_floats", "value_int",
                                                                     "value_ints"))
                array = (numpy_helper.to_array(value.t) if value.name == "value"
                         else np.asarray(helper.get_attribute_value(value),
                                         dtype=np.float32 if "float" in value.name else np.int64))
                self._add_constant(node.output[0], array)
                continue
            if node.domain not in ("", "ai.onnx") or node.op_type not in _OPS:
                unsupported.append(f"{node.op_type} (node '{node.name or node.output[0]}')")
                continue
            self.nodes.append((Node(node.op_type, node.name, tuple(node.input), tuple(node.output)),
                               _attrs(node)))
        if unsupported:
            raise UnsupportedOnnxOp("onnx_torch: unsupported ONNX op(s): " + ", ".join(unsupported)
                                    + f"; supported: {', '.join(SUPPORTED_OPS)}")
        self.input_names = [vi.name for vi in graph.input if vi.name not in self._consts
                            and vi.name not in self._buffer_of]
        self.output_names = [o.name for o in graph.output]

    def _add_constant(self, name: str, array: np.ndarray) -> None:
        attr = f"_w{len(self._buffer_of)}"
        self.register_buffer(attr, torch.from_numpy(np.array(array, copy=True)))
        self._buffer_of[name] = attr
        if not np.issubdtype(array.dtype, np.floating):
            self._consts[name] = tuple(int(v) for v in array.reshape(-1))

    def const(self, name: str) -> tuple[int, ...]:
        """An integer constant (shape, axes, slice bounds) by ONNX name, as Python ints."""
        if name not in self._consts:
            raise UnsupportedOnnxOp(f"onnx_torch: '{name}' must be a constant integer initializer")
        return self._consts[name]

    def _value(self, env: dict, name: str):
        if not name:
            return None
        if name in env:
            return env[name]
        if name in self._buffer_of:
            return getattr(self, self._buffer_of[name])
        raise KeyError(f"onnx_torch: value '{name}' is used before it is computed")

    def forward(self, *inputs):
        if len(inputs) != len(self.input_names):
            raise TypeError(f"expected {len(self.input_names)} inputs ({', '.join(self.input_names)}), "
                            f"got {len(inputs)}")
        env = dict(zip(self.input_names, inputs))
        for node, attrs in self.nodes:
            skip = _CONST_SLOTS.get(node.op_type, ())
            args = [None if k in skip else self._value(env, name) for k, name in enumerate(node.input)]
            outs = _OPS[node.op_type](self, node, attrs, args)
            for name, value in zip(node.output, outs):
                if name:
                    env[name] = value
        return tuple(env[name] if name in env else self._value(env, name) for name in self.output_names)


def check_against_onnxruntime(proto: onnx.ModelProto, inputs: dict, device: str = "cpu") -> dict:
    """Run `proto` with OnnxTorch and onnxruntime (CPU) on `inputs`; max abs/rel errors."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    expected = sess.run(None, inputs)
    module = OnnxTorch(proto).to(device).eval()
    with torch.no_grad():
        actual = module(*(torch.from_numpy(inputs[n]).to(device) for n in module.input_names))
    errors = []
    for name, want, got in zip(module.output_names, expected, actual):
        got = got.detach().cpu().numpy()
        if got.shape != want.shape:
            raise AssertionError(f"{name}: shape {got.shape} != onnxruntime {want.shape}")
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        errors.append({"output": name, "max_abs": float(diff.max(initial=0.0)),
                       "max_rel": float((diff / (np.abs(want) + 1e-6)).max(initial=0.0)),
                       "max_ref": float(np.abs(want).max(initial=0.0))})
    return {"outputs": errors, "max_abs": max((e["max_abs"] for e in errors), default=0.0)}


def _main(argv=None) -> int:
    """python onnx_torch.py MODEL.onnx ... [--seed N] [--atol X]: check against onnxruntime."""
    import argparse
    import json

    parser = argparse.ArgumentParser(description=_main.__doc__)
    parser.add_argument("models", nargs="+")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--atol", type=float, default=1e-4)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    failed = 0
    for path in args.models:
        proto = onnx.load(path)
        rng = np.random.default_rng(args.seed)
        inputs = {}
        inits = {i.name for i in proto.graph.initializer}
        for vi in proto.graph.input:
            if vi.name in inits:
                continue
            tt = vi.type.tensor_type
            dtype = helper.tensor_dtype_to_np_dtype(tt.elem_type)
            shape = tuple(d.dim_value for d in tt.shape.dim)
            inputs[vi.name] = (rng.standard_normal(shape).astype(dtype)
                               if np.issubdtype(dtype, np.floating)
                               else rng.integers(0, 4, size=shape).astype(dtype))
        result = check_against_onnxruntime(proto, inputs, args.device)
        result["model"] = path
        result["ok"] = result["max_abs"] <= args.atol
        failed += not result["ok"]
        print(json.dumps(result))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(_main())
