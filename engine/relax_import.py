"""ONNX -> TVM Relax, remembering which Relax bindings each ONNX operator became.

The frontend names every value `lv<N>` and keeps no spans, so the link back to operators
(needed to show kernels in the operator graph) is recorded during conversion: the
frontend converts nodes in order and emits each node's bindings contiguously, ending
with the binding that defines the node's output.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from dataclasses import dataclass

import numpy as np
import onnx
import tvm
from onnx import numpy_helper
from tvm import relax

from engine.converters import CONVERTERS
from engine.errors import UnsupportedOpError, one_line
from engine.model import Model
from engine.opgraph import OpId, OperatorGraph


@dataclass(frozen=True, eq=False)
class RelaxModule:
    mod: tvm.IRModule
    # Relax binding Var of `main` (by identity: names repeat after some passes) -> operator.
    owner: dict[relax.Var, OpId]


def import_relax(model: Model, graph: OperatorGraph) -> RelaxModule:
    """Convert with `tvm.relax.frontend.onnx` and map bindings to operator ids."""
    importer = _recording_importer()
    opset = next((o.version for o in model.proto.opset_import if o.domain in ("", "ai.onnx")), 1)
    proto, origin = _fold_batchnorm(model.proto)
    failure = None
    try:
        # the frontend print()s "Error converting operator ..." before raising: the error says it;
        # it warns of renaming a numeric input name (torch's "0"), which the bindings follow anyway
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Renaming name", category=UserWarning)
            mod = importer.from_onnx(proto.graph, opset)
    except tvm.error.OpNotImplemented as err:
        failure = str(err).strip().splitlines()[-1]
    except Exception as err:
        where = _node_at(proto, len(importer.converted))
        failure = f"TVM's ONNX frontend failed on {model.name}{where}: {one_line(err, 300)}"
    if failure is not None:
        # raised outside the handler, the importer gone: its BlockBuilder, still inside the
        # function it was building, is destroyed now and not at exit, where TVM's warning about
        # it ("destroyed with remaining blocks") would reach the terminal after the error line
        del importer
        raise UnsupportedOpError(failure)
    by_index = {n.index: n.id for n in graph.nodes}
    ids = {k: by_index[origin[k]] for k in range(len(origin)) if origin[k] in by_index}
    made_by: dict[relax.Expr, OpId] = {}
    var_made_by: dict[str, OpId] = {}  # converters that emit their own bindings return Vars
    for index, expr, passed in importer.converted:
        if index in ids:
            _collect_calls(expr, ids[index], made_by)
            for field in (expr.fields if isinstance(expr, relax.Tuple) else [expr]):
                if isinstance(field, relax.Var) and not any(field.same_as(p) for p in passed):
                    var_made_by.setdefault(field.name, ids[index])
    known = {}
    for b in _bindings(mod["main"]):
        op = var_made_by.get(b.var.name) or made_by.get(b.value)
        if op is not None:
            known[b.var] = op
    return RelaxModule(mod, propagate_owners(mod["main"], known))


def _node_at(proto: onnx.ModelProto, index: int) -> str:
    """", node 'NAME' (OP)" of the node the frontend was converting: nodes are converted in
    order, each recorded when done, so the count recorded is the failing node's index."""
    if index >= len(proto.graph.node) or any(n.op_type == "If" for n in proto.graph.node):
        return ""  # failed after the last node, or an If (not recorded) shifts the count
    node = proto.graph.node[index]
    return f", node '{node.name}' ({node.op_type})" if node.name else f", the {node.op_type} making '{node.output[0]}'"


def _fold_batchnorm(proto: onnx.ModelProto) -> tuple[onnx.ModelProto, list[int]]:
    """Inference batch norm with constant statistics as Mul + Add, node by node.

    Relax's DecomposeOpsForInference would do the same later but recreates the bindings
    after each batch norm, which loses the binding -> operator link. Returns the rewritten
    model and, per new node, the index of the node it came from."""
    inits = {i.name: i for i in proto.graph.initializer}
    ranks = {vi.name: len(vi.type.tensor_type.shape.dim) for vi in (*proto.graph.value_info, *proto.graph.input)
             if vi.type.WhichOneof("value") == "tensor_type" and vi.type.tensor_type.HasField("shape")}
    bns = [n for n in proto.graph.node if n.op_type == "BatchNormalization" and len(n.output) == 1
           and all(x in inits for x in n.input[1:5]) and ranks.get(n.input[0], 0) >= 2]
    if not bns:
        return proto, list(range(len(proto.graph.node)))
    out = onnx.ModelProto()
    out.CopyFrom(proto)
    del out.graph.node[:]
    origin: list[int] = []
    for index, node in enumerate(proto.graph.node):
        if node not in bns:
            out.graph.node.append(node)
            origin.append(index)
            continue
        scale, bias, mean, var = (numpy_helper.to_array(inits[x]).astype(np.float64) for x in node.input[1:5])
        eps = next((a.f for a in node.attribute if a.name == "epsilon"), 1e-5)
        mul = scale / np.sqrt(var + eps)
        shift = bias - mean * mul
        shape = (-1,) + (1,) * (ranks[node.input[0]] - 2)  # the channel axis, 1: [N, C, D1, ...]
        names = [f"{node.output[0]}__bn_mul", f"{node.output[0]}__bn_add", f"{node.output[0]}__bn_scaled"]
        out.graph.initializer.extend([numpy_helper.from_array(mul.astype(np.float32).reshape(shape), names[0]),
                                      numpy_helper.from_array(shift.astype(np.float32).reshape(shape), names[1])])
        out.graph.node.extend([onnx.helper.make_node("Mul", [node.input[0], names[0]], [names[2]]),
                               onnx.helper.make_node("Add", [names[2], names[1]], [node.output[0]])])
        origin += [index, index]
    return out, origin


