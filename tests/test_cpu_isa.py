"""The CPU schedules size their register tiles from the target's ISA, not from the host."""

import re

import numpy as np
import pytest
import tvm
from tvm import relax

from engine.pipeline import fuse_module
from engine.schedule.cpu.conv import _choose_tile, accumulators, loads_per_fma, register_tiles
from engine.schedule.cpu.isa import AVX2, AVX512, MIN_ACCUMULATORS, NEON, SSE, isa_of
from engine.schedule.cpu.rules import Matmul, schedule_module


def _llvm(cpu, **extra):
    return tvm.target.Target({"kind": "llvm", "mcpu": cpu, "num-cores": 2, **extra})


@pytest.mark.parametrize("cpu,isa", [("haswell", AVX2), ("znver1", AVX2), ("skylake-avx512", AVX512),
                                     ("znver4", AVX512), ("x86-64", SSE)])
def test_isa_comes_from_the_target_not_the_host(cpu, isa):
    assert isa_of(_llvm(cpu)) == isa


def test_aarch64_is_neon():
    assert isa_of(_llvm("neoverse-n1", mtriple="aarch64-linux-gnu")) == NEON


@pytest.mark.parametrize("isa", [AVX2, AVX512, SSE, NEON])
def test_register_tiles_fit_the_register_file(isa):
    lanes = isa.lanes()
    for n_f, n_w in [(64, 56), (96, 55), (2048, 7), (24, 112)]:
        tiles = register_tiles(n_f, n_w, isa)
        assert tiles, (n_f, n_w)
        for ft, xt in tiles:
            assert n_f % ft == 0 and n_w % xt == 0
            vectors = -(-ft // lanes)
            assert vectors * xt + vectors + 2 <= isa.vector_registers and vectors * xt <= 18
    for it, jt in Matmul.tiles(128, 768, isa):
        vectors = -(-jt // lanes)
        assert it * vectors + vectors + 2 <= isa.vector_registers and it * vectors <= 18


def test_a_13_wide_map_is_one_avx2_tile():
    """squeezenet's conv10 (13x13 output): 13 one-vector rows fit AVX2's 16 registers; with
    12 the widest tile dividing 13 was one column (4.7x onnxruntime's latency)."""
    assert register_tiles(1008, 13, AVX2)[0] == (8, 13)


def test_without_a_broadcast_operand_the_tile_loads_least_per_fma():
    """A 55-wide map (squeezenet's and inception_v1's first convs): AVX2 and SSE take two
    channel vectors x 5 columns (7 loads per 10 FMAs) over one vector x 11 (12 per 11), which
    ran 0.84-0.95x; AVX-512, whose FMA broadcasts its operand, keeps the most accumulators."""
    assert _choose_tile(64, 55, AVX2) == (16, 5)
    assert _choose_tile(64, 55, SSE) == (8, 5)
    assert _choose_tile(64, 55, AVX512) == register_tiles(64, 55, AVX512)[0] == (16, 11)
    # 14-wide: four channel vectors x 2 columns (6 loads per 8 FMAs) over 8 x 7 (8 per 7):
    # resnet50's and inception_v2's 3x3 and strided 1x1 convs 0.84-0.93x per kernel
    assert _choose_tile(256, 14, AVX2) == (32, 2)
    assert _choose_tile(256, 14, AVX512) == (32, 7)
    # a tile narrower than a vector loads as much for fewer multiply-adds
    assert _choose_tile(1000, 13, AVX2) == (8, 13)
    for isa in (AVX2, SSE):
        lanes = isa.lanes()
        for n_f, n_w in [(64, 55), (192, 56), (256, 28), (1008, 13), (96, 27)]:
            tile = _choose_tile(n_f, n_w, isa)
            enough = [t for t in register_tiles(n_f, n_w, isa) if accumulators(t, lanes) >= MIN_ACCUMULATORS]
            assert accumulators(tile, lanes) >= MIN_ACCUMULATORS
            assert loads_per_fma(tile, lanes) == min(loads_per_fma(t, lanes) for t in enough), (isa.name, n_f, n_w)
    # no tile with enough accumulators (7-wide: 8 x 7 on AVX2): the most accumulators
    assert _choose_tile(2048, 7, AVX2) == register_tiles(2048, 7, AVX2)[0] == (8, 7)


def _conv_build(cpu, c=32, f=64, hw=28):
    """(scheduled TIR, assembly) of a c -> f 3x3 conv + relu on hw x hw maps for `cpu`."""
    w = np.random.default_rng(0).random((f, c, 3, 3), dtype="float32")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, c, hw, hw), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.nn.relu(relax.op.nn.conv2d(x, relax.const(w), padding=1)))
        bb.emit_func_output(out)
    target = _llvm(cpu)
    sched = schedule_module(fuse_module(bb.get()), target)
    conv = next(f for gv, f in sched.functions_items() if "conv2d" in gv.name_hint and isinstance(f, tvm.tirx.PrimFunc))
    lib = tvm.compile(tvm.IRModule({"conv": conv.with_attr("global_symbol", "conv")}), target=target)
    return conv.script(), lib.mod.inspect_source("asm")


def _conv_asm(cpu):
    return _conv_build(cpu)[1]


def test_an_avx2_build_uses_ymm_registers_without_spilling_more_than_avx512():
    """On an AVX-512 host an AVX2 (`--arch haswell`) conv used to get 512-bit tiles, twice
    the ymm accumulators there are registers: six times the stack traffic of the AVX-512
    build."""
    avx2, avx512 = _conv_asm("haswell"), _conv_asm("skylake-avx512")
    assert "%zmm" not in avx2 and "%ymm" in avx2 and "%zmm" in avx512
    stack = [len(re.findall(r"\(%rsp\)", a)) for a in (avx2, avx512)]
    assert stack[0] <= 1.5 * stack[1], stack


def _conv13_asm(monkeypatch, **isa_fields):
    """A 64 -> 256 3x3 conv on 13x13 maps (squeezenet's fire9 expand) for haswell."""
    import dataclasses
    import engine.schedule.cpu.isa as isa_mod

    monkeypatch.setattr(isa_mod, "AVX2", dataclasses.replace(AVX2, **isa_fields))
    return _conv_build("haswell", 64, 256, 13)


def test_a_wide_avx2_tile_reduces_over_channels_innermost(monkeypatch):
    """With the 3x3 taps innermost, LLVM keeps the 13 broadcast input columns of one tap for
    the next and spills them (AVX2 has no broadcast operand): the kernel ran 0.69x as fast."""
    tir, asm = _conv13_asm(monkeypatch)
    assert re.search(r"for ry, rx, rc in T.grid\(T.int64\(3\), T.int64\(3\), T.int64\(64\)\)", tir), tir
    _, taps_inner = _conv13_asm(monkeypatch, taps_outside_from=None)
    stack = [len(re.findall(r"\(%rsp\)", a)) for a in (asm, taps_inner)]
    assert 2 * stack[0] < stack[1], stack


def test_narrow_tiles_and_avx512_keep_the_taps_innermost():
    """7-column AVX2 tiles and every AVX-512 tile ran slower with the channels innermost."""
    assert AVX512.taps_outside_from is None
    assert _choose_tile(2048, 7, AVX2)[1] < AVX2.taps_outside_from
