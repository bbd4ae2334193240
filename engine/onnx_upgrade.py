"""Models of an ai.onnx opset older than 7, upgraded to 7 at load.

Opset 7 is the oldest onnxruntime implements (it has no Add, Mul, Gemm or AveragePool of
opset 6 or 1) and the first with numpy-style broadcasting, the form TVM's frontend
converts: an opset-6 Add's `broadcast`/`axis` attributes or PRelu's per-channel slope would
be read with the new rules. Old PyTorch exports (ONNX's own pytorch-converted test models)
and Caffe2 exports are opset 6 and older. onnx's version converter does the upgrade; two
gaps are mended first: PRelu's opset-6 slope of C values is per channel (axis 1), which the
converter leaves as C values that opset 7 broadcasts along the last axis (reshaped here to
[C, 1, ...]); and it refuses a binary op's `broadcast=1, axis=A` that does not align B's
axes with A's last (Caffe2's bias and scale adds, axis=1): B gets trailing ones instead.

    >>> upgraded, old = upgrade_opset(proto, "model.onnx")   # opset 6 -> (opset-7 copy, 6)
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper, shape_inference, version_converter

from engine.errors import ModelLoadError, one_line

OLDEST_OPSET = 7


def ai_onnx_opset(proto: onnx.ModelProto) -> int | None:
    return next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)


def upgrade_opset(proto: onnx.ModelProto, spec: str) -> tuple[onnx.ModelProto, int | None]:
    """(the model at OLDEST_OPSET, the opset it had), or (proto, None) when it is not older."""
    version = ai_onnx_opset(proto)
    if version is None or version >= OLDEST_OPSET:
        return proto, None
    proto = _trailing_broadcasts(_per_channel_prelu_slopes(proto))
    try:
        upgraded = version_converter.convert_version(proto, OLDEST_OPSET)
        onnx.checker.check_model(upgraded)
    except Exception as err:  # noqa: BLE001 - the converter raises several unrelated types
        raise ModelLoadError(
            f"{spec}: ai.onnx opset {version} is older than {OLDEST_OPSET}, the oldest onnxruntime "
            f"implements, and onnx's version converter could not upgrade it: {one_line(err)}") from None
    return upgraded, version


def _shapes(proto: onnx.ModelProto) -> dict[str, list[int]]:
    """Static shapes by value name, where inference knows them (empty when it fails)."""
    try:
        inferred = shape_inference.infer_shapes(proto)
    except Exception:  # noqa: BLE001 - without shapes the model stays as given
        return {}
    out = {i.name: list(i.dims) for i in proto.graph.initializer}
    for vi in (*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output):
        t = vi.type.tensor_type
        if vi.type.WhichOneof("value") == "tensor_type" and t.HasField("shape") \
                and all(d.HasField("dim_value") for d in t.shape.dim):
            out[vi.name] = [d.dim_value for d in t.shape.dim]
    return out


def _trailing_broadcasts(proto: onnx.ModelProto) -> onnx.ModelProto:
    """A copy in which `broadcast=1, axis=A` binary ops read B reshaped to B's shape plus
    trailing ones (aligned with the last axes of the first input) and carry no axis."""
    def misaligned(node):
        attrs = {a.name: a.i for a in node.attribute}
        return attrs.get("broadcast") == 1 and "axis" in attrs and len(node.input) == 2

    if not any(misaligned(n) for n in proto.graph.node):
        return proto
    shapes = _shapes(proto)
    out = onnx.ModelProto()
    out.CopyFrom(proto)
    out.ir_version = max(out.ir_version, 4)  # initializers that are not graph inputs (same semantics)
    inits = {i.name: i for i in out.graph.initializer}
    nodes = []
    for node in out.graph.node:
        if misaligned(node) and node.input[0] in shapes and node.input[1] in shapes:
            a, b = shapes[node.input[0]], shapes[node.input[1]]
            axis = next(x.i for x in node.attribute if x.name == "axis") % len(a)
            target = list(b) + [1] * (len(a) - axis - len(b))
            if target != b:
                name = f"{node.input[1]}__aligned_{node.output[0]}"
                if node.input[1] in inits:
                    value = numpy_helper.to_array(inits[node.input[1]]).reshape(target)
                    out.graph.initializer.append(numpy_helper.from_array(value, name))
                else:
                    shape = numpy_helper.from_array(np.array(target, np.int64), f"{name}__shape")
                    out.graph.initializer.append(shape)
                    nodes.append(onnx.helper.make_node("Reshape", [node.input[1], shape.name], [name]))
                node.input[1] = name
            kept = [x for x in node.attribute if x.name != "axis"]
            del node.attribute[:]
            node.attribute.extend(kept)
        nodes.append(node)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out


def _per_channel_prelu_slopes(proto: onnx.ModelProto) -> onnx.ModelProto:
    """A copy whose PRelu slopes of C values (C > 1) on inputs of rank > 2 are [C, 1, ...]."""
    prelus = [n for n in proto.graph.node if n.op_type == "PRelu"]
    if not prelus:
        return proto
    ranks = {name: len(shape) for name, shape in _shapes(proto).items()}
    out = onnx.ModelProto()
    out.CopyFrom(proto)
    inits = {i.name: i for i in out.graph.initializer}
    for node in prelus:
        slope = inits.get(node.input[1])
        rank = ranks.get(node.input[0], 0)
        if slope is None or len(slope.dims) != 1 or slope.dims[0] == 1 or rank <= 2:
            continue
        value = numpy_helper.to_array(slope)
        slope.CopyFrom(numpy_helper.from_array(np.reshape(value, (-1,) + (1,) * (rank - 2)), slope.name))
    return out
