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


class AnalysisMessage(Message):
    """A result of the analyses of one target: `generation` counts the target switches, so a
    result that arrives after the user switched target is dropped, not shown under the new one."""

    def __init__(self, generation: int = 0) -> None:
        super().__init__()
        self.generation = generation


class KernelsReady(AnalysisMessage):
    """The scheduled module's kernels (fused-kernel clusters), before any build."""

    def __init__(self, kernels, generation: int = 0) -> None:
        super().__init__(generation)
        self.kernels = kernels


class BlockDepsProgress(AnalysisMessage):
    def __init__(self, done: int, total: int, generation: int = 0) -> None:
        super().__init__(generation)
        self.done, self.total = done, total


class BlockDepsReady(AnalysisMessage):
    def __init__(self, report, generation: int = 0) -> None:
        super().__init__(generation)
        self.report = report


class PlanReady(AnalysisMessage):
    def __init__(self, plan, note: str = "", generation: int = 0) -> None:
        super().__init__(generation)
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