def _bindings(func):
    return [b for block in func.body.blocks for b in block.bindings]


def propagate_owners(func, known: dict) -> dict:
    """Complete a binding -> operator map over `func`: the frontend (and later passes such
    as DecomposeOpsForInference) split one operator into several bindings (conv2d inside
    add(conv2d, bias)); an unknown binding belongs to the operator of its first user, or,
    when unused (Dropout's mask), to what it reads."""
    bindings = _bindings(func)
    first_user: dict = {}
    for b in bindings:
        for v in _var_args(b.value):
            first_user.setdefault(v, b.var)
    owner = {}
    for b in reversed(bindings):
        op = known.get(b.var)
        if op is None and b.var in first_user:
            op = owner.get(first_user[b.var])
        if op is not None:
            owner[b.var] = op
    for b in bindings:
        reads = [v for v in _var_args(b.value) if v in owner]
        if b.var not in owner and reads:
            owner[b.var] = owner[reads[0]]
    return owner


def _recording_importer():
    from tvm.relax.frontend.onnx.onnx_frontend import ONNXGraphImporter

    class RecordingImporter(ONNXGraphImporter):
        """Records each converted node's expression with the node's position: every node
        but `If` (not in our graphs) passes through `_convert_operator` once, in order."""

        def __init__(self):
            super().__init__({}, "float32", keep_params_in_input=False, sanitize=True)
            self.converted: list[tuple[int, relax.Expr, list]] = []  # (position, expr, inputs passed through)

        def _check_for_unsupported_ops(self, graph):
            """TVM's check, blind to the operators converted here (LSTM is in no TVM map)."""
            rest = onnx.GraphProto()
            rest.node.extend(n for n in graph.node if n.op_type not in _CONVERTER_FIXES)
            super()._check_for_unsupported_ops(rest)

        def _convert_operator(self, op_name, inputs, attrs, opset):
            if op_name == "Slice" and "starts" in attrs:
                inputs, attrs = _slice_v1_as_inputs(inputs, attrs), {}
            fix = _CONVERTER_FIXES.get(op_name)
            if fix is not None:
                expr = self.bb.normalize(fix(inputs, attrs))
            else:
                expr = super()._convert_operator(op_name, inputs, attrs, opset)
            # an input handed back (Identity, inference Dropout; normalize may bind it to a new
            # Var) stays its producer's
            given = [i for i in inputs if i is not None]
            fields = expr.fields if isinstance(expr, relax.Tuple) else [expr]
            passed = [f for f in fields if isinstance(f, relax.Var)
                      and any(f.same_as(i) or _bound_to(self.bb, f, i) for i in given)]
            self.converted.append((len(self.converted), expr, passed))
            return expr

    return RecordingImporter()


def _slice_v1_as_inputs(inputs, attrs) -> list:
    """Slice before opset 10 (starts, ends, axes as attributes) as the inputs of the form
    TVM's frontend converts: it has that one only and reads absent inputs."""
    from tvm.relax.frontend.onnx.onnx_frontend import onnx_input

    def const(name):
        return relax.const(np.array(attrs[name], np.int64)) if name in attrs else None

    return onnx_input([inputs[0], const("starts"), const("ends"), const("axes")])


def _bound_to(bb: relax.BlockBuilder, var: relax.Var, expr) -> bool:
    """Whether `var` is bound to `expr` in the block being built."""
    value = bb.lookup_binding(var)
    return value is not None and value.same_as(expr)


def _isinf(inputs, attrs) -> relax.Expr:
    """IsInf honouring detect_positive / detect_negative (TVM's converter ignores both and
    flags every infinity)."""
    x = inputs[0]
    positive, negative = attrs.get("detect_positive", 1), attrs.get("detect_negative", 1)
    if positive and negative:
        return relax.op.isinf(x)
    if not positive and not negative:
        return relax.op.zeros_like(x, dtype="bool")
    dtype = x.ty.dtype
    return relax.op.equal(x, relax.const(np.inf if positive else -np.inf, dtype))


# ONNX operators converted here instead of by TVM's frontend, which gets them wrong, lacks
# them or converts them in a form our stages cannot fuse (engine.converters).
_CONVERTER_FIXES = {"IsInf": _isinf, **CONVERTERS}


def _collect_calls(expr, op: OpId, out: dict) -> None:
    if isinstance(expr, relax.Call):
        out.setdefault(expr, op)
        for arg in expr.args:
            _collect_calls(arg, op, out)
    elif isinstance(expr, relax.Tuple):
        for field in expr.fields:
            _collect_calls(field, op, out)


def _var_args(expr) -> list:
    """The Vars an expression reads, in order."""
    if isinstance(expr, relax.Call):
        return [v for a in expr.args for v in _var_args(a)]
    if isinstance(expr, relax.Tuple):
        return [v for f in expr.fields for v in _var_args(f)]
    if isinstance(expr, relax.TupleGetItem):
        return _var_args(expr.tuple_value)
    return [expr] if isinstance(expr, relax.Var) else []
