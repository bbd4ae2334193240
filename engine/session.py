"""Session: the one API the CLI and the TUI drive. Holds a model and what was derived from it.

    s = Session("fire_module")
    s.graph                                   operator graph (no TVM needed)
    s.block_deps("cuda")                      block-level dependencies of the scheduled kernels
    plan = s.propose("llvm").plan.with_approval("all")
    result = s.compile(CompileOptions(plan=plan), progress=print)
    result.fusion, result.tuning, result.cotuned, result.verification, result.kernel_times

Front ends import this module, engine.events (stages, options), engine.errors and the fact
and plan types (engine.parallel.plan, engine.blockdeps.facts, ...); never the pipeline or
the passes (tests/test_architecture.py checks it).
"""

from __future__ import annotations

import os
import threading
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from engine.events import CompileOptions, ProgressFn, Stage
from engine.model import Model, load_model
from engine.opgraph import OperatorGraph, build_operator_graph

if TYPE_CHECKING:  # these import TVM: loaded on first use, not on import
    from engine.blockdeps.facts import EdgeBlockMap, ModelBlockDeps
    from engine.parallel.plan import FusionPlan
    from engine.parallel.propose import Proposal
    from engine.pipeline import CompileResult
    from engine.targets import TargetSpec


def target_names() -> tuple[str, ...]:
    """The targets a compile accepts (engine.targets' table)."""
    from engine.targets import TARGET_NAMES

    return TARGET_NAMES


def target_info(name: str) -> "TargetSpec":
    """The table row of a target: its block axis, capabilities, arch help."""
    from engine.targets import get_target

    return get_target(name)


class Session:
    """A model opened for analysis and compilation; results are computed on first use."""

    def __init__(self, model_spec: str, *, shapes: Mapping[str, tuple[int, ...]] | None = None,
                 seed: int = 0, inputs_from: str | None = None):
        self.model_spec = model_spec
        self.shapes = dict(shapes or {})
        self.seed = seed
        self.inputs_from = inputs_from  # a file of inputs to verify on (engine.input_data)
        self._scheduled: dict = {}
        self._proposals: dict = {}
        self._lock = threading.RLock()  # the TUI's workers share the caches

    @cached_property
    def model(self) -> Model:
        return load_model(self.model_spec, self.shapes, seed=self.seed, inputs_from=self.inputs_from)

    @cached_property
    def graph(self) -> OperatorGraph:
        return build_operator_graph(self.model)

    def op_labels(self) -> dict[str, str]:
        return {n.id: n.label for n in self.graph.nodes}

    # --- compiling ----------------------------------------------------------------------

    def compile(self, options: CompileOptions | None = None, progress: ProgressFn | None = None,
                cancel: threading.Event | None = None, reuse_schedule: bool = False) -> "CompileResult":
        """Run the compile pipeline on this session's model: options.plan's approved decisions
        are applied, options.tuning tunes (and co-tunes) kernels. `reuse_schedule`: continue
        from `scheduled(target, arch)` (computed once per session, shared with propose and the
        analyses) instead of importing, fusing and scheduling again; untuned compiles only
        (tuning changes the schedule), a tuned one schedules as usual."""
        from engine.pipeline import compile_model

        options = options or CompileOptions(seed=self.seed)
        reuse = reuse_schedule and options.tuning is None and options.stop_after is None
        start = self.scheduled(options.target, options.arch) if reuse else None
        return compile_model(self.model, self.graph, options, progress=progress, cancel=cancel, start=start)

    def scheduled(self, target: str = "llvm", arch: str | None = None) -> "CompileResult":
        """Import, fuse and schedule only (no build): the kernels analyses look at. Cached."""
        key = (target, arch)
        with self._lock:
            if key not in self._scheduled:
                self._scheduled[key] = self.compile(CompileOptions(target=target, arch=arch, seed=self.seed,
                                                                   stop_after=Stage.SCHEDULE))
            return self._scheduled[key]

    @staticmethod
    def export_library(result: "CompileResult", out_dir: str | os.PathLike) -> Path:
        """Write the compiled library into out_dir (atomically); returns its path."""
        from engine.report import export_library

        return export_library(result, out_dir)

    # --- block dependencies -------------------------------------------------------------

    def block_deps(self, target: str = "llvm", arch: str | None = None, method: str = "auto",
                   few: int | None = None, progress: Callable[[int, int], None] | None = None
                   ) -> "ModelBlockDeps":
        """Block maps of every kernel edge of the scheduled model, and the summaries."""
        from engine.blockdeps import DEFAULT_FEW_BOUND, Method, analyze_model

        return analyze_model(self.scheduled(target, arch), Method(method), few or DEFAULT_FEW_BOUND,
                             labels=self.op_labels(), progress=progress)

    def block_edge(self, edge: str, target: str = "llvm", arch: str | None = None, method: str = "auto",
                   few: int | None = None) -> tuple["ModelBlockDeps", "EdgeBlockMap"]:
        """One edge named `PRODUCER:CONSUMER` (index #3, PrimFunc, var or op label), analysed
        with `method`; also the cheap analysis of all edges its name was resolved on."""
        from engine.blockdeps import DEFAULT_FEW_BOUND, Method, analyze_edge, analyze_model, resolve_edge

        few = few or DEFAULT_FEW_BOUND
        scheduled = self.scheduled(target, arch)
        fast = analyze_model(scheduled, Method.FAST, few, labels=self.op_labels())
        chosen = resolve_edge(fast, edge)
        return fast, analyze_edge(scheduled, chosen.producer.index, chosen.consumer.index, Method(method),
                                  few, self.op_labels())

    @staticmethod
    def block_graph_dot(deps: "ModelBlockDeps", edge: "EdgeBlockMap | None" = None,
                        max_blocks: int | None = None) -> str:
        """Graphviz source of the block graph (sampled blocks per kernel)."""
        from engine.blockdeps import block_graph_dot

        return block_graph_dot(deps, edge=edge, max_blocks=max_blocks)

    # --- fusion plans -------------------------------------------------------------------

    def propose(self, target: str = "llvm", arch: str | None = None) -> "Proposal":
        """Detected parallel groups and one-to-one block maps, as a plan (all proposed). Cached."""
        from engine.parallel.propose import propose

        key = (target, arch)
        if key not in self._proposals:
            self._proposals[key] = propose(self, target, arch)
        return self._proposals[key]

    def load_plan(self, path: str | os.PathLike, target: str = "llvm", arch: str | None = None) -> "FusionPlan":
        """A plan file checked against this model's scheduled kernels (PlanError if it does not fit)."""
        from engine.parallel.plan import load_plan, validate_plan

        plan = load_plan(path)
        return validate_plan(plan, self.model.name, target, self.scheduled(target, arch).kernels,
                             source=str(path))

    def plan(self, target: str = "llvm", arch: str | None = None, path: str | os.PathLike | None = None,
             approve: str | None = None) -> "FusionPlan":
        """The plan of `path` (validated) or a fresh proposal, with `approve` applied
        ("all", "none" or "d0,d3") when given."""
        plan = self.load_plan(path, target, arch) if path else self.propose(target, arch).plan
        return plan.with_approval(approve) if approve else plan
