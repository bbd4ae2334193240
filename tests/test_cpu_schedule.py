"""Unit tests for the default CPU schedule (engine/schedule/cpu/rules.py).

Each test builds a tiny Relax module, runs the llvm pipeline with ``schedule_module``,
compares against numpy (or the unscheduled build) and checks that the kernels went
parallel. No timing assertions.
"""

import numpy as np
import pytest
import tvm
from tvm import relax

from engine.schedule.cpu.rules import Conv2dNCHW, Matmul, schedule_func, schedule_module
from engine.pipeline import fuse_module

TARGET = tvm.target.Target({"kind": "llvm", "num-cores": 2})
RNG = np.random.default_rng(0)


def _fuse(mod):
    return fuse_module(mod)


def _module(inputs, body):
    """inputs: list of (name, shape); body(bb, *vars) -> relax expr."""
    bb = relax.BlockBuilder()
    params = [relax.Var(n, relax.TensorType(s, "float32")) for n, s in inputs]
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(body(bb, *params))
        bb.emit_func_output(out)
    return bb.get()


def _run(mod, arrays):
    vm = relax.VirtualMachine(tvm.compile(mod, target=TARGET), tvm.cpu())
    return vm["main"](*[tvm.runtime.tensor(a) for a in arrays]).numpy()


def _prim_funcs(mod):
    return {gv.name_hint: f for gv, f in mod.functions_items() if isinstance(f, tvm.tirx.PrimFunc)}


def _check(mod, arrays, expected=None, parallel_in=()):
    fused = _fuse(mod)
    sched = schedule_module(fused, TARGET)
    funcs = _prim_funcs(sched)
    assert all(f.attrs.get("tirx.is_scheduled", False) for f in funcs.values() if "prepack" not in f.script())
    for key in parallel_in:  # the named kernels must carry a parallel loop
        hits = [f for n, f in funcs.items() if key in n]
        assert hits, f"no PrimFunc named like {key}: {list(funcs)}"
        assert all("T.parallel" in f.script() for f in hits), key
    got = _run(sched, arrays)
    if expected is None:
        expected = _run(fused, arrays)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    return sched


def _conv_ref(x, w, b, pad, stride):
    n, c, h, wd = x.shape
    f, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, f, oh, ow), np.float32)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i : i + stride * oh : stride, j : j + stride * ow : stride]
            out += np.einsum("nchw,fc->nfhw", patch, w[:, :, i, j])
    return np.maximum(out + b.reshape(1, f, 1, 1), 0)


@pytest.mark.parametrize("f,c,hw,k,pad,stride", [(32, 16, 14, 3, 1, 1), (24, 8, 13, 1, 0, 1), (16, 3, 15, 3, 0, 2)])
def test_conv2d_bias_relu(f, c, hw, k, pad, stride):
    x = RNG.standard_normal((1, c, hw, hw)).astype("float32")
    w = RNG.standard_normal((f, c, k, k)).astype("float32")
    b = RNG.standard_normal((f,)).astype("float32")

    def body(bb, xv):
        y = bb.emit(relax.op.nn.conv2d(xv, relax.const(w), strides=stride, padding=pad))
        y = bb.emit(relax.op.add(y, relax.const(b.reshape(1, f, 1, 1))))
        return relax.op.nn.relu(y)

    sched = _check(_module([("x", x.shape)], body), [x], _conv_ref(x, w, b, pad, stride), ["conv2d"])
    # The weight repack was split out and folded into a constant: the conv kernel reads
    # the packed [F/ft, C, KH, KW, ft] weight.
    conv = [fn for n, fn in _prim_funcs(sched).items() if "conv2d" in n]
    assert len(conv) == 1 and len(conv[0].params[1].ty.shape) == 5


