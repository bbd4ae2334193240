"""Builders for MetaSchedule that work in a plain install of the 0.27 wheel.

Out of the box every LocalBuilder sample times out: the default build function imports
``tvm.s_tir.tensor_intrin`` in each fresh worker, and that import takes ~45 s because
TVMScript calls ``inspect.stack()`` per intrinsic (the standard one scans all of
``sys.modules`` per frame). Two scoped fixes live here:

* ``local_builder()``: a LocalBuilder whose build function skips the intrinsics import
  (float kernels on llvm/cuda never tensorize with registered intrinsics).
* ``fast_inspect_stack()``: a context manager that swaps ``inspect.stack`` for a cheap
  frame walk while the tuning process imports the intrinsics itself (TuneContext does),
  and puts the original back afterwards.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import linecache
import sys

# Keep >= 60 s: a cold worker imports tvm (~3 s) and a big kernel builds in 10-20 s on 2 cores.
BUILD_TIMEOUT_S = 90.0


def _cheap_stack(context: int = 1) -> list[inspect.FrameInfo]:
    """inspect.stack() without the per-frame module lookup: same frames, same code lines."""
    frame = sys._getframe(1)  # pylint: disable=protected-access
    infos = []
    while frame is not None:
        code = frame.f_code
        line = linecache.getline(code.co_filename, frame.f_lineno)
        infos.append(inspect.FrameInfo(frame, code.co_filename, frame.f_lineno, code.co_name,
                                       [line] if line else None, 0 if line else None))
        frame = frame.f_back
    return infos


@contextlib.contextmanager
def fast_inspect_stack():
    """Within the block, ``inspect.stack`` is a cheap frame walk; restored on exit."""
    original = inspect.stack
    inspect.stack = _cheap_stack
    try:
        yield
    finally:
        inspect.stack = original


def import_intrinsics() -> None:
    """Import tvm.s_tir.tensor_intrin (TuneContext does) in seconds instead of ~45 s."""
    if "tvm.s_tir.tensor_intrin" in sys.modules:
        return
    with fast_inspect_stack():
        import tvm.s_tir.tensor_intrin  # noqa: F401  pylint: disable=unused-import,import-outside-toplevel


def build_without_intrinsics(mod, target, _params, before_build=None):
    """MetaSchedule's default build minus the tensor-intrinsics import (runs in workers).
    `before_build`: the target's rewrite of a scheduled module before any build
    (engine.targets.TargetSpec.before_build), so a candidate is timed as the compile builds
    it (llvm: a default schedule's ragged rows split)."""
    from tvm.driver import build  # pylint: disable=import-outside-toplevel
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock  # pylint: disable=import-outside-toplevel

    from engine.ir_module import prepared  # pylint: disable=import-outside-toplevel

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return build(prepared(mod, before_build), target=target)


def local_builder(max_workers: int | None = None, timeout_sec: float = BUILD_TIMEOUT_S, before_build=None):
    """A LocalBuilder of build_without_intrinsics; `before_build` a module-level function
    (the workers unpickle it by name)."""
    from tvm.s_tir import meta_schedule as ms  # pylint: disable=import-outside-toplevel

    f_build = build_without_intrinsics if before_build is None else \
        functools.partial(build_without_intrinsics, before_build=before_build)
    return ms.builder.LocalBuilder(max_workers=max_workers, timeout_sec=timeout_sec, f_build=f_build)
