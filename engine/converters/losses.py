"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, which TVM 0.27's ONNX frontend
lacks, on Relax's `nll_loss` (class axis 1, per-class weights, ignore_index, reductions
none/sum/mean with mean over the weights of the counted targets: ONNX's definition)."""

from __future__ import annotations

from tvm import relax
from tvm.relax import op as R

# Targets are class indices in [0, C): a negative index never occurs unless it is ignore_index.
_NO_IGNORED_INDEX = -1


def _settings(attrs) -> tuple[str, int]:
    reduction = attrs.get("reduction", "mean")
    reduction = reduction.decode() if isinstance(reduction, bytes) else str(reduction)
    if reduction not in ("none", "sum", "mean"):
        raise ValueError(f"unknown reduction '{reduction}'")
    return reduction, int(attrs.get("ignore_index", _NO_IGNORED_INDEX))


def _nll(predictions, targets, weights, attrs):
    reduction, ignore = _settings(attrs)
    return R.nn.nll_loss(predictions, targets, weights, reduction=reduction, ignore_index=ignore)


def _negative_log_likelihood(inputs, attrs):
    weights = inputs[2] if len(inputs) > 2 else None
    return _nll(inputs[0], inputs[1], weights, attrs)


def _softmax_cross_entropy(inputs, attrs):
    """Outputs (loss, log_prob); the frontend keeps as many as the node names."""
    log_prob = relax.BlockBuilder.current().emit(R.nn.log_softmax(inputs[0], axis=1))
    weights = inputs[2] if len(inputs) > 2 else None
    return relax.Tuple([_nll(log_prob, inputs[1], weights, attrs), log_prob])


LOSSES = {"NegativeLogLikelihoodLoss": _negative_log_likelihood,
          "SoftmaxCrossEntropyLoss": _softmax_cross_entropy}
