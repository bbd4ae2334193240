"""The row-vectorised pooling rule (engine/schedule/cpu/pool.py): numbers against numpy,
which pools it takes, the shape of its schedule. No timing assertions."""

import numpy as np
import pytest
import tvm
from tvm import relax

from engine.pipeline import fuse_module
from engine.schedule.cpu.pool import Pool2dRows
from engine.schedule.cpu.rules import RULES, schedule_func

HOST = tvm.target.Target({"kind": "llvm", "num-cores": 2})  # runs on any CI machine
AVX2 = tvm.target.Target({"kind": "llvm", "mcpu": "haswell", "num-cores": 2})
RNG = np.random.default_rng(11)


def _pool_module(kind, c, hw, k=3, stride=1, pad=1, count_include_pad=False, relu=False):
    x = relax.Var("x", relax.TensorType((1, c, hw, hw), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            if kind == "max":
                y = bb.emit(relax.op.nn.max_pool2d(x, (k, k), (stride, stride), (pad,) * 4))
            else:
                y = bb.emit(relax.op.nn.avg_pool2d(x, (k, k), (stride, stride), (pad,) * 4,
                                                   count_include_pad=count_include_pad))
            if relu:
                y = bb.emit(relax.op.nn.relu(y))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    return fuse_module(bb.get())


def _reference(kind, x, k, pad, count_include_pad, relu):
    hw = x.shape[2]
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=fill)
    out_hw = hw + 2 * pad - k + 1
    taps = [xp[:, :, i:i + out_hw, j:j + out_hw] for i in range(k) for j in range(k)]
    if kind == "max":
        out = np.max(taps, axis=0)
    else:
        ones = np.pad(np.ones_like(x), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        count = k * k if count_include_pad else sum(ones[:, :, i:i + out_hw, j:j + out_hw]
                                                     for i in range(k) for j in range(k))
        out = np.sum(taps, axis=0) / count
    return np.maximum(out, 0) if relu else out


def _func(mod):
    (func,) = [f for gv, f in mod.functions_items() if isinstance(f, tvm.tirx.PrimFunc)]
    return func


@pytest.mark.parametrize("kind,c,hw,k,pad,cip,relu", [
    ("max", 32, 14, 3, 1, False, False),   # inception's pool branch
    ("max", 24, 7, 3, 1, False, True),     # a row narrower than a vector, + relu
    ("avg", 40, 14, 3, 1, False, False),   # inception_v2: padding left out of the count
    ("avg", 16, 28, 3, 1, True, False),    # padding counted
    ("max", 16, 28, 2, 0, False, False),   # no padding: the taps read the input itself
])
def test_pool_rule_numbers(kind, c, hw, k, pad, cip, relu):
    mod = _pool_module(kind, c, hw, k=k, pad=pad, count_include_pad=cip, relu=relu)
    assert Pool2dRows().apply(_func(mod), HOST) is not None
    sched = tvm.IRModule({gv: (schedule_func(f, HOST, RULES) if isinstance(f, tvm.tirx.PrimFunc) else f)
                          for gv, f in mod.functions_items()})
    vm = relax.VirtualMachine(tvm.compile(sched, target=HOST), tvm.cpu())
    x = RNG.standard_normal((1, c, hw, hw)).astype("float32")
    np.testing.assert_allclose(vm["main"](tvm.runtime.tensor(x)).numpy(), _reference(kind, x, k, pad, cip, relu),
                               rtol=1e-5, atol=1e-5)


def test_pool_rule_schedule_shape():
    """One parallel loop over channel planes; the padding a per-plane fill and copy; the
    window taps outside one vector row; no bounds check left in the taps."""
    sch = Pool2dRows().apply(_func(_pool_module("avg", 32, 14)), AVX2)
    text = str(sch.mod["main"])
    assert text.count("T.parallel(") == 1
    assert "pad_temp_pad_const" in text  # decompose_padding's fill
    taps = text[text.index('T.sblock("pool_sum_update")') - 200:text.index('T.sblock("pool_sum_update")')]
    assert "T.vectorized(T.int64(14))" in taps
    body = text[text.index('T.sblock("pool_sum_update")'):]
    assert "if_then_else" not in body.split("T.sblock(")[1]


@pytest.mark.parametrize("stride,hw,c,k", [(2, 28, 32, 3),    # strided taps would be gathers
                                           (1, 200, 32, 3),   # rows wider than MAX_ROW_VECTORS vectors
                                           (1, 14, 2, 3),     # fewer planes than two per core
                                           (1, 5, 32, 7)])    # a global window: 1-wide rows
def test_pool_rule_declines(stride, hw, c, k):
    mod = _pool_module("max", c, hw, k=k, stride=stride)
    assert Pool2dRows().apply(_func(mod), AVX2) is None
