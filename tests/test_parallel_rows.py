"""Row-band vertical fusion (engine.parallel.rows, engine.parallel.codegen.cpu_rows): pairs
whose consumer rows read a window of producer rows are proposed, fused with the
intermediate in per-task scratch and verified; halos and uneven bands compute the same
values as the kernels alone; pairs that would not pay are refused with the reason."""

import numpy as np
import onnx
import pytest
import tvm
from onnx import helper, numpy_helper

from engine.events import CompileOptions, Stage
from engine.parallel.apply import DecisionResult
from engine.parallel.codegen.cpu_rows import WouldNotPay, fuse_rows_cpu, row_chain, row_link
from engine.parallel.plan import DecisionKind, DecisionStatus, FusionPlan
from engine.parallel.rows import sole_readers
from engine.parallel.tir_util import FusionUnsupported
from engine.session import Session

RNG = np.random.default_rng(0)


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """A 1x1 reduce -> 3x3 conv pair (resnet's bottleneck), 16 channels at 24x24."""
    session = Session(_chain_model(tmp_path_factory.mktemp("chain"), 16, 24, 1))
    return session, session.propose("llvm").plan


def _rows(plan):
    return [d for d in plan.decisions if d.kind is DecisionKind.VERTICAL_ROWS]


def test_a_reduce_to_3x3_pair_is_proposed_as_row_bands(chain):
    _, plan = chain
    (d,) = _rows(plan)
    link = d.evidence.rows
    assert link.rows == 24 and link.tasks >= 2 and 0 < link.recomputed < 0.2  # halo rows, computed twice
    assert any("rows [y, y+3)" in w for w in link.windows)  # a 3x3 row reads three padded rows
    # neither the reduce's output nor its padded copy reaches memory
    assert d.gain.kept_bytes == 16 * 24 * 24 * 4 + 16 * 26 * 26 * 4
    assert 0 < d.gain.scratch_bytes < d.gain.kept_bytes
    # row bands come first: of overlapping decisions the first approved applies
    assert plan.decisions[0].kind is DecisionKind.VERTICAL_ROWS
    assert FusionPlan.from_json(plan.to_json()) == plan  # the row link replays from JSON


def test_the_estimate_prices_recomputation_at_the_isas_rate_and_says_memory_is_not_priced(chain):
    """The CPU rate comes from the ISA (AVX-512 twice AVX2), not a fixed 20 GFLOP/s per core
    that priced resnet50's res2 1x1 -> 3x3 halo rows at -88 us for pairs measured 1.09x
    faster; the memory the band saves is not priced on llvm, and the plan says so."""
    from engine.parallel.gain import cpu_cost_model, cpu_flops_per_us
    from engine.schedule.cpu.isa import AVX2, AVX512
    from engine.targets import get_target
    from workbench.present.plan import decision_cells, plan_lines

    assert cpu_flops_per_us(AVX512) == 2 * cpu_flops_per_us(AVX2) > 50_000
    target = tvm.target.Target({"kind": "llvm", "mcpu": "haswell", "num-cores": 2})
    assert cpu_cost_model(target).flops_per_us_per_core == cpu_flops_per_us(AVX2)
    _, plan = chain
    (d,) = _rows(plan)
    assert not d.gain.memory_priced and d.gain.kept_bytes
    model = get_target("llvm").cost_model(get_target("llvm").target())  # this host's ISA and cores
    producer_us = d.members[0].flops / (model.flops_per_us_per_core * model.cores)
    assert d.gain.estimated_us == pytest.approx(4.0 - d.gain.recomputed * producer_us, abs=0.02)
    assert "the memory saved is not priced on this target" in "\n".join(plan_lines(plan, ()))
    assert "the memory saved is not priced" in decision_cells(d).evidence  # the TUI's table


def test_row_band_decisions_compile_verify_and_save_launches(chain):
    session, plan = chain
    ids = [d.id for d in _rows(plan)]
    result = session.compile(CompileOptions(plan=plan.with_approval(",".join(ids)), runs=3))
    assert result.verification.passed
    outcomes = {o.id: o for o in result.fusion.decisions}
    assert all(outcomes[i].result is DecisionResult.APPLIED for i in ids)
    assert outcomes[ids[0]].fused_kernel == f"rfused_{ids[0]}"
    assert (result.fusion.launches_before, result.fusion.launches_after) == (2, 1)


