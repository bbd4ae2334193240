"""The one timing model (engine.timing) and its presenter (workbench.present.timing): spreads,
shares of the median sum, noise beside every ratio and difference, the reference-moved
warning, the before/after mapping of one plan compile, and the CLI lines built from them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from engine.opgraph import Edge, OpNode, TensorInfo
from engine.parallel.outcome import DecisionOutcome, DecisionResult, PlanOutcome, group_timings
from engine.timing import (Change, KernelTime, Latency, Ratio, Spread, difference, kernel_sum, kernel_work, moved,
                           ratio, shares)
from workbench.present.fusion import fusion_lines, outcome_summary
from workbench.present.timing import (change_text, decision_change_text, group_lines, group_rows, kernel_rows,
                                      kernel_table_lines, latency_lines, ratio_text, reference_warning,
                                      same_run_text)


def test_spread_is_median_and_interquartile_range_of_the_samples():
    s = Spread.of([1.0, 2.0, 3.0, 4.0, 100.0])  # one outlier
    assert (s.median_ms, s.q1_ms, s.q3_ms, s.samples) == (3.0, 2.0, 4.0, 5)
    assert s.noise_ms == 2.0  # the IQR: the outlier does not widen it
    with pytest.raises(ValueError):
        Spread.of([])


def test_a_sum_of_spreads_adds_medians_and_quartiles():
    total = Spread.total([Spread(1.0, 0.9, 1.2), Spread(2.0, 1.8, 2.1)])
    assert total.median_ms == 3.0 and total.q1_ms == pytest.approx(2.7) and total.q3_ms == pytest.approx(3.3)
    assert Spread(0.5, 0.4, 0.6).scaled(3) == Spread(1.5, pytest.approx(1.2), pytest.approx(1.8))


def test_difference_and_ratio_carry_the_noise_of_both_sides():
    before, after = Spread(1.0, 0.95, 1.05), Spread(0.8, 0.78, 0.82)
    d = difference(before, after)
    assert d.value_ms == pytest.approx(-0.2) and d.noise_ms == pytest.approx(0.14)
    assert d.significant and d.verdict == "faster"
    r = ratio(before, after)
    assert r.value == pytest.approx(1.25) and r.noise == pytest.approx(1.25 * (0.1 / 1.0 + 0.04 / 0.8))
    assert r.significant
    close = difference(Spread(1.0, 0.9, 1.1), Spread(1.05, 0.95, 1.15))
    assert not close.significant and close.verdict == "within noise"
    assert difference(after, before).verdict == "slower"


def test_ratio_and_change_text_say_the_noise_and_what_the_sign_means():
    assert ratio_text(Ratio(0.9512, 0.0312)) == "0.95x ±0.03"
    assert change_text(Change(-0.029, 0.01), "fused − members") == "fused − members: −0.029 ms ±0.010 (faster)"
    assert change_text(Change(0.029, 0.01)) == "after − before: +0.029 ms ±0.010 (slower)"
    assert change_text(Change(0.005, 0.01)).endswith("(within noise)")


def _kt(name, median, q1, q3, calls=1, mean=None):
    return KernelTime(name, calls, (mean or median) * calls, mean or median, median, q1 * 0.5, q3 * 10, 0.0, q1, q3)


def test_shares_are_of_the_median_sum_not_of_outlier_driven_means():
    # the fire_module kernel of the issue: mean 2.802 ms pulled up by one 15.853 ms run
    times = [_kt("a", 0.8, 0.78, 0.85, mean=2.802), _kt("b", 0.1, 0.09, 0.11, calls=2), _kt("c", 0.0, 0.0, 0.0)]
    share = shares(times)
    assert share["a"] == pytest.approx(0.8) and share["b"] == pytest.approx(0.2) and share["c"] == 0.0
    total = kernel_sum(times)
    assert total.median_ms == pytest.approx(1.0)  # medians per inference: b twice
    assert times[1].per_inference == Spread(0.2, pytest.approx(0.18), pytest.approx(0.22))
    # rows made without quartiles (older reports): the spread is min–max
    assert KernelTime("x", 1, 1, 1, 1.0, 0.5, 2.0, 1.0).spread == Spread(1.0, 0.5, 2.0)


def test_latency_keeps_quartiles_and_falls_back_to_min_p90():
    lat = Latency.of([0.001, 0.0011, 0.0012, 0.0013, 0.02])
    assert lat.median_ms == pytest.approx(1.2) and lat.runs == 5
    assert lat.spread.q1_ms == pytest.approx(1.1) and lat.spread.q3_ms == pytest.approx(1.3)
    old = Latency(1.0, 0.9, 2.0, 1.5, 20)
    assert old.spread == Spread(1.0, 0.9, 1.5, 20)


def test_reference_moved_is_a_change_beyond_its_own_noise():
    first = Latency(423.55, 400, 450, 440, 20, 420.0, 427.0)
    second = Latency(329.62, 320, 340, 335, 20, 327.0, 332.0)
    change = moved(first.spread, second.spread)
    assert change is not None and change.value_ms == pytest.approx(-93.93) and change.noise_ms == pytest.approx(12)
    warning = reference_warning(first, second)
    assert warning.startswith("onnxruntime moved 423.55 -> 329.62 ms between the two compiles "
                              "(−93.93 ms, noise ±12.00)")
    still = Latency(424.0, 400, 450, 440, 20, 421.0, 428.0)
    assert moved(first.spread, still.spread) is None and reference_warning(first, still) is None
    assert reference_warning(None, second) is None


def _graph():
    """conv (3x8x8 -> 4x8x8, 3x3 weights) -> relu -> out; relu's output leaves the graph."""
    x, w, b = TensorInfo("x", (1, 3, 8, 8), "float32"), TensorInfo("w", (4, 3, 3, 3), "float32", True), \
        TensorInfo("b", (4,), "float32", True)
    c, r = TensorInfo("c", (1, 4, 8, 8), "float32"), TensorInfo("r", (1, 4, 8, 8), "float32")
    nodes = {"conv": OpNode("conv", 0, "Conv", "stem/conv", (x, w, b), (c,), (), 2 * 256 * 27 + 256, 0, 0),
             "relu": OpNode("relu", 1, "Relu", "stem/relu", (c,), (r,), (), 256, 0, 1)}
    return SimpleNamespace(node=nodes.__getitem__, dag=nodes, nodes=tuple(nodes.values()),
                           edges=(Edge("conv", "relu", "c"),))


