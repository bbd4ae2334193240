"""The whole-plane reduction rule (engine/schedule/cpu/plane_reduce.py): numbers against
numpy, which kernels it takes, the shape of its schedule. No timing assertions."""

import numpy as np
import pytest
import tvm
from tvm import relax

from engine.parallel.tir_util import walk
from engine.pipeline import fuse_module
from engine.schedule.cpu.plane_reduce import PlaneReduce
from engine.schedule.cpu.rules import RULES, schedule_func

HOST = tvm.target.Target({"kind": "llvm", "num-cores": 2})
RNG = np.random.default_rng(3)


def _module(c, hw, op):
    x = relax.Var("x", relax.TensorType((1, c, hw, hw), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            if op == "mean":
                y = bb.emit(relax.op.mean(x, axis=[2, 3], keepdims=True))
            elif op == "mean_flat":  # torch's x.mean([2, 3]): no kept axes
                y = bb.emit(relax.op.mean(x, axis=[2, 3], keepdims=False))
            elif op == "max":  # a global max pool's combiner
                y = bb.emit(relax.op.max(x, axis=[2, 3], keepdims=True))
            elif op == "sum":
                y = bb.emit(relax.op.sum(x, axis=[2, 3], keepdims=True))
            elif op == "global_avg":
                y = bb.emit(relax.op.nn.avg_pool2d(x, (hw, hw)))
            else:  # a 2x2 window: not the whole plane
                y = bb.emit(relax.op.nn.avg_pool2d(x, (2, 2), (2, 2)))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    return fuse_module(bb.get())


def _func(mod):
    (func,) = [f for f in mod.functions.values() if isinstance(f, tvm.tirx.PrimFunc)]
    return func


@pytest.mark.parametrize("c,hw,op", [(1000, 13, "mean"), (36, 7, "global_avg"), (6, 5, "sum"), (7, 3, "mean"),
                                     (64, 7, "mean_flat"), (24, 7, "max")])
def test_plane_sums_match_numpy(c, hw, op):
    mod = _module(c, hw, op)
    assert PlaneReduce().apply(_func(mod), HOST) is not None
    sched = tvm.IRModule({gv: (schedule_func(f, HOST, RULES) if isinstance(f, tvm.tirx.PrimFunc) else f)
                          for gv, f in mod.functions_items()})
    x = RNG.standard_normal((1, c, hw, hw)).astype("float32")
    vm = relax.VirtualMachine(tvm.compile(sched, target=HOST), tvm.cpu())
    want = x.sum(axis=(2, 3), keepdims=op != "mean_flat") / (1 if op == "sum" else hw * hw)
    if op == "max":
        want = x.max(axis=(2, 3), keepdims=True)
    np.testing.assert_allclose(vm["main"](tvm.runtime.tensor(x)).numpy(), want, rtol=1e-5, atol=1e-5)


def test_a_task_sums_eight_channels_side_by_side():
    sch = PlaneReduce().apply(_func(_module(1000, 13, "mean")), HOST)
    loops = []
    walk(sch.mod["main"].body, tvm.tirx.For, lambda f: loops.append(f))
    (par,) = [f for f in loops if f.kind == tvm.tirx.ForKind.PARALLEL]
    assert int(par.extent) == 1000 // 8  # one task per 8 channels, the division fused into it
    assert any(f.kind == tvm.tirx.ForKind.UNROLLED and int(f.extent) == 8 for f in loops)


def test_windowed_pools_are_left_to_the_other_rules():
    assert PlaneReduce().apply(_func(_module(16, 8, "window")), HOST) is None