def test_an_intermediate_with_another_reader_is_not_proposed():
    """fire_module's squeeze output feeds both expands: it must exist in memory."""
    session = Session("fire_module")
    result = session.scheduled("llvm")
    assert sole_readers(result.module)(0, 1) is None
    producers = {d.members[0].labels[0] for d in _rows(session.propose("llvm").plan)}
    assert "squeeze1x1/conv" not in producers


def _saved(path, nodes, inputs, outputs, inits=()) -> str:
    """An opset-17 model of `nodes` written to `path` (its path as str)."""
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(inits)),
                              opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, path)
    return str(path)


def _chain_model(tmp_path, channels, size, stride, name="m"):
    """1x1 conv (2c -> c: a reduce, run by rows) -> relu -> 3x3 conv (pad 1, `stride`) -> relu."""
    c = channels
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 2 * c, size, size])
    out = (size - 1) // stride + 1
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, c, out, out])
    inits = [numpy_helper.from_array(RNG.standard_normal((c, 2 * c, 1, 1)).astype(np.float32) * 0.2, "w1"),
             numpy_helper.from_array(RNG.standard_normal((c, c, 3, 3)).astype(np.float32) * 0.1, "w2")]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"]), helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["b"], pads=[1, 1, 1, 1], strides=[stride, stride]),
             helper.make_node("Relu", ["b"], ["y"])]
    return _saved(tmp_path / f"{name}.onnx", nodes, [x], [y], inits)


def _pair(path):
    result = Session(path).scheduled("llvm")
    names = [k.func for k in result.kernels]
    assert len(names) == 2
    return result.module, names


def _run(func, args):
    target = tvm.target.Target({"kind": "llvm", "num-cores": 2})
    lib = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}), target=target)
    lib(*args)


@pytest.mark.parametrize("rows_outer", [True, False])
@pytest.mark.parametrize("stride,tasks,whole", [(1, 1, False), (1, 3, False), (1, 7, False), (2, 2, False),
                                               (2, 4, False), (1, 3, True), (2, 4, True)])
def test_halo_and_uneven_bands_compute_the_kernels_values(tmp_path, monkeypatch, stride, tasks, whole, rows_outer):
    """A 3x3 consumer reads rows y*s-1 .. y*s+1: bands recompute their halo rows and the
    padding pass pads only the rows of the band; 3 or 7 bands of 20 rows are uneven; a
    task walks its band row by row, or stage by stage (`whole`). The reduce's chunks run
    rows outside its channel tiles (its input outweighs its weights) or inside them."""
    import engine.schedule.cpu.conv as conv

    monkeypatch.setattr(conv, "rows_outer", lambda stmt: rows_outer)
    mod, (p, c) = _pair(_chain_model(tmp_path, 48, 20, stride))
    reduce_stage = row_chain(mod[p], mod[c], [p, c], 0)[2][0]
    assert reduce_stage.rows_outer is rows_outer and reduce_stage.tiles > 1
    _fused_matches_the_pair(mod[p], mod[c], [p, c], tasks, whole)


def _fused_matches_the_pair(producer, consumer, names, tasks, whole=False):
    """The row-band kernel's output equals the consumer's after the producer, run alone."""
    arrays = lambda params: [tvm.runtime.tensor(RNG.standard_normal([int(d) for d in v.ty.shape]).astype("float32"))
                             for v in params]
    p_in = arrays(producer.params[:-1])
    inter = tvm.runtime.empty([int(d) for d in producer.params[-1].ty.shape], "float32")
    c_in = arrays(consumer.params[:-1])
    c_in[0] = inter
    want = tvm.runtime.empty([int(d) for d in consumer.params[-1].ty.shape], "float32")
    _run(producer, p_in + [inter])
    _run(consumer, c_in + [want])
    got = tvm.runtime.empty(want.shape, "float32")
    _run(fuse_rows_cpu(producer, consumer, names, 0, tasks, whole), p_in + c_in[1:] + [got])
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_row_link_states_the_windows_and_the_halo_share(tmp_path):
    mod, (p, c) = _pair(_chain_model(tmp_path, 16, 20, 1))
    link = row_link(mod[p], mod[c], [p, c], 0, cores=2, tasks=2)
    assert link.tasks == 2 and link.rows == 20
    # padding row y reads producer row y-1; conv row y reads padded rows y..y+2
    assert link.windows[0].endswith("rows [y-1, y-1+1)") and link.windows[1].endswith("rows [y, y+3)")
    assert link.recomputed == pytest.approx(2 / 20)  # each of the two bands computes one halo row more