def test_kernel_work_counts_what_a_fused_kernel_reads_and_writes_outside_itself():
    g = _graph()
    fused = kernel_work(g, ["conv", "relu"])
    assert fused.flops == 2 * 256 * 27 + 256 + 256
    assert fused.bytes == 4 * (192 + 108 + 4 + 256)  # x, w, b read; r written; c stays inside
    alone = kernel_work(g, ["conv"])
    assert alone.bytes == 4 * (192 + 108 + 4 + 256)  # c written for relu
    assert fused.gflops(0.01) == pytest.approx(fused.flops / 1e4) and fused.gbytes(0.0) is None


def test_kernel_rows_and_cli_lines_show_medians_spread_share_and_throughput():
    g = _graph()
    times = [_kt("fused_conv_relu", 0.01, 0.009, 0.012)]
    kernels = [SimpleNamespace(index=3, func="fused_conv_relu", ops=("conv", "relu"))]
    rows = kernel_rows([KernelTime(**{**vars(times[0]), "share": 1.0})], kernels, g)
    assert rows[0].median_ms == 0.01 and rows[0].ops == ("conv", "relu")
    assert rows[0].ids == "k3"  # the graph's and the Fusion tab's name for it
    assert rows[0].gflops == pytest.approx((2 * 256 * 27 + 512) / 1e4)
    lines = kernel_table_lines(rows)
    assert "share = a kernel's median over the sum of the kernel medians" in lines[0]
    assert lines[1].split() == ["kernel", "calls", "median", "IQR", "share", "GFLOP/s", "GB/s"]
    assert lines[2].split()[:5] == ["fused_conv_relu", "1", "0.010", "0.009–0.012", "100.0%"]


