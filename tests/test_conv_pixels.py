"""The pixel-vectorised 1x1 conv rule (engine/schedule/cpu/conv_pixels.py): which convs it
takes, its numbers against numpy (whole pixel tiles, a tail, a tile across groups, no
epilogue), its knob space and its tile choice per ISA. No timing assertions."""

import numpy as np
import pytest
import tvm
from tvm import relax

from engine.pipeline import fuse_module
from engine.schedule.cpu.conv_pixels import Conv1x1Pixels, pixel_tiles
from engine.schedule.cpu.isa import AVX2, AVX512
from engine.schedule.cpu.rules import schedule_func, schedule_module
from engine.tuning.knobs import member_variants, schedule_knobs

TARGET = tvm.target.Target({"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 2})
RNG = np.random.default_rng(3)


def _conv_module(c, f, groups, hw, relu=True, k=1, pad=0, stride=1):
    w = RNG.standard_normal((f, c // groups, k, k)).astype("float32")
    b = RNG.standard_normal((1, f, 1, 1)).astype("float32")
    x = relax.Var("x", relax.TensorType((1, c, hw, hw), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(x, relax.const(w), strides=stride, padding=pad, groups=groups))
            if relu:
                y = bb.emit(relax.op.nn.relu(relax.op.add(y, relax.const(b))))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    return fuse_module(bb.get()), w, (b if relu else None)


def _reference(x, w, b, groups):
    f, cg = w.shape[:2]
    fg = f // groups
    out = np.concatenate([np.einsum("nchw,fc->nfhw", x[:, g * cg:(g + 1) * cg], w[g * fg:(g + 1) * fg, :, 0, 0])
                          for g in range(groups)], axis=1)
    return out if b is None else np.maximum(out + b, 0)


def _conv_func(mod):
    (func,) = [f for gv, f in mod.functions_items() if isinstance(f, tvm.tirx.PrimFunc) and "conv" in gv.name_hint]
    return func


def _run(mod, x):
    vm = relax.VirtualMachine(tvm.compile(schedule_module(mod, TARGET), target=TARGET), tvm.cpu())
    return vm["main"](tvm.runtime.tensor(x)).numpy()


@pytest.mark.parametrize("c,f,groups,hw,relu", [
    (272, 272, 4, 14, True),   # shufflenet: 68 channels per group, 196 pixels = 6 tiles of 32 + 4
    (136, 136, 4, 8, True),    # 34 per group, 64 pixels: whole tiles only
    (64, 40, 1, 7, False),     # 40 channels (half-vector tiles), 49 pixels, no epilogue
])
def test_pixel_rule_numbers(c, f, groups, hw, relu):
    mod, w, b = _conv_module(c, f, groups, hw, relu)
    assert Conv1x1Pixels().apply(_conv_func(mod), TARGET) is not None
    x = RNG.standard_normal((1, c, hw, hw)).astype("float32")
    np.testing.assert_allclose(_run(mod, x), _reference(x, w, b, groups), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("c,f,groups,hw,k,pad,stride", [
    (256, 64, 1, 14, 1, 0, 1),  # a reduce with whole channel vectors: the channel rule's
    (256, 512, 1, 14, 1, 0, 1),  # an expansion of a long reduction (16 vectors): the same
    (32, 32, 1, 14, 3, 1, 1),  # 3x3
    (68, 68, 4, 14, 1, 0, 2),  # strided
    (68, 68, 4, 14, 1, 1, 1),  # padded
])
def test_pixel_rule_leaves_other_convs(c, f, groups, hw, k, pad, stride):
    mod, _, _ = _conv_module(c, f, groups, hw, k=k, pad=pad, stride=stride)
    assert Conv1x1Pixels().apply(_conv_func(mod), TARGET) is None


@pytest.mark.parametrize("c,f,hw", [
    (16, 64, 28),   # squeezenet's expand1x1 (whole channel vectors, 784 pixels with a tail)
    (32, 192, 28),  # mobilenet's expansion
    (64, 64, 14),   # F = C: 4 vectors of reduction
    (128, 512, 7),  # 8 vectors, the longest AVX-512 takes
])
def test_short_expansions_are_pixel_vectorised(c, f, hw):
    """A 1x1 conv expanding a short reduction takes the pixel rule even with whole channel
    vectors (it stores NCHW rows instead of transposing the tile), and computes the conv."""
    mod, w, b = _conv_module(c, f, 1, hw)
    assert Conv1x1Pixels().apply(_conv_func(mod), TARGET) is not None
    x = RNG.standard_normal((1, c, hw, hw)).astype("float32")
    np.testing.assert_allclose(_run(mod, x), _reference(x, w, b, 1), rtol=1e-4, atol=1e-4)


def test_the_expansion_bound_is_in_vectors_of_the_isa():
    """AVX2 has 8 lanes: 64 input channels are its 8 vectors, 128 are past them (on 28-wide
    maps, where the channel tile has 16 channels x 4 columns: 8 accumulators)."""
    avx2 = tvm.target.Target({"kind": "llvm", "mcpu": "haswell", "num-cores": 2})
    assert Conv1x1Pixels().apply(_conv_func(_conv_module(64, 256, 1, 28)[0]), avx2) is not None
    assert Conv1x1Pixels().apply(_conv_func(_conv_module(128, 512, 1, 28)[0]), avx2) is None


def test_a_channel_tile_with_few_accumulators_takes_pixel_tiles():
    """AVX2 on 14-wide maps: the channel tile of one or two vectors is 8 channels x 7
    columns, 7 accumulators, too few to hide the FMA latency; 196 pixels make pixel tiles
    with more (the four-vector 32 x 2 channel tile ran slower there). 49 pixels (7x7)
    stay with the channel rule (measured slower as pixels), and so does AVX-512, whose
    channel tile there has 14."""
    avx2 = tvm.target.Target({"kind": "llvm", "mcpu": "haswell", "num-cores": 2})
    mod, w, b = _conv_module(256, 1024, 1, 14)
    assert Conv1x1Pixels().apply(_conv_func(mod), avx2) is not None
    assert Conv1x1Pixels().apply(_conv_func(mod), TARGET) is None
    assert Conv1x1Pixels().apply(_conv_func(_conv_module(512, 2048, 1, 7)[0]), avx2) is None
    x = RNG.standard_normal((1, 256, 14, 14)).astype("float32")
    sched = schedule_module(mod, avx2)
    lib = relax.build(sched, target=avx2)
    got = relax.VirtualMachine(lib, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
    np.testing.assert_allclose(got, _reference(x, w, b, 1), rtol=1e-4, atol=1e-4)


def test_pixel_tiles_follow_the_isa():
    # AVX-512: 16 lanes, 2 pixel vectors x up to 9 channels; AVX2: 8 lanes, up to 6
    assert pixel_tiles(272, 196, AVX512)[0] == (8, 2)
    assert pixel_tiles(272, 196, AVX2)[0] == (4, 2)
    # 49 pixels: two vectors leave a 17-pixel tail (more than a vector): one-vector tiles
    assert all(pv == 1 for _, pv in pixel_tiles(544, 49, AVX512)[:1])
    # the widest tile whose chunks keep every core busy: 64 channels x 3025 pixels (one
    # chunk per channel tile, the tail has one pixel) on 2 cores takes 16 rows (4 chunks);
    # on 4 cores 8 rows, two chunks each
    assert pixel_tiles(64, 3025, AVX512, cores=2)[0] == (16, 1)
    assert pixel_tiles(64, 3025, AVX512, cores=4)[0] == (8, 1)
    # 24 channels x 784 pixels: (8, 2) gives 3 chunks, one core idle half the time; (6, 2)
    # gives 4, and (12, 1) has no pixel tail, so its pixel tiles are chunks too
    assert pixel_tiles(24, 784, AVX512, cores=2)[0] == (6, 2)
    assert pixel_tiles(24, 784, AVX512, cores=1)[0] == (8, 2)
    # 8 channels: (2, 2) would fill the cores with 4 accumulators; (8, 1) has 8
    assert pixel_tiles(8, 784, AVX512, cores=2)[0] == (8, 1)
    for ft, pv in pixel_tiles(1000, 169, AVX512):
        assert 1000 % ft == 0 and 169 % (16 * pv) <= 16


def test_pixel_knobs_are_tuned_and_replayed():
    mod, _, _ = _conv_module(272, 272, 4, 14)
    func = _conv_func(mod)
    knobs = [k for k, _ in member_variants(func, TARGET)]
    assert knobs[0] == ("px", 8, 2) and len(knobs) > 1  # the default rule's choice first
    replayed = schedule_knobs(func, TARGET, knobs[1])
    assert replayed is not None and "T.parallel" in replayed.script()
    # the first variant is what the default rules build (the tuner measures it as the default)
    small = _conv_func(_conv_module(64, 24, 1, 28)[0])
    assert member_variants(small, TARGET)[0][1].script() == schedule_func(small, TARGET).script()
    # 40 channels: half-vector channel tiles stay in the space beside the pixel tiles
    dense = [k for k, _ in member_variants(_conv_func(_conv_module(64, 40, 1, 7)[0]), TARGET)]
    assert dense[0][0] == "px" and any(len(k) == 2 for k in dense)


def test_whole_pixel_tiles_run_pixels_outer_so_channel_bands_fuse():
    """AVX2 pixel tiles divide mobilenet_block's 784 pixels: with the channel tiles of one
    pixel tile in turn, a chunk writes one channel tile's pixels, a unit of channels the
    row-band code generator takes, so the expand -> depthwise channel bands are proposed as
    on AVX-512 (with the pixel tiles of a channel tile in turn they were not)."""
    from engine.session import Session

    plan = Session("mobilenet_block").propose("llvm", arch="haswell").plan
    bands = [d for d in plan.decisions if d.kind.value == "row-band vertical" and d.status.value == "proposed"]
    assert sorted(d.title() for d in bands) == ["block0/expand/conv | block0/dw/conv",
                                                "block1/expand/conv | block1/dw/conv"]
    assert all(d.evidence.rows.axis == "channels" for d in bands)
