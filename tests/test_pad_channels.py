"""Conv output channels padded to whole vectors before fusion (engine/schedule/cpu/pad_channels.py)."""

import numpy as np
import pytest
import tvm
from tvm import relax

from engine.pipeline import fuse_module
from engine.schedule.cpu.pad_channels import pad_conv_channels, padded_channels
from engine.schedule.cpu.rules import schedule_module

TARGET = tvm.target.Target({"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 2})


@pytest.mark.parametrize("n_out,lanes,want", [(1000, 16, 1008), (136, 16, 144), (136, 8, None), (24, 16, None),
                                              (32, 16, None), (8, 16, None), (100, 8, 104)])
def test_padding_only_where_it_pays(n_out, lanes, want):
    assert padded_channels(n_out, lanes) == want


def test_a_ragged_conv_is_padded_sliced_in_its_epilogue_and_still_right():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 16, 9, 9)).astype("float32")
    w = rng.standard_normal((136, 16, 3, 3)).astype("float32")
    b = rng.standard_normal((1, 136, 1, 1)).astype("float32")
    bb = relax.BlockBuilder()
    xv = relax.Var("x", relax.TensorType(x.shape, "float32"))
    with bb.function("main", [xv]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(xv, relax.const(w), padding=1))
            out = bb.emit_output(relax.op.nn.relu(relax.op.add(y, relax.const(b))))
        bb.emit_func_output(out)
    mod = bb.get()
    padded = pad_conv_channels(16)(mod)
    weights = [c.value.shape for c in _constants(padded["main"]) if len(c.value.shape) == 4 and c.value.shape[1] == 16]
    assert weights == [(144, 16, 3, 3)]
    sched = schedule_module(fuse_module(padded), TARGET)
    kernels = [gv.name_hint for gv, f in sched.functions_items() if isinstance(f, tvm.tirx.PrimFunc)]
    assert len(kernels) == 1 and "strided_slice" in kernels[0] and kernels[0].endswith("_prepacked")
    vm = relax.VirtualMachine(tvm.compile(sched, target=TARGET), tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(x)).numpy()
    ref = relax.VirtualMachine(tvm.compile(fuse_module(mod), target=TARGET), tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
    assert got.shape == (1, 136, 9, 9)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def _constants(func):
    found = []
    tvm.relax.analysis.post_order_visit(func, lambda e: found.append(e) if isinstance(e, tvm.ir.GenericConst) else None)
    return found


def test_a_ragged_1x1_conv_is_left_to_the_pixel_rule():
    """squeezenet's conv10 shape, small: 1000 channels of a 1x1 conv stay unpadded."""
    w = np.ones((1000, 8, 1, 1), "float32")
    bb = relax.BlockBuilder()
    xv = relax.Var("x", relax.TensorType((1, 8, 5, 5), "float32"))
    with bb.function("main", [xv]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.nn.conv2d(xv, relax.const(w)))
        bb.emit_func_output(out)
    padded = pad_conv_channels(16)(bb.get())
    assert [c.value.shape for c in _constants(padded["main"])] == [(1000, 8, 1, 1)]