def test_an_operator_lowered_to_several_kernels_gives_none_of_them_a_throughput():
    g = _graph()
    times = [KernelTime(**{**vars(_kt(name, 0.01, 0.009, 0.012)), "share": 0.5}) for name in ("k_a", "k_b")]
    kernels = [SimpleNamespace(index=0, func="k_a", ops=("conv",)), SimpleNamespace(index=1, func="k_b", ops=("conv", "relu"))]
    rows = kernel_rows(times, kernels, g)
    assert [(r.gflops, r.gbs) for r in rows] == [(None, None), (None, None)]
    lines = kernel_table_lines(rows)
    assert all(line.split()[5:7] == ["—", "—"] for line in lines[2:])


def test_recurrent_operators_count_their_gate_matmuls():
    from engine.costs import estimate_flops

    t = lambda *shape: SimpleNamespace(shape=shape, dtype="float32")
    # LSTM, 16 steps, batch 1, input 64, hidden 64, one direction: W [1, 256, 64], R [1, 256, 64]
    flops = estimate_flops("LSTM", [t(16, 1, 64), t(1, 256, 64), t(1, 256, 64)], [t(16, 1, 1, 64)], {})
    assert flops == 2 * 16 * (256 * 64 * 2) + 16 * 256 * 4


def test_latency_lines_put_noise_beside_the_ratio_and_explain_the_kernel_sum():
    lat, ort = Latency(1.14, 1.0, 3.0, 2.0, 20, 1.10, 1.20), Latency(2.0, 1.9, 2.2, 2.1, 20, 1.95, 2.05)
    lines = latency_lines(lat, ort, [_kt("a", 0.5, 0.45, 0.55), _kt("b", 0.3, 0.25, 0.35)])
    assert lines[0] == "latency      1.140 ms median of 20 runs (IQR 1.100–1.200)"
    assert lines[1].endswith("-> ours/onnxruntime 0.57x ±0.08")
    assert lines[2].startswith("kernel sum   0.800 ms = 70% of end to end; the sum of kernel medians is not "
                               "the end-to-end latency")
    assert latency_lines(None, None) == []


def _kernel(index, func, ops):
    return SimpleNamespace(index=index, var=f"lv{index}", func=func, ops=ops)


def test_before_after_maps_each_fused_kernel_to_the_members_it_replaced():
    before = [_kernel(0, "squeeze", ("sq",)), _kernel(1, "expand1x1", ("e1",)), _kernel(2, "expand3x3", ("e3",)),
              _kernel(3, "concat", ("cat",))]
    after = [before[0], SimpleNamespace(index=1, var="lv_f", func="hfused_d3", ops=("e1", "e3")), before[3]]
    t = {"squeeze": Spread(0.1, 0.09, 0.11), "expand1x1": Spread(0.2, 0.19, 0.21),
         "expand3x3": Spread(0.3, 0.28, 0.32), "concat": Spread(0.05, 0.04, 0.06)}
    fused_t = {**t, "hfused_d3": Spread(0.4, 0.39, 0.41)}
    labels = {"sq": "squeeze1x1/conv", "e1": "expand1x1/conv", "e3": "expand3x3/conv", "cat": "concat"}
    groups = group_timings(before, after, {"hfused_d3": ("d3", (1, 2))}, t, fused_t, labels)
    assert [(g.kernel, g.members, g.decision) for g in groups] == [
        ("squeeze", ("squeeze",), ""), ("hfused_d3", ("expand1x1", "expand3x3"), "d3"), ("concat", ("concat",), "")]
    fused = groups[1]
    assert fused.labels == ("expand1x1/conv", "expand3x3/conv") and fused.ops == ("e1", "e3")
    assert fused.before == Spread(pytest.approx(0.5), pytest.approx(0.47), pytest.approx(0.53))
    assert fused.after == fused_t["hfused_d3"]
    rows = group_rows(PlanOutcome((), 4, 3, "ok", groups=groups))
    assert rows[1].label == "hfused_d3 ← expand1x1/conv, expand3x3/conv" and rows[0].label == "squeeze"
    assert rows[1].change.value_ms == pytest.approx(-0.1) and rows[1].change.verdict == "faster"
    assert rows[1].speedup.value == pytest.approx(1.25)
    # a kernel the unfused build did not time: no before, no ratio (never a made-up number)
    partial = group_timings(before, after, {"hfused_d3": ("d3", (1, 2))}, {"squeeze": t["squeeze"]}, fused_t)
    assert partial[1].before is None and group_rows(PlanOutcome((), 4, 3, "ok", groups=partial))[1].speedup is None


