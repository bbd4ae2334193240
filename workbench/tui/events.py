"""Messages the app's thread workers post to the app (results and progress, never widgets)."""

from __future__ import annotations

from textual.message import Message


class ModelOpened(Message):
    def __init__(self, session, graph) -> None:
        super().__init__()
        self.session, self.graph = session, graph


class OpenFailed(Message):
    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class KernelsReady(Message):
    """The scheduled module's kernels (fused-kernel clusters), before any build."""

    def __init__(self, kernels) -> None:
        super().__init__()
        self.kernels = kernels


class BlockDepsProgress(Message):
    def __init__(self, done: int, total: int) -> None:
        super().__init__()
        self.done, self.total = done, total


class BlockDepsReady(Message):
    def __init__(self, report) -> None:
        super().__init__()
        self.report = report


class PlanReady(Message):
    def __init__(self, plan, note: str = "") -> None:
        super().__init__()
        self.plan, self.note = plan, note


class CompileStarted(Message):
    def __init__(self, kind: str, stages: list[str]) -> None:
        super().__init__()
        self.kind, self.stages = kind, stages


class CompileProgress(Message):
    def __init__(self, kind: str, stage: str, status: str, seconds: float, message: str) -> None:
        super().__init__()
        self.kind, self.stage, self.status, self.seconds, self.message = kind, stage, status, seconds, message


class CompileFinished(Message):
    def __init__(self, kind: str, result) -> None:
        super().__init__()
        self.kind, self.result = kind, result


class CompileFailed(Message):
    def __init__(self, kind: str, error: str, cancelled: bool = False) -> None:
        super().__init__()
        self.kind, self.error, self.cancelled = kind, error, cancelled


class ExportDone(Message):
    def __init__(self, written: list, skipped: list[str]) -> None:
        super().__init__()
        self.written, self.skipped = written, skipped