def test_conv_rule_is_used():
    x = relax.Var("x", relax.TensorType((1, 16, 14, 14), "float32"))
    w = relax.Var("w", relax.TensorType((32, 16, 3, 3), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        out = bb.emit(relax.op.nn.relu(relax.op.nn.conv2d(x, w, padding=1)))
        bb.emit_func_output(out)
    fused = _fuse(bb.get())
    (name, func), = [(n, f) for n, f in _prim_funcs(fused).items() if "conv2d" in n]
    assert Conv2dNCHW().apply(func, TARGET) is not None  # the channel-vector conv rule matches
    scheduled = schedule_func(func, TARGET)
    assert "T.parallel" in scheduled.script() and "T.vectorized" in scheduled.script()
    # Weight as a runtime input (no epilogue, no folding): the repack runs in-kernel.
    xa = RNG.standard_normal((1, 16, 14, 14)).astype("float32")
    wa = RNG.standard_normal((32, 16, 3, 3)).astype("float32")
    got = _run(schedule_module(fused, TARGET), [xa, wa])
    np.testing.assert_allclose(got, _conv_ref(xa, wa, np.zeros(32, "float32"), 1, 1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m,k,n,parallel", [(64, 256, 48, True), (8, 64, 48, False)])
def test_matmul_bias(m, k, n, parallel):
    """Parallel from MIN_PARALLEL_MACS multiply-adds on; a smaller one runs on one core."""
    a = RNG.standard_normal((m, k)).astype("float32")
    w = RNG.standard_normal((k, n)).astype("float32")
    b = RNG.standard_normal((n,)).astype("float32")

    def body(bb, av):
        y = bb.emit(relax.op.matmul(av, relax.const(w)))
        return relax.op.add(y, relax.const(b))

    sched = _check(_module([("a", a.shape)], body), [a], a @ w + b, ["matmul"] if parallel else [])
    assert parallel or all("T.parallel" not in f.script() for n_, f in _prim_funcs(sched).items() if "matmul" in n_)


def test_max_pool():
    x = RNG.standard_normal((1, 32, 28, 28)).astype("float32")

    def body(bb, xv):
        return relax.op.nn.max_pool2d(xv, pool_size=3, strides=2, padding=1)

    _check(_module([("x", x.shape)], body), [x], None, ["pool"])


def test_avg_pool():
    x = RNG.standard_normal((1, 32, 28, 28)).astype("float32")

    def body(bb, xv):
        return relax.op.nn.avg_pool2d(xv, pool_size=3, strides=1, padding=1)

    _check(_module([("x", x.shape)], body), [x], None, ["pool"])


def test_softmax():
    x = RNG.standard_normal((64, 128)).astype("float32")

    def body(bb, xv):
        return relax.op.nn.softmax(xv, axis=-1)

    e = np.exp(x - x.max(-1, keepdims=True))
    _check(_module([("x", x.shape)], body), [x], e / e.sum(-1, keepdims=True), ["softmax"])


def test_concat():
    a = RNG.standard_normal((1, 32, 14, 14)).astype("float32")
    b = RNG.standard_normal((1, 48, 14, 14)).astype("float32")

    def body(bb, av, bv):
        return relax.op.concat([av, bv], axis=1)

    _check(
        _module([("a", a.shape), ("b", b.shape)], body),
        [a, b],
        np.concatenate([a, b], axis=1),
        ["concat"],
    )


def _group_conv_ref(x, w, b, pad, stride, groups):
    # bias + relu are per output channel: concatenating the per-group results is exact.
    cg, fg = x.shape[1] // groups, w.shape[0] // groups
    outs = [
        _conv_ref(x[:, g * cg : (g + 1) * cg], w[g * fg : (g + 1) * fg], b[g * fg : (g + 1) * fg], pad, stride)
        for g in range(groups)
    ]
    return np.concatenate(outs, axis=1)


@pytest.mark.parametrize(
    "f,c,hw,k,pad,stride,groups",
    [
        (64, 64, 14, 1, 0, 1, 4),  # grouped 1x1, 16 channels per group
        (24, 24, 9, 1, 0, 1, 4),  # 6 channels per group: 2-lane tile
        (32, 32, 14, 3, 1, 1, 32),  # depthwise 3x3
        (48, 48, 15, 3, 1, 2, 48),  # depthwise 3x3, stride 2
    ],
)
def test_grouped_conv2d(f, c, hw, k, pad, stride, groups):
    x = RNG.standard_normal((1, c, hw, hw)).astype("float32")
    w = RNG.standard_normal((f, c // groups, k, k)).astype("float32")
    b = RNG.standard_normal((f,)).astype("float32")

    def body(bb, xv):
        y = bb.emit(relax.op.nn.conv2d(xv, relax.const(w), strides=stride, padding=pad, groups=groups))
        y = bb.emit(relax.op.add(y, relax.const(b.reshape(1, f, 1, 1))))
        return relax.op.nn.relu(y)

    mod = _module([("x", x.shape)], body)
    ref = _group_conv_ref(x, w, b, pad, stride, groups)
    sched = _check(mod, [x], ref, ["conv2d"])
    # Scheduled by the conv rule (packed weight), not the generic fallback.
    conv = [fn for n, fn in _prim_funcs(sched).items() if "conv2d" in n]
    assert len(conv) == 1 and len(conv[0].params[1].ty.shape) == 5
    assert "T.vectorized" in conv[0].script()


def test_a_bare_matmul_by_a_weight_takes_the_matmul_rule():
    """No epilogue: the weight repack is the kernel's only other block, not a consumer (an LSTM's
    recurrent step, [1, 64] x [64, 256], ran the scalar fallback: 7.6 us a step, 2-core Zen 5)."""
    a = RNG.standard_normal((1, 64)).astype("float32")
    w = RNG.standard_normal((64, 256)).astype("float32")

    def body(bb, av):
        return relax.op.matmul(av, relax.const(w))

    fused = _fuse(_module([("a", a.shape)], body))
    (func,) = [f for n, f in _prim_funcs(fused).items() if "matmul" in n]
    assert Matmul().apply(func, TARGET) is not None
    sched = _check(_module([("a", a.shape)], body), [a], a @ w)
    (kernel,) = [f for n, f in _prim_funcs(sched).items() if "matmul" in n and "T.vectorized" in f.script()]
    assert len(kernel.params[1].ty.shape) == 3  # the packed [J/jt, K, jt] weight


def test_batch_matmul():
    # Attention-sized batched matmul writing its output directly (no epilogue).
    a = RNG.standard_normal((1, 4, 64, 32)).astype("float32")
    bm = RNG.standard_normal((1, 4, 32, 64)).astype("float32")

    def body(bb, av, bv):
        return relax.op.matmul(av, bv)

    fused = _fuse(_module([("a", a.shape), ("b", bm.shape)], body))
    (func,) = [f for n, f in _prim_funcs(fused).items() if "matmul" in n]
    assert Matmul().apply(func, TARGET) is not None  # the Matmul rule, not the fallback
    _check(_module([("a", a.shape), ("b", bm.shape)], body), [a, bm], a @ bm, ["matmul"])


def test_batch_matmul_transposed():
    # q @ k^T with the transpose fused in front (the attention score pattern).
    q = RNG.standard_normal((1, 4, 64, 32)).astype("float32")
    k = RNG.standard_normal((1, 4, 64, 32)).astype("float32")

    def body(bb, qv, kv):
        kt = bb.emit(relax.op.permute_dims(kv, [0, 1, 3, 2]))
        return relax.op.matmul(qv, kt)

    _check(
        _module([("q", q.shape), ("k", k.shape)], body), [q, k], q @ k.transpose(0, 1, 3, 2), ["matmul"]
    )


def test_softmax_4d_rowwise():
    x = RNG.standard_normal((1, 4, 64, 64)).astype("float32")

    def body(bb, xv):
        return relax.op.nn.softmax(xv, axis=-1)

    e = np.exp(x - x.max(-1, keepdims=True))
    sched = _check(_module([("x", x.shape)], body), [x], e / e.sum(-1, keepdims=True), ["softmax"])
    (sm,) = [f for n, f in _prim_funcs(sched).items() if "softmax" in n]
    assert sm.script().count("T.parallel") == 1  # one parallel region for the whole chain


AVX512 = tvm.target.Target({"kind": "llvm", "mcpu": "skylake-avx512", "num-cores": 2})


@pytest.mark.parametrize("c,per_row", [(3, True), (16, False)])
def test_short_reduction_writes_whole_rows(c, per_row):
    """A stem's reduction (3 channels x 3x3 taps, 27 steps): with row write-back the epilogue
    runs once per output row, straight under the parallel loop, after all the row's tiles;
    a longer reduction keeps it per register tile."""
    f, hw = 32, 29
    x = RNG.standard_normal((1, c, hw, hw)).astype("float32")
    w = RNG.standard_normal((f, c, 3, 3)).astype("float32")
    b = RNG.standard_normal((f,)).astype("float32")

    def body(bb, xv):
        y = bb.emit(relax.op.nn.conv2d(xv, relax.const(w), strides=2))
        y = bb.emit(relax.op.add(y, relax.const(b.reshape(1, f, 1, 1))))
        return relax.op.nn.relu(y)

    fused = _fuse(_module([("x", x.shape)], body))
    (func,) = [fn for n, fn in _prim_funcs(fused).items() if "conv2d" in n]
    sch = Conv2dNCHW().apply(func, AVX512)
    epilogue = [blk for blk in sch.get_child_blocks(sch.get_sblock("root"))][-1]
    # (par, n, f, y, x) per row; (par, x tile, n, f, y, x) per tile
    assert len(sch.get_loops(epilogue)) == (5 if per_row else 6)
    vm = relax.VirtualMachine(tvm.compile(schedule_module(fused, AVX512), target=AVX512), tvm.cpu())
    np.testing.assert_allclose(vm["main"](tvm.runtime.tensor(x)).numpy(), _conv_ref(x, w, b, 0, 2),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("f,c,hw,rows_outer", [(16, 64, 16, True), (64, 64, 4, False), (64, 16, 16, False)])
def test_a_1x1_reduction_runs_rows_outside_its_channel_tiles(f, c, hw, rows_outer):
    """Parallel chunks of a 1x1 conv whose input outweighs its weights and its output run
    (row, channel tile): consecutive chunks write the channel tiles of one row, so a core
    reads the input rows of its half only. A conv whose weights outweigh its input (a
    14x14/7x7 layer) or an expansion keeps (channel tile, row): a core reads half the weights."""
    from engine.blockdeps.facts import AccessKind
    from engine.blockdeps.footprints import block_boxes
    from engine.blockdeps.kernel_access import kernel_accesses

    w = RNG.standard_normal((f, c, 1, 1)).astype("float32")
    fused = _fuse(_module([("x", (1, c, hw, hw))], lambda bb, xv: relax.op.nn.relu(
        relax.op.nn.conv2d(xv, relax.const(w)))))
    (func,) = [fn for n, fn in _prim_funcs(fused).items() if "conv2d" in n]
    scheduled = Conv2dNCHW().apply(func, TARGET).mod["main"]
    out = len(scheduled.params) - 1
    written = block_boxes(kernel_accesses(scheduled, "conv", out), out, AccessKind.WRITE)
    # chunk 1 writes the next channel tile of row 0 (rows outer) or row 1 of the first tile
    assert (written.lo[1, 2], written.lo[1, 1] > 0) == ((0, True) if rows_outer else (1, False))
    x = RNG.standard_normal((1, c, hw, hw)).astype("float32")
    got = _run(schedule_module(fused, TARGET), [x])
    np.testing.assert_allclose(got, _conv_ref(x, w, np.zeros(f, "float32"), 0, 1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("c,f,k,stride,pad", [(8, 16, 3, 2, 1), (16, 32, 1, 1, 0)])
def test_a_conv_transpose_takes_a_conv_rule_with_its_weight_packed_at_compile_time(c, f, k, stride, pad):
    """ConvTranspose's kernel makes its weight from the param ([C, F, KH, KW] read transposed
    and flipped): that copy is folded into the repack, which then reads the param and is
    split out (SplitLayoutRewritePreproc stopped the compile: "The preproc buffer is not
    found in the original primfunc")."""
    x = RNG.standard_normal((1, c, 7, 6)).astype("float32")
    w = RNG.standard_normal((c, f, k, k)).astype("float32")
    b = RNG.standard_normal((1, f, 1, 1)).astype("float32")

    def body(bb, xv):
        y = bb.emit(relax.op.nn.conv2d_transpose(xv, relax.const(w), strides=stride, padding=pad))
        return relax.op.add(y, relax.const(b))

    sched = _check(_module([("x", x.shape)], body), [x], parallel_in=["conv2d_transpose"])
    (kernel,) = [fn for n, fn in _prim_funcs(sched).items() if "conv2d_transpose" in n]
    assert len(kernel.params[1].ty.shape) == 5 and "T.vectorized" in kernel.script()
