"""ONNX -> TVM Relax, remembering which Relax bindings each ONNX operator became.

The frontend names every value `lv<N>` and keeps no spans, so the link back to operators
(needed to show kernels in the operator graph) is recorded during conversion: the
frontend converts nodes in order and emits each node's bindings contiguously, ending
with the binding that defines the node's output.
"""

from __future__ import annotations

from dataclasses import dataclass

import tvm
from tvm import relax

from engine.errors import UnsupportedOpError
from engine.model import Model
from engine.opgraph import OpId, OperatorGraph


@dataclass(frozen=True, eq=False)
class RelaxModule:
    mod: tvm.IRModule
    # Relax binding name in `main` -> the operator that produced it.
    owner: dict[str, OpId]


def import_relax(model: Model, graph: OperatorGraph) -> RelaxModule:
    """Convert with `tvm.relax.frontend.onnx` and map bindings to operator ids."""
    importer = _recording_importer()
    opset = next((o.version for o in model.proto.opset_import if o.domain in ("", "ai.onnx")), 1)
    try:
        mod = importer.from_onnx(model.proto.graph, opset)
    except tvm.error.OpNotImplemented as err:
        raise UnsupportedOpError(str(err).strip().splitlines()[-1]) from None
    except Exception as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise UnsupportedOpError(f"TVM's ONNX frontend failed on {model.name}: {first[:300]}") from None
    ids = {n.index: n.id for n in graph.nodes}
    made_by: dict[relax.Expr, OpId] = {}
    var_made_by: dict[str, OpId] = {}  # converters that emit their own bindings return Vars
    for index, expr in importer.converted:
        if index in ids:
            _collect_calls(expr, ids[index], made_by)
            for field in (expr.fields if isinstance(expr, relax.Tuple) else [expr]):
                if isinstance(field, relax.Var):
                    var_made_by.setdefault(field.name, ids[index])
    bindings = [b for block in mod["main"].body.blocks for b in block.bindings]
    first_user: dict[str, str] = {}
    for b in bindings:
        for v in _var_args(b.value):
            first_user.setdefault(v, b.var.name)
    owner: dict[str, OpId] = {}
    # The frontend returns nested calls that normalisation splits into separate bindings
    # (conv2d inside add(conv2d, bias)): those belong to the operator of their user.
    for b in reversed(bindings):
        name = b.var.name
        op = (var_made_by.get(name) or made_by.get(b.value)
              or owner.get(first_user.get(name, "")))
        if op is not None:
            owner[name] = op
    for b in bindings:  # unused leftovers (Dropout's mask) belong to what they read
        reads = [v for v in _var_args(b.value) if v in owner]
        if b.var.name not in owner and reads:
            owner[b.var.name] = owner[reads[0]]
    return RelaxModule(mod, owner)


def _recording_importer():
    from tvm.relax.frontend.onnx.onnx_frontend import ONNXGraphImporter

    class RecordingImporter(ONNXGraphImporter):
        """Records each converted node's expression with the node's position: every node
        but `If` (not in our graphs) passes through `_convert_operator` once, in order."""

        def __init__(self):
            super().__init__({}, "float32", keep_params_in_input=False, sanitize=True)
            self.converted: list[tuple[int, relax.Expr]] = []

        def _convert_operator(self, op_name, inputs, attrs, opset):
            expr = super()._convert_operator(op_name, inputs, attrs, opset)
            self.converted.append((len(self.converted), expr))
            return expr

    return RecordingImporter()


def _collect_calls(expr, op: OpId, out: dict) -> None:
    if isinstance(expr, relax.Call):
        out.setdefault(expr, op)
        for arg in expr.args:
            _collect_calls(arg, op, out)
    elif isinstance(expr, relax.Tuple):
        for field in expr.fields:
            _collect_calls(field, op, out)


def _var_args(expr) -> list[str]:
    if isinstance(expr, relax.Call):
        return [n for a in expr.args for n in _var_args(a)]
    if isinstance(expr, relax.Tuple):
        return [n for f in expr.fields for n in _var_args(f)]
    if isinstance(expr, relax.TupleGetItem):
        return _var_args(expr.tuple_value)
    return [expr.name] if isinstance(expr, relax.Var) else []
