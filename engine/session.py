"""Session: the one API the CLI and the TUI drive. Holds a model and what was derived from it."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Mapping

from engine.model import Model, load_model
from engine.opgraph import OperatorGraph, build_operator_graph

if TYPE_CHECKING:  # the pipeline imports TVM: loaded on the first compile, not on import
    from engine.pipeline import CompileOptions, CompileResult


class Session:
    """A model opened for analysis and compilation; results are computed on first use."""

    def __init__(self, model_spec: str, *, shapes: Mapping[str, tuple[int, ...]] | None = None,
                 seed: int = 0):
        self.model_spec = model_spec
        self.shapes = dict(shapes or {})
        self.seed = seed

    @cached_property
    def model(self) -> Model:
        return load_model(self.model_spec, self.shapes, seed=self.seed)

    @cached_property
    def graph(self) -> OperatorGraph:
        return build_operator_graph(self.model)

    def compile(self, options: "CompileOptions | None" = None, progress=None, cancel=None) -> "CompileResult":
        """Run the compile pipeline (engine.pipeline) on this session's model."""
        from engine.pipeline import CompileOptions, compile_model

        options = options or CompileOptions(seed=self.seed)
        return compile_model(self.model, self.graph, options, progress=progress, cancel=cancel)

    def scheduled(self, target: str = "llvm", arch: str | None = None) -> "CompileResult":
        """Import, fuse and schedule only (no build): the kernels analyses look at. Cached."""
        from engine.pipeline import CompileOptions, Stage

        key = (target, arch)
        cache = self.__dict__.setdefault("_scheduled", {})
        if key not in cache:
            cache[key] = self.compile(CompileOptions(target=target, arch=arch, seed=self.seed,
                                                     stop_after=Stage.SCHEDULE))
        return cache[key]
