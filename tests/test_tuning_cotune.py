"""Co-tuning a fused parallel group: the layouts of engine.parallel's CPU fusion and the joint search."""

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm.s_tir import meta_schedule as ms

from engine.pipeline import CompileOptions, Stage
from engine.session import Session
from engine.targets import get_target
from engine.parallel.codegen.cpu import CpuLayout
from engine.parallel.tir_util import count
from engine.tuning.cotune import Group, GroupConfig, cotune, tune_separately_then_fuse
from tests.conftest import SAMPLES

PAIR = ("fused_conv2d1_add1_relu1", "fused_conv2d2_add1_relu1")  # fire: expand1x1, expand3x3


@pytest.fixture(scope="module")
def group():
    result = Session(str(SAMPLES / "fire_module.onnx")).compile(CompileOptions(stop_after=Stage.FUSE))
    return Group([result.module[n] for n in PAIR], get_target("llvm").target(None), list(PAIR))


def _run(func, arrays):
    ex = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}),
                     target=get_target("llvm").target(None))
    tensors = [tvm.runtime.tensor(a, tvm.cpu()) for a in arrays]
    ex.mod["main"](*tensors)
    return [t.numpy() for t in tensors]


def test_knob_space_starts_with_the_default_tile(group):
    # expand1x1 (16 -> 64 channels) expands a short reduction: the pixel rule's tile comes first
    assert group.variants[0][0][0][0] == "px"
    assert len(group.variants[0]) > 4


@pytest.mark.parametrize("knobs,layout", [
    ((0, 0), CpuLayout(True, 2)),
    ((3, 2), CpuLayout(True, 0)),
    ((0, 5), CpuLayout(False, 0, (2, 7))),  # member 0 in 2 chunks, member 1 in 7
    ((1, 1), CpuLayout(False, 0, (1000, 1))),  # shares above a member's chunks are clamped
])
def test_fused_kernel_computes_both_members(group, knobs, layout):
    members = [group.member(m, k) for m, k in enumerate(knobs)]
    rng = np.random.default_rng(0)
    inputs = [[rng.standard_normal([int(s) for s in a.shape]).astype("float32")
               for a in ms.arg_info.ArgInfo.from_prim_func(f)] for f in members]
    alone = [_run(f, arrays)[-1] for f, arrays in zip(members, inputs)]
    # fused parameters: all members' inputs, then all members' outputs
    ins = inputs[0][:-1] + inputs[1][:-1]
    fused = _run(group.fused(GroupConfig(knobs, layout)), ins + [inputs[0][-1], inputs[1][-1]])
    np.testing.assert_array_equal(fused[-2], alone[0])
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
    assert alone.config.layout == group.default_layout()


def test_cotune_finds_the_layout_a_cost_model_prefers(group):
    """With a cost that only a contiguous layout with regrouped chunks minimises, the joint
    search must find it (the separately-tuned baseline never varies the layout)."""
    def cost(func):
        regrouped = count(func.body, tvm.tirx.For, lambda f: f.loop_var.name.endswith("_r"))
        return 1.0 - 0.5 * (regrouped > 0) - 0.01 * count(func.body, tvm.tirx.For,
                                                          lambda f: f.kind == tvm.tirx.ForKind.PARALLEL)

    joint = cotune(group, trials=40, measure=cost)
    assert not joint.config.layout.sliced


def test_matmul_members_have_tile_knobs_and_the_default_first():
    from engine.schedule.cpu.rules import schedule_func
    from engine.tuning.knobs import member_variants

    mod = Session(str(SAMPLES / "mha_block.onnx")).compile(CompileOptions(stop_after=Stage.FUSE)).module
    target = get_target("llvm").target(None)
    variants = member_variants(mod["fused_matmul_add"], target)
    assert len(variants) > 3 and all(k[0] == "mm" for k, _ in variants)
    default = schedule_func(mod["fused_matmul_add"], target)
    assert tvm_ffi.structural_equal(variants[0][1], default)


def test_one_task_layout_is_serial(group):
    fused = group.fused(GroupConfig((0, 0), CpuLayout(True, 1)))
    kinds = []
    tvm_ffi.structural_walk(fused.body, (tvm.tirx.For, lambda f: kinds.append(f.kind)), order="pre")
    assert tvm.tirx.ForKind.PARALLEL not in kinds


def test_a_serial_layout_only_for_tiny_groups(group, monkeypatch):
    """fire_module's expands (several MFLOP) never run on one core: timed alone with hot
    caches the serial layout won by 3% and cost 1.43x end to end."""
    import engine.tuning.cotune as cotune

    assert CpuLayout(True, 1) not in group.layouts
    monkeypatch.setattr(cotune, "SERIAL_FLOPS", 1e12)
    result = Session(str(SAMPLES / "fire_module.onnx")).compile(CompileOptions(stop_after=Stage.FUSE))
    tiny = Group([result.module[n] for n in PAIR], group.target, list(PAIR))
    assert CpuLayout(True, 1) in tiny.layouts


def test_comparison_measures_the_layout_alone(group):
    """The report splits the gain: baseline tiles with the co-tuned layout, same rounds."""
    from engine.tuning.cotune import compare_cotuning

    def cost(func):  # the more parallel tasks the cheaper; tiles do not matter
        extents = []
        tvm_ffi.structural_walk(func.body, (tvm.tirx.For, lambda f: extents.append(int(f.extent))
                                            if f.kind == tvm.tirx.ForKind.PARALLEL else None), order="pre")
        return 1.0 + 1.0 / max(sum(extents), 1)

    rep = compare_cotuning(group, trials=40, rounds=2, measure=cost)
    assert rep.cotuned.config.layout != group.default_layout()
    assert rep.separate_s > rep.cotuned_s == rep.layout_only_s
    assert rep.layout_speedup == rep.speedup