def test_pairs_that_would_not_pay_are_refused_with_the_reason(tmp_path):
    mod, (p, c) = _pair(_chain_model(tmp_path, 192, 8, 1, "wide"))  # 1.3 MiB of 3x3 weights
    with pytest.raises(WouldNotPay, match="weights would be re-read at every row step") as err:
        row_link(mod[p], mod[c], [p, c], 0, cores=2)
    assert err.value.link.rows == 8  # the pair's row facts, for the plan's rejected entry
    mod, (p, c) = _pair(_chain_model(tmp_path, 64, 6, 1, "small"))  # 6 rows: a halo row per 3
    with pytest.raises(FusionUnsupported, match="recomputes"):
        row_link(mod[p], mod[c], [p, c], 0, cores=2)


def test_the_plan_applies_on_a_model_with_halo(tmp_path):
    session = Session(_chain_model(tmp_path, 16, 24, 1))
    plan = session.propose("llvm").plan
    (d,) = _rows(plan)
    result = session.compile(CompileOptions(plan=plan.with_approval(d.id), timing=False, stop_after=Stage.VERIFY))
    assert result.verification.passed
    assert result.launches == 1


def test_tuning_searches_the_band_count_and_replays_it(tmp_path):
    from engine.tuning import TuneOptions
    from engine.tuning.row_bands import RowBandsRecord

    session = Session(_chain_model(tmp_path, 16, 64, 1))  # 64 rows: several band counts keep the halo small
    plan = session.propose("llvm").plan
    d = _rows(plan)[0]
    options = CompileOptions(plan=plan.with_approval(d.id), timing=False, stop_after=Stage.VERIFY,
                             tuning=TuneOptions(trials=0, cotune_trials=1, db_root=str(tmp_path)))
    first = session.compile(options)
    (rec,) = [r for r in first.cotuned if isinstance(r, RowBandsRecord)]
    points = [(b, w) for b, w, _ in rec.measured]
    assert (d.evidence.rows.tasks, False) in points and (d.evidence.rows.tasks, True) in points
    assert len({b for b, _ in points}) >= 2 and rec.layout in points  # several band counts, both walks
    assert all(ms > 0 for _, _, ms in rec.measured)
    assert first.verification.passed  # the kept band count is what was applied and verified
    again = session.compile(options)
    (replayed,) = [r for r in again.cotuned if isinstance(r, RowBandsRecord)]
    assert replayed.measured == rec.measured  # from the store, not measured again


@pytest.mark.parametrize("tasks", [1, 3, 7, 9])
def test_multi_row_chunks_fuse_as_row_units(tasks):
    """The AVX-512 depthwise rule with row-tile tasks (its shape on few planes) runs chunks
    of 4 rows of one channel: the chain takes them as row units, and bands start on them
    (7 units of 28 rows: 9 tasks are 7), so no unit is computed twice. mobilenet_block's
    depthwise -> project pair, scheduled for AVX-512, run as generic TIR here."""
    from engine.schedule.cpu.depthwise_rows import DepthwiseRows

    scheduled = Session("mobilenet_block").scheduled("llvm", arch="skylake-avx512")
    mod, names = scheduled.module, [k.func for k in scheduled.kernels][1:3]  # dw, project
    unscheduled = scheduled.resumable.unscheduled if scheduled.resumable is not None else None
    dw = [f for gv, f in unscheduled.functions_items() if gv.name_hint == names[0]] if unscheduled else []
    assert dw, "the depthwise kernel's unscheduled function"
    rows = DepthwiseRows(planes=False).apply(dw[0], tvm.target.Target({"kind": "llvm", "mcpu": "skylake-avx512",
                                                                       "num-cores": 2}))
    producer, consumer = rows.mod["main"].with_attr("tirx.is_scheduled", True), mod[names[1]]
    p_chain = row_chain(producer, consumer, names, 0)[2]
    assert (p_chain[0].rows, p_chain[0].per, p_chain[-1].per) == (7, 4, 1)
    link = row_link(producer, consumer, names, 0, cores=2, tasks=tasks)
    assert link.tasks == min(tasks, 7) and link.recomputed == 0.0
    _fused_matches_the_pair(producer, consumer, names, tasks)


