"""Co-tuning a fused parallel group: the horizontal-fusion harness and the joint search."""

import numpy as np
import pytest
import tvm
from tvm.s_tir import meta_schedule as ms

from engine.pipeline import CompileOptions, Stage
from engine.session import Session
from engine.targets import get_target
from engine.tuning.cotune import Group, GroupConfig, cotune, tune_separately_then_fuse
from engine.tuning.hfuse import strip_preproc
from tests.conftest import SAMPLES

PAIR = ("fused_conv2d1_add1_relu1", "fused_conv2d2_add1_relu1")  # fire: expand1x1, expand3x3


@pytest.fixture(scope="module")
def group():
    result = Session(str(SAMPLES / "fire_module.onnx")).compile(CompileOptions(stop_after=Stage.FUSE))
    return Group([result.module[n] for n in PAIR], get_target("llvm").target(None))


def _run(func, arrays):
    ex = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}),
                     target=get_target("llvm").target(None))
    tensors = [tvm.runtime.tensor(a, tvm.cpu()) for a in arrays]
    ex.mod["main"](*tensors)
    return [t.numpy() for t in tensors]


def test_knob_space_starts_with_the_default_tile(group):
    assert group.variants[0][0][0] == (32, 7)  # the default rule's tile for 64 channels x 28 columns
    assert len(group.variants[0]) > 4


@pytest.mark.parametrize("knobs,chunks", [((0, 0), (None, None)), ((3, 2), (1, 7)), ((0, 5), (2, None))])
def test_fused_kernel_computes_both_members(group, knobs, chunks):
    """None: the member keeps one chunk per iteration of its own parallel loop."""
    chunks = tuple(c or group.extents[m][k] for m, (k, c) in enumerate(zip(knobs, chunks)))
    cfg = GroupConfig(knobs, chunks)
    members = [strip_preproc(group.variants[m][k][1]) for m, k in enumerate(knobs)]
    rng = np.random.default_rng(0)
    inputs = [[rng.standard_normal([int(s) for s in a.shape]).astype("float32")
               for a in ms.arg_info.ArgInfo.from_prim_func(f)] for f in members]
    alone = [_run(f, arrays)[-1] for f, arrays in zip(members, inputs)]
    fused = _run(group.fused(cfg), inputs[0] + inputs[1])
    n_a = len(inputs[0])
    np.testing.assert_array_equal(fused[n_a - 1], alone[0])
    np.testing.assert_array_equal(fused[-1], alone[1])


def test_cotune_and_baseline_respect_the_budget(group):
    calls = []

    def fake_measure(func):  # a cost model instead of the clock: fast and deterministic
        calls.append(func)
        return 1.0 + 0.001 * len(calls) % 0.7

    joint = cotune(group, trials=6, measure=fake_measure)
    assert joint.trials <= 6 and len(calls) == joint.trials
    calls.clear()
    alone = tune_separately_then_fuse(group, trials=6, measure=fake_measure)
    assert len(calls) <= 6 + 1  # 3 per member + the fused winner
    assert alone.config.chunks == tuple(group.extents[m][k] for m, k in enumerate(alone.config.knobs))