def test_identical_decisions_sharing_one_fused_kernel_keep_their_own_members():
    """Two identical blocks fuse into one deduplicated function (rfused_d0 for both
    calls): its calls stand for the first decision's members, then the second's."""
    before = [_kernel(0, "dw", ("a0",)), _kernel(1, "pw", ("b0",)), _kernel(2, "dw", ("a1",)), _kernel(3, "pw", ("b1",))]
    after = [SimpleNamespace(index=0, var="lv0", func="rfused_d0", ops=("a0", "b0")),
             SimpleNamespace(index=1, var="lv1", func="rfused_d0", ops=("a1", "b1"))]
    t = {"dw": Spread(0.1, 0.09, 0.11), "pw": Spread(0.2, 0.19, 0.21)}
    labels = {"a0": "block0/dw", "b0": "block0/pw", "a1": "block1/dw", "b1": "block1/pw"}
    groups = group_timings(before, after, {"rfused_d0": [("d0", (0, 1)), ("d1", (2, 3))]}, t,
                           {**t, "rfused_d0": Spread(0.25, 0.24, 0.26)}, labels)
    assert [(g.decision, g.labels) for g in groups] == [("d0", ("block0/dw", "block0/pw")),
                                                         ("d1", ("block1/dw", "block1/pw"))]


def test_cli_shows_the_before_after_table_and_the_same_run_end_to_end_with_signs():
    before = [_kernel(0, "expand1x1", ("e1",)), _kernel(1, "expand3x3", ("e3",)), _kernel(2, "concat", ("cat",))]
    after = [SimpleNamespace(index=0, var="lv_f", func="hfused_d0", ops=("e1", "e3")), before[2]]
    t = {"expand1x1": Spread(0.2, 0.19, 0.21), "expand3x3": Spread(0.3, 0.29, 0.31), "concat": Spread(0.05, 0.05, 0.05)}
    groups = group_timings(before, after, {"hfused_d0": ("d0", (0, 1))}, t,
                           {**t, "hfused_d0": Spread(0.471, 0.465, 0.475)}, {"e1": "expand1x1", "e3": "expand3x3"})
    d0 = DecisionOutcome("d0", DecisionResult.APPLIED, "", "hfused_d0", 2, 1, (0.2, 0.3), 0.471, 0.05)
    outcome = PlanOutcome((d0,), 3, 2, "matches onnxruntime", unfused_ms=1.086, fused_ms=1.097, e2e_noise_ms=0.04,
                          kernel_timing="each kernel timed alone", groups=groups,
                          unfused=Spread(1.086, 1.07, 1.09), fused=Spread(1.097, 1.08, 1.10))
    assert decision_change_text(d0) == "fused − members: −0.029 ms ±0.050 (within noise)"
    assert same_run_text(outcome) == ("unfused 1.086 ms -> fused 1.097 ms: 0.99x ±0.04 (within noise); "
                                      "fused − unfused: +0.011 ms ±0.040 (within noise)")
    assert "end to end, same run: unfused 1.086 ms -> fused 1.097 ms" in outcome_summary(outcome)
    plan = SimpleNamespace(decisions=(SimpleNamespace(id="d0", title=lambda: "expand1x1 | expand3x3"),))
    lines = fusion_lines(outcome, plan)
    assert lines[1] == ("fusion       end to end, same run: unfused 1.086 ms -> fused 1.097 ms: 0.99x ±0.04 "
                        "(within noise); fused − unfused: +0.011 ms ±0.040 (within noise)")
    row = next(line for line in lines if line.startswith("d0 "))
    assert row.split()[3:8] == ["0.500", "0.471", "−0.029", "±0.050", "1.06x"]
    table = group_lines(outcome)
    assert "delta = after − before (negative: faster)" in table[0]
    assert table[1].split() == ["group", "before", "ms", "after", "ms", "delta", "ms", "speedup"]
    assert table[2].split()[:8] == ["hfused_d0", "←", "expand1x1,", "expand3x3", "0.500", "0.471", "−0.029", "±0.050"]
    assert table[3].split()[:4] == ["concat", "0.050", "0.050", "0.000"]
    assert table[4].startswith("kernels, total")
