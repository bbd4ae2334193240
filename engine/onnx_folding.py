"""Shape arithmetic folded into constants before Relax, by onnxruntime's graph optimiser.

torch.onnx writes `x.view(b, 2, c // 2, h, w)` as Shape -> Gather -> Div (and torch's
floor-division fix-up: Less, Xor, Mul, Sub, Equal, Not, And, Cast) -> Unsqueeze -> Concat
-> Reshape. TVM's ONNX frontend keeps some of these chains as symbolic shapes and gives up
on others ("relax.concat expects ... Tuple of Tensors", "Reshape requires the input new
shape to be Shape", or in LegalizeOps "emit_te now only supports Tensor that has ShapeExpr
shape"). Input shapes are static by the time a model is loaded (engine.model), so every
such chain is a constant: onnxruntime's ConstantFolding transformer (one of its 'basic'
level-1 graph transformers; it folds a Shape node whose input shape is known) replaces
each with an initializer.

Only ConstantFolding runs: the other basic transformers fuse operators (Conv with
BatchNormalization, MatMul with Add into Gemm) or drop some (Dropout, Identity), which
would change the operator graph the user sees and that fusion plans name. Models without
shape arithmetic (no Shape or Size node) are not touched.

    >>> fold_shape_arithmetic(torch_shufflenet_unit).removed   # 28 shape nodes, 7 kept
    28
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass

import onnx

# Operators whose output depends only on a tensor's shape: their presence is what asks for folding.
SHAPE_OPS = frozenset({"Shape", "Size"})
# Every graph transformer onnxruntime 1.31 runs at ORT_ENABLE_BASIC (level 1 and the
# session-level ones), but ConstantFolding. tests/test_shape_folding.py checks on a model
# with each fusable pattern that nothing but the shape chain changes.
_NOT_FOLDING = (
    "CommonSubexpressionElimination", "ConstantSharing", "DoubleQDQPairsRemover", "EnsureUniqueDQForNodeUnit",
    "FreeDimensionOverrideTransformer", "GeluFusionL1", "LayerNormFusionL1", "Level1_RuleBasedTransformer",
    "MatMulAddFusion", "QDQPropagationTransformer", "ReshapeFusion", "SliceConcatToSpaceToDepthFusion",
    "TransposeOptimizer", "WeightBiasQuantization", "WhereDummyDq", "CastFloat16Transformer",
    "RemoveDuplicateCastTransformer", "MemcpyTransformer",
)


@dataclass(frozen=True, eq=False)
class Folding:
    """A model whose shape chains became initializers."""

    proto: onnx.ModelProto
    removed: int  # nodes folded away


def fold_shape_arithmetic(proto: onnx.ModelProto) -> Folding | None:
    """`proto` with its constant and shape subgraphs folded by onnxruntime; None when there
    is no shape arithmetic, nothing folds, everything would (a model that is all shape
    computation imports as it is), or onnxruntime cannot load the model (then the import
    proceeds unfolded and reports its own errors)."""
    if not any(n.op_type in SHAPE_OPS for n in proto.graph.node):
        return None
    folded = _optimize(proto)
    if folded is None or not folded.graph.node or len(folded.graph.node) >= len(proto.graph.node):
        return None
    out = onnx.ModelProto()
    out.CopyFrom(proto)  # opset imports, IR version, metadata: as given (onnxruntime adds its domains)
    for field in ("node", "initializer", "value_info"):
        del getattr(out.graph, field)[:]
    out.graph.node.extend(folded.graph.node)
    out.graph.initializer.extend(folded.graph.initializer)
    return Folding(out, len(proto.graph.node) - len(folded.graph.node))


def _optimize(proto: onnx.ModelProto) -> onnx.ModelProto | None:
    import onnxruntime as ort  # only when there is something to fold

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.intra_op_num_threads = 1
    options.log_severity_level = 3  # errors only: it warns about every unused initializer
    with tempfile.TemporaryDirectory(prefix="blockwise-fold-") as tmp:
        options.optimized_model_filepath = os.path.join(tmp, "folded.onnx")
        try:
            ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"],
                                 disabled_optimizers=list(_NOT_FOLDING))
            return onnx.load(options.optimized_model_filepath)
        except Exception:  # onnxruntime rejects the model (opset, op, type): import unfolded
            return None


__all__ = ["Folding", "SHAPE_OPS", "fold_shape_arithmetic"]
