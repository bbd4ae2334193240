"""Errors the user can act on. Each carries one line that names the problem."""


class BlockwiseError(Exception):
    """A user-facing failure: the CLI prints `str(err)` on one line and exits with 2."""

    exit_code = 2


class ModelLoadError(BlockwiseError):
    """The model file is missing, not ONNX, invalid, or has unresolved dynamic shapes."""


class UnsupportedOpError(BlockwiseError):
    """The TVM ONNX frontend has no converter for an op of the model."""


class CompileError(BlockwiseError):
    """A pipeline stage failed (build, schedule, target)."""


class VerificationError(BlockwiseError):
    """The compiled model's outputs differ from onnxruntime's."""


class PlanError(BlockwiseError):
    """A fusion plan does not match the model or cannot be parsed."""


class BlockDepsError(BlockwiseError):
    """Block dependency analysis cannot answer (unknown edge, unsupported kernel)."""