def test_a_matmul_row_tile_is_a_unit_of_the_chain():
    """vit_block's qkv projection runs tiles of several token rows (the matmul rule's row
    tile: 4 on AVX-512, 2 on AVX2): its layer norm (one row per chunk) fuses by row bands
    of those units, and the fused model matches onnxruntime."""
    session = Session("vit_block")
    plan = session.propose("llvm").plan
    pairs = {tuple(m.labels[0] for m in d.members): d for d in _rows(plan)}
    link = pairs[("norm1/LayerNormalization", "attn/qkv/MatMul")].evidence.rows
    assert link.per > 1 and link.rows * link.per == 64  # 64 tokens
    assert f"{link.rows} units of {link.per} rows" in link.describe()
    d = pairs[("norm1/LayerNormalization", "attn/qkv/MatMul")]
    result = session.compile(CompileOptions(plan=plan.with_approval(d.id), timing=False, stop_after=Stage.VERIFY))
    assert result.verification.passed
    assert result.fusion.decisions[[o.id for o in result.fusion.decisions].index(d.id)].result is DecisionResult.APPLIED


def _pool_concat(path, pooled, other, pool_first):
    """max pool (3x3, pad 1) of x and relu of z, concatenated over channels."""
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, pooled, 14, 14])
    z = helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, [1, other, 14, 14])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, pooled + other, 14, 14])
    nodes = [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["z"], ["r"]),
             helper.make_node("Concat", ["p", "r"] if pool_first else ["r", "p"], ["y"], axis=1)]
    return Session(_saved(path, nodes, [x, z], [y]))


def test_a_band_of_channels_is_named_channels_and_verifies(tmp_path):
    """A window over channels (an average pool of the squares over 5 channels, then a product:
    TVM's form of LRN): the chunks write channels, not rows, and the plan says so."""
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 32, 14, 14])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 32, 14, 14])
    axis = helper.make_tensor("axis", onnx.TensorProto.INT64, [1], [1])
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Mul", ["r", "r"], ["sq"]),
             helper.make_node("Unsqueeze", ["sq", "axis"], ["sq5"]),
             helper.make_node("AveragePool", ["sq5"], ["avg5"], kernel_shape=[5, 1, 1], pads=[2, 0, 0, 2, 0, 0],
                              count_include_pad=1),
             helper.make_node("Squeeze", ["avg5", "axis"], ["avg"]),
             helper.make_node("Mul", ["r", "avg"], ["y"])]
    session = Session(_saved(tmp_path / "window.onnx", nodes, [x], [y], [axis]))
    plan = session.propose("llvm").plan
    # (the square -> channel-window sum pair is listed too, refused: 12% of it recomputed)
    (d,) = [d for d in _rows(plan) if d.status is DecisionStatus.PROPOSED]
    link = d.evidence.rows
    assert (link.axis, link.rows) == ("channels", 32)
    assert link.describe().startswith("channel bands:") and "rows" not in link.describe()
    assert link.windows == ("T_multiply_intermediate channel y reads pool_avg axis-2 slices [y, y+1)",)
    result = session.compile(CompileOptions(plan=plan.with_approval(d.id), runs=3))
    assert result.verification.passed and result.fusion.applied() == 1


def test_a_producer_read_by_few_bands_is_refused(tmp_path):
    """The pool's channels are the concat's second half: fused, the bands holding them would
    all run on one core of two, while the pool alone runs on both."""
    session = _pool_concat(tmp_path / "half.onnx", 16, 16, pool_first=False)
    (d,) = _rows(session.propose("llvm").plan)  # listed, rejected, with the reason
    assert d.status is DecisionStatus.REJECTED and d.evidence.rows.axis == "channels"
    assert d.reason.startswith("it would not pay: the consumer reads the producer in 16 of its 32 channels")
    module = session.scheduled("llvm").module
    names = [k.func for k in session.scheduled("llvm").kernels]
    pool, concat = [n for n in names if "pool" in n][0], [n for n in names if "concat" in n][0]
    with pytest.raises(FusionUnsupported, match="reads the producer in 16 of its 32 channels only"):
        row_link(module[pool], module[concat], [pool, concat], 1, cores=2)


def test_a_padded_stride_2_window_is_fitted_as_stride_2():
    """Rows [2y-1, 2y+2) clamped to the input (a 3x3 stride-2 pool, padded): the rows also
    fit a stride-1 window of half the input, which would read as no row locality; the
    tightest window is the one stated and fused."""
    from engine.parallel.codegen.cpu_rows import RowWindow, _fit_window

    y = np.arange(56)
    lo, hi = np.maximum(2 * y - 1, 0), np.minimum(2 * y + 2, 112)
    assert _fit_window(lo, hi, 112) == RowWindow(2, -1, 3, 112)
