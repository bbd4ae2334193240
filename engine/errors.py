"""Errors the user can act on. Each carries one line that names the problem.

Classes: bad input (the model, a flag, a plan, an output folder) exits 2 and is found
before any work where it can be; an internal failure (a stage failing inside TVM or our
own code, `InternalError`) exits 1 and names the stage.
"""


class BlockwiseError(Exception):
    """A user-facing failure: the CLI prints `str(err)` on one line and exits with 2."""

    exit_code = 2


class ModelLoadError(BlockwiseError):
    """The model file is missing, not ONNX, invalid, or has unresolved dynamic shapes."""


class UnsupportedOpError(BlockwiseError):
    """The TVM ONNX frontend has no converter for an op of the model."""


class CompileError(BlockwiseError):
    """A pipeline stage failed (build, schedule, target)."""


class VerificationError(CompileError):
    """The compiled model's outputs differ from onnxruntime's (a compile that failed its check)."""


class PlanError(BlockwiseError):
    """A fusion plan does not match the model or cannot be parsed."""


class BlockDepsError(BlockwiseError):
    """Block dependency analysis cannot answer (unknown edge, unsupported kernel)."""


class InternalError(BlockwiseError):
    """A stage failed inside TVM or blockwise: not the input's fault."""

    exit_code = 1


def one_line(err: BaseException, limit: int = 240) -> str:
    """The first meaningful line of an error, cut at a word boundary (never mid-word)."""
    lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
    # TVM puts a traceback header first and the message last; prefer the message line
    text = next((line for line in lines if not line.startswith(("Traceback", "File ", "File\"",
                                                                    "  File", "at ", "Stack trace"))),
                lines[0] if lines else type(err).__name__)
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0].rstrip(" ,;:")
    return cut + " …"
