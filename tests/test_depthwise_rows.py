"""The row-vectorised depthwise rule (engine/schedule/cpu/depthwise_rows.py): numbers
against numpy, which convs and ISAs it takes, its knob. No timing assertions."""

import numpy as np
import pytest
import tvm
from tvm import relax

from engine.pipeline import fuse_module
from engine.schedule.cpu.depthwise_rows import DepthwiseRows, plane_tasks, row_tile
from engine.schedule.cpu.rules import RULES, schedule_func
from engine.tuning.knobs import member_variants, schedule_knobs

AVX512 = tvm.target.Target({"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 2})
AVX2 = tvm.target.Target({"kind": "llvm", "mcpu": "haswell", "num-cores": 2})
RNG = np.random.default_rng(5)


def _dw_module(c, hw, stride=1, epilogue=True):
    w = RNG.standard_normal((c, 1, 3, 3)).astype("float32")
    b = RNG.standard_normal((1, c, 1, 1)).astype("float32")
    x = relax.Var("x", relax.TensorType((1, c, hw, hw), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(x, relax.const(w), strides=stride, padding=1, groups=c))
            if epilogue:
                y = bb.emit(relax.op.clip(relax.op.add(y, relax.const(b)), 0, 6))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    return fuse_module(bb.get()), w, (b if epilogue else None)


def _reference(x, w, b):
    c, hw = x.shape[1], x.shape[2]
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = sum(xp[:, :, i:i + hw, j:j + hw] * w[:, 0, i, j].reshape(1, c, 1, 1) for i in range(3) for j in range(3))
    return out if b is None else np.clip(out + b, 0, 6)


def _func(mod):
    (func,) = [f for gv, f in mod.functions_items() if isinstance(f, tvm.tirx.PrimFunc) and "conv" in gv.name_hint]
    return func


@pytest.mark.parametrize("planes", [None, False])
@pytest.mark.parametrize("c,hw,epilogue", [(48, 28, True), (32, 14, True), (16, 14, False), (6, 28, True),
                                             (16, 56, True)])  # four vectors per row, 2-row tiles
def test_rows_rule_numbers(c, hw, epilogue, planes):
    mod, w, b = _dw_module(c, hw, epilogue=epilogue)
    assert DepthwiseRows(planes).apply(_func(mod), AVX512) is not None
    x = RNG.standard_normal((1, c, hw, hw)).astype("float32")
    rules = [DepthwiseRows(planes), *RULES]
    sched = tvm.IRModule({gv: (schedule_func(f, AVX512, rules) if isinstance(f, tvm.tirx.PrimFunc) else f)
                          for gv, f in mod.functions_items()})
    vm = relax.VirtualMachine(tvm.compile(sched, target=AVX512), tvm.cpu())
    np.testing.assert_allclose(vm["main"](tvm.runtime.tensor(x)).numpy(), _reference(x, w, b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("c,hw,stride,target", [(32, 14, 2, AVX512),   # strided
                                                (32, 112, 1, AVX512),  # rows wider than four vectors
                                                (32, 7, 1, AVX512),    # narrower than half a vector
                                                (32, 56, 1, AVX2)])    # seven AVX2 vectors
def test_rows_rule_leaves_the_others(c, hw, stride, target):
    assert DepthwiseRows().apply(_func(_dw_module(c, hw, stride)[0]), target) is None


def _parallel_loops(func):
    from engine.parallel.tir_util import walk

    found = []
    walk(func.body, tvm.tirx.For, lambda f: found.append(f) if f.kind == tvm.tirx.ForKind.PARALLEL else None)
    return found


def test_many_planes_pad_in_the_task_and_few_run_row_tiles():
    """48 planes on 2 cores: a task is one plane, padded into its own scratch (one parallel
    loop, no padding pass); 6 planes: a task is a row tile after a parallel padding pass."""
    assert plane_tasks(48, 2) and not plane_tasks(6, 2) and not plane_tasks(48, 16)
    many = DepthwiseRows().apply(_func(_dw_module(48, 28)[0]), AVX512).mod["main"]
    (loop,) = _parallel_loops(many)
    assert int(loop.extent) == 48
    few = DepthwiseRows().apply(_func(_dw_module(6, 28)[0]), AVX512).mod["main"]
    assert [int(f.extent) for f in _parallel_loops(few)] == [6 * 30, 6 * 7]  # padded rows, then 4-row tiles


def test_row_tiles_keep_the_accumulators_in_registers():
    assert row_tile(28, 28, 16) == 4 and row_tile(14, 14, 16) == 7
    assert row_tile(56, 56, 16) == 2 and row_tile(28, 28, 8) == 2
    assert row_tile(7, 7, 16) is None and row_tile(112, 112, 16) is None


def test_rows_is_the_avx512_default_and_a_replayed_knob():
    func = _func(_dw_module(32, 14)[0])
    variants = member_variants(func, AVX512)
    # the default rule's schedule first (the tuner takes the first as the measured default)
    assert variants[0][0] == ("dwrows",) and len(variants) > 1
    assert variants[0][1].script() == schedule_func(func, AVX512).script()
    assert schedule_knobs(func, AVX512, ("dwrows",)) is not None
    # the other task shape (row tiles here: 32 planes on 2 cores pad in the task) is a knob too
    assert variants[1][0] == ("dwrows", "rows")
    assert schedule_knobs(func, AVX512, ("dwrows", "rows")).script() == variants[1][1].script()
    sse = tvm.target.Target({"kind": "llvm", "mcpu": "x86-64", "num-cores": 2})
    assert ("dwrows",) not in [k for k, _ in member_variants(func, sse)]
