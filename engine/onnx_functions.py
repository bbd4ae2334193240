"""Operators TVM cannot convert, replaced by their ONNX function bodies before import.

Many ONNX operators are defined by a function of simpler operators (Attention, RMS and
group normalisation, RotaryEmbedding, ...). Where neither TVM's frontend nor our
converters (engine.converters) handle one, or TVM's converter is for another operator of
the same name (TVM maps `Attention` to Microsoft's contrib op, which needs `num_heads`),
the node is expanded into its body as ONNX itself writes it (the schema's function, the
same expansion its `_expanded` backend tests use), attribute defaults filled in.

A body written for an older opset than the model's is used only if none of its operators
changed definition since; otherwise, and where there is no body, the node stays and the
import reports it.

    >>> expand_functions(model_with_attention, convertible).expanded   # one Attention node
    1
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import onnx
from onnx import defs, shape_inference

# ONNX operators whose TVM converter implements something else under the same name.
MISCONVERTED = frozenset({"Attention"})


@dataclass(frozen=True, eq=False)
class Expansion:
    proto: onnx.ModelProto
    expanded: int  # nodes replaced by their function bodies


def expand_functions(proto: onnx.ModelProto, convertible: Callable[[str], bool]) -> Expansion | None:
    """`proto` with every default-domain node that `convertible` refuses (or that is in
    MISCONVERTED) replaced by its function body; None when no node was replaced."""
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    wanted = [n for n in proto.graph.node
              if n.domain in ("", "ai.onnx") and (n.op_type in MISCONVERTED or not convertible(n.op_type))]
    if opset is None or not wanted:
        return None
    types = _value_types(proto)
    nodes, expanded = [], 0
    for node in proto.graph.node:
        body = _body(node, opset, types) if node in wanted else None
        if body is None:
            nodes.append(node)
            continue
        nodes.extend(body)
        expanded += 1
    if not expanded:
        return None
    out = onnx.ModelProto()
    out.CopyFrom(proto)
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return Expansion(out, expanded)


def _value_types(proto: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    try:
        inferred = shape_inference.infer_shapes(proto)
    except Exception:  # the import reports the model's problems; types are best effort here
        inferred = proto
    types = {vi.name: vi.type for vi in (*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output)}
    for init in proto.graph.initializer:
        types.setdefault(init.name, onnx.helper.make_tensor_type_proto(init.data_type, list(init.dims)))
    return types


def _body(node: onnx.NodeProto, opset: int, types: dict) -> list[onnx.NodeProto] | None:
    """The node's function body at the model's opset, renamed into the graph; None if none fits."""
    from onnx.backend.test.case.node import function_expand_helper  # onnx's own expansion

    try:
        schema = defs.get_schema(node.op_type, opset, "")
    except defs.SchemaError:
        return None
    node = _with_defaults(node, schema)
    plain = [v for v in schema.function_opset_versions if v <= opset]
    dependent = [v for v in schema.context_dependent_function_opset_versions if v <= opset]
    function = onnx.FunctionProto()
    try:
        if plain and (not dependent or max(plain) >= max(dependent)):
            function.ParseFromString(schema.get_function_with_opset_version(max(plain)))
        elif dependent:
            if any(name and name not in types for name in node.input):
                return None
            inputs = [types[name].SerializeToString() if name else onnx.TypeProto().SerializeToString()
                      for name in node.input]
            function.ParseFromString(schema.get_context_dependent_function_with_opset_version(
                max(dependent), node.SerializeToString(), inputs))
        else:
            return None
    except Exception:  # the schema cannot build a body for these inputs
        return None
    if not _same_semantics(function, opset):
        return None
    return function_expand_helper(node, function, f"{node.op_type}_{node.name or node.output[0]}_")


def _with_defaults(node: onnx.NodeProto, schema) -> onnx.NodeProto:
    out = onnx.NodeProto()
    out.CopyFrom(node)
    given = {a.name for a in node.attribute}
    for name, attr in schema.attributes.items():
        if name not in given and attr.default_value and attr.default_value.name:
            out.attribute.append(attr.default_value)
    return out


def _same_semantics(function: onnx.FunctionProto, opset: int) -> bool:
    """Every operator of the body means at the model's opset what it meant at the body's."""
    body = next((o.version for o in function.opset_import if o.domain in ("", "ai.onnx")), opset)
    if body > opset:
        return False
    for n in function.node:
        if n.domain not in ("", "ai.onnx"):
            return False
        try:
            if defs.get_schema(n.op_type, opset, "").since_version > body:
                return False
        except defs.SchemaError:
            return False
    return True


__all__ = ["Expansion", "MISCONVERTED", "expand_functions"]
