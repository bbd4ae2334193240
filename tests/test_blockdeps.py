"""BlockDepend: block-level dependency maps between kernels, checked by hand on tiny
hand-scheduled modules and on the real dlight/CPU schedules of sample and zoo models."""

from dataclasses import dataclass

import numpy as np
import pytest
import tvm
from tvm import relax, s_tir, te, tirx

from engine.blockdeps import (BlockAxis, BlockDepsError, EdgeClass, Method, analyze_edge, analyze_model,
                              block_dependency_graph, block_graph_dot, block_regions, classify,
                              kernel_grids, resolve_edge)
from engine.blockdeps.block_map import DEFAULT_FEW_BOUND


# --- tiny hand-scheduled modules ----------------------------------------------------------

@dataclass(frozen=True)
class FakeScheduled:
    """The parts of a CompileResult the analysis reads."""

    module: tvm.IRModule
    kernels: tuple = ()
    model: str = "hand"
    target: str = "cuda"


def _bind(func, block: str, split: dict[int, int], grid: list[int]):
    """Split loops `split` (loop position -> inner factor), bind the outer parts listed in
    `grid` (positions, slowest first) to blockIdx.y/x, keep the rest serial."""
    sch = s_tir.Schedule(func)
    b = sch.get_sblock(block)
    loops = sch.get_loops(b)
    outer, inner = {}, {}
    for pos, factor in split.items():
        outer[pos], inner[pos] = sch.split(loops[pos], [None, factor])
    grid_loops = [outer.get(p, loops[p]) for p in grid]
    rest = [l for i, l in enumerate(loops) if i not in grid]
    rest = [inner[i] if i in inner else l for i, l in zip([i for i in range(len(loops)) if i not in grid], rest)]
    rest += [inner[p] for p in grid if p in inner]
    sch.reorder(*grid_loops, *rest)
    tags = ["blockIdx.x"] if len(grid_loops) == 1 else ["blockIdx.y", "blockIdx.x"]
    for loop, tag in zip(grid_loops, tags):
        sch.bind(loop, tag)
    return sch.mod["main"]


def _module(inputs: dict[str, tuple], calls: list[tuple]) -> tvm.IRModule:
    """main(inputs) calling `calls` = [(name, primfunc, [arg names], out shape)] in order;
    each call's result is named like the call."""
    bb = relax.BlockBuilder()
    params = {n: relax.Var(n, relax.TensorType(s, "float32")) for n, s in inputs.items()}
    with bb.function("main", list(params.values())):
        with bb.dataflow():
            env = dict(params)
            last = None
            for name, func, args, shape in calls:
                gv = bb.add_func(func, name)
                last = env[name] = bb.emit(relax.call_tir(gv, [env[a] for a in args],
                                                          relax.TensorType(shape, "float32")))
            out = bb.emit_output(last)
        bb.emit_func_output(out)
    return bb.get()


def _elementwise_chain():
    n = 64
    a = te.placeholder((n,), "float32", name="A")
    b = te.compute((n,), lambda i: a[i] * 2.0, name="B")
    f = _bind(te.create_prim_func([a, b]), "B", {0: 16}, [0])
    return FakeScheduled(_module({"x": (n,)}, [("k1", f, ["x"], (n,)), ("k2", f, ["k1"], (n,))]))


def _conv1x1_conv3x3(rows_per_block=2):
    c, h, w = 4, 8, 6
    x = te.placeholder((c, h, w), "float32", name="X")
    w1 = te.placeholder((c, c), "float32", name="W1")
    k = te.reduce_axis((0, c), name="k")
    y = te.compute((c, h, w), lambda o, i, j: te.sum(x[k, i, j] * w1[o, k], axis=k), name="Y")
    f1 = _bind(te.create_prim_func([x, w1, y]), "Y", {1: rows_per_block}, [1])
    p = te.placeholder((c, h, w), "float32", name="P")
    w3 = te.placeholder((c, c, 3, 3), "float32", name="W3")
    kc, dy, dx = te.reduce_axis((0, c), "kc"), te.reduce_axis((0, 3), "dy"), te.reduce_axis((0, 3), "dx")

    def tap(kk, i, j):
        inside = tirx.all(i >= 0, i < h, j >= 0, j < w)
        return tirx.if_then_else(inside, p[kk, i, j], tirx.const(0.0, "float32"))

    z = te.compute((c, h, w), lambda o, i, j: te.sum(tap(kc, i + dy - 1, j + dx - 1) * w3[o, kc, dy, dx],
                                                     axis=[kc, dy, dx]), name="Z")
    f3 = _bind(te.create_prim_func([p, w3, z]), "Z", {1: rows_per_block}, [1])
    return FakeScheduled(_module({"x": (c, h, w), "w1": (c, c), "w3": (c, c, 3, 3)},
                                 [("conv1", f1, ["x", "w1"], (c, h, w)), ("conv3", f3, ["conv1", "w3"], (c, h, w))]))


def _matmul_matmul():
    m, kk, n = 16, 8, 8
    a = te.placeholder((m, kk), "float32", name="A")
    b = te.placeholder((kk, n), "float32", name="B")
    r = te.reduce_axis((0, kk), "r")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    # producer: 4x2 grid of (4-row strip, 4-column tile); consumer: 4-row strips
    f1 = _bind(te.create_prim_func([a, b, c]), "C", {0: 4, 1: 4}, [0, 1])
    a2 = te.placeholder((m, n), "float32", name="A2")
    b2 = te.placeholder((n, n), "float32", name="B2")
    r2 = te.reduce_axis((0, n), "r2")
    d = te.compute((m, n), lambda i, j: te.sum(a2[i, r2] * b2[r2, j], axis=r2), name="D")
    f2 = _bind(te.create_prim_func([a2, b2, d]), "D", {0: 4}, [0])
    return FakeScheduled(_module({"a": (m, kk), "b": (kk, n), "e": (n, n)},
                                 [("mm1", f1, ["a", "b"], (m, n)), ("mm2", f2, ["mm1", "e"], (m, n))]))


def _rows_then_column_sum():
    r, c = 16, 8
    a = te.placeholder((r, c), "float32", name="A")
    b = te.compute((r, c), lambda i, j: te.exp(a[i, j]), name="B")
    f1 = _bind(te.create_prim_func([a, b]), "B", {0: 4}, [0])  # tiled over rows
    x = te.placeholder((r, c), "float32", name="X")
    k = te.reduce_axis((0, r), "k")
    s = te.compute((c,), lambda j: te.sum(x[k, j], axis=k), name="S")  # reduces the tiled axis
    f2 = _bind(te.create_prim_func([x, s]), "S", {0: 2}, [0])
    return FakeScheduled(_module({"a": (r, c)}, [("exp", f1, ["a"], (r, c)), ("colsum", f2, ["exp"], (c,))]))


def _concat():
    r, c = 8, 4
    a = te.placeholder((r, c), "float32", name="A")
    pa = te.compute((r, c), lambda i, j: a[i, j] + 1.0, name="PA")
    fa = _bind(te.create_prim_func([a, pa]), "PA", {0: 2}, [0])
    x = te.placeholder((r, c), "float32", name="X")
    y = te.placeholder((r, c), "float32", name="Y")
    cat = te.compute((2 * r, c), lambda i, j: tirx.if_then_else(i < r, x[tirx.min(i, r - 1), j],
                                                                y[tirx.max(i - r, 0), j]), name="CAT")
    fc = _bind(te.create_prim_func([x, y, cat]), "CAT", {0: 2}, [0])  # 8 blocks of 2 rows
    return FakeScheduled(_module({"a": (r, c), "b": (r, c)},
                                 [("pa", fa, ["a"], (r, c)), ("pb", fa, ["b"], (r, c)),
                                  ("cat", fc, ["pa", "pb"], (2 * r, c))]))


def _both(scheduled, producer, consumer):
    fast = analyze_edge(scheduled, producer, consumer, Method.FAST)
    exact = analyze_edge(scheduled, producer, consumer, Method.EXACT)
    assert fast.method is Method.FAST and exact.method is Method.EXACT
    assert exact.is_within(fast), "the exact map must never be looser than the fast one"
    return fast, exact


def test_elementwise_after_elementwise_is_one_to_one():
    s = _elementwise_chain()
    grids = kernel_grids(s)
    assert [g.blocks for g in grids] == [4, 4] and grids[0].axis is BlockAxis.BLOCK_IDX
    fast, exact = _both(s, 0, 1)
    assert exact.as_sets() == [{0}, {1}, {2}, {3}]
    assert fast.same_map(exact) and fast.boxes_exact
    assert exact.edge_class is EdgeClass.ONE_TO_ONE
    auto = analyze_edge(s, 0, 1, Method.AUTO)
    assert auto.method is Method.FAST  # boxes provably exact: no need for the owner map
    # one producer block each: all 4 could start early (blocks finish in no guaranteed order,
    # so block 3 is no exception for needing the last-launched producer block)
    assert auto.earliest_start().tolist() == [0, 1, 2, 3] and auto.early_blocks == 4


def test_conv1x1_to_conv3x3_rows_is_one_to_few_halo():
    s = _conv1x1_conv3x3()
    fast, exact = _both(s, 0, 1)
    # 8 rows, 2 per block: consumer block b needs rows 2b-1 .. 2b+2 -> blocks b-1, b, b+1.
    assert exact.producers_of(0) == (0, 1)
    assert exact.producers_of(1) == (0, 1, 2)
    assert exact.producers_of(2) == (1, 2, 3)
    assert exact.producers_of(3) == (2, 3)
    assert exact.edge_class is EdgeClass.ONE_TO_FEW and exact.fan_in_max == 3
    assert fast.same_map(exact)  # padding conditions narrow the relaxed taps exactly
    assert exact.earliest_start().tolist() == [1, 2, 3, 3]
    assert exact.early_blocks == 4  # each needs 2-3 of the 4 producer blocks, never all
    assert classify(exact.indptr, exact.indices, 4, few_bound=2) is EdgeClass.PARTIAL


def test_matmul_to_matmul_depends_on_the_row_strip():
    s = _matmul_matmul()
    grids = kernel_grids(s)
    assert grids[0].shape == (4, 2) and grids[1].shape == (4,)
    fast, exact = _both(s, 0, 1)
    # producer blocks are (row strip y, column tile x) -> linear 2y + x
    assert exact.as_sets() == [{0, 1}, {2, 3}, {4, 5}, {6, 7}]
    assert fast.same_map(exact)
    assert exact.edge_class is EdgeClass.ONE_TO_FEW and exact.fan_out_max == 1


def test_reduction_over_the_tiled_axis_is_all_to_all():
    s = _rows_then_column_sum()
    fast, exact = _both(s, 0, 1)
    assert exact.as_sets() == [{0, 1, 2, 3}] * 4
    assert exact.edge_class is EdgeClass.ALL_TO_ALL and fast.edge_class is EdgeClass.ALL_TO_ALL
    assert exact.early_blocks == 0


def test_concat_blocks_of_one_input_do_not_wait_for_the_other():
    s = _concat()
    deps = analyze_model(s, Method.EXACT)
    a_edge, b_edge = deps.edge(0, 2), deps.edge(1, 2)
    # concat rows 0..7 come from A (blocks 0..3), rows 8..15 from B (blocks 4..7)
    assert a_edge.as_sets() == [{0}, {1}, {2}, {3}] + [set()] * 4
    assert b_edge.as_sets() == [set()] * 4 + [{0}, {1}, {2}, {3}]
    assert a_edge.edge_class is EdgeClass.ONE_TO_ONE
    fast = analyze_model(s, Method.FAST)
    for e_fast, e_exact in zip(fast.edges, deps.edges):
        assert e_exact.is_within(e_fast)
    # the two producers are independent kernels: their blocks could share one launch
    assert (0, 1) in deps.parallelism.independent_pairs


def test_classify_examples():
    one = np.array([0, 1, 2, 3])
    assert classify(one, np.array([0, 1, 2]), 3, 4) is EdgeClass.ONE_TO_ONE
    assert classify(np.array([0, 0, 0]), np.zeros(0, np.int64), 3, 4) is EdgeClass.INDEPENDENT
    assert classify(np.array([0, 3, 6]), np.array([0, 1, 2, 0, 1, 2]), 3, 4) is EdgeClass.ALL_TO_ALL
    assert classify(np.array([0, 2, 4]), np.array([0, 1, 1, 2]), 3, 4) is EdgeClass.ONE_TO_FEW
    assert classify(np.array([0, 5, 10]), np.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]), 12, 4) is EdgeClass.PARTIAL


def test_block_regions_of_hand_kernel():
    s = _conv1x1_conv3x3()
    regions = block_regions(s, 1, blocks=[1])
    read = next(r for r in regions if r.kind.value == "read" and r.buffer == "P")
    write = next(r for r in regions if r.kind.value == "write")
    assert (read.start, read.stop) == ((0, 1, 0), (4, 5, 6))  # rows 1..4 (halo of rows 2..3)
    assert (write.start, write.stop) == ((0, 2, 0), (4, 4, 6))


def test_graph_and_summary_of_hand_model():
    deps = analyze_model(_concat(), Method.EXACT)
    g = block_dependency_graph(deps)
    assert g.number_of_nodes() == 4 + 4 + 8
    assert g.number_of_edges() == deps.simplification.graph_edges == 8
    s = deps.simplification
    assert s.kernel_edges == 2 and s.implied_block_pairs == 2 * 4 * 8 and s.needed_block_pairs == 8
    assert s.removed_block_pairs == 56 and s.chains == 1 and s.kernels_in_chains == 3
    dot = block_graph_dot(deps)
    assert dot.startswith("digraph") and "cluster_k2" in dot


# --- real schedules -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def fire_cuda():
    from engine.session import Session

    s = Session("fire_module")
    return s, s.scheduled("cuda")


def test_fire_module_cuda_fast_over_approximates_and_auto_goes_exact(fire_cuda):
    session, scheduled = fire_cuda
    labels = {n.id: n.label for n in session.graph.nodes}
    fast = analyze_model(scheduled, Method.FAST, labels=labels)
    exact = analyze_model(scheduled, Method.EXACT, labels=labels)
    auto = analyze_model(scheduled, Method.AUTO, labels=labels)
    for f, e, a in zip(fast.edges, exact.edges, auto.edges):
        assert e.is_within(f)
        if f.boxes_exact:
            assert f.same_map(e)
        assert a.method is (Method.FAST if f.boxes_exact else Method.EXACT)
    sq_e1 = resolve_edge(exact, "squeeze1x1:expand1x1")
    assert sq_e1.edge_class is EdgeClass.ONE_TO_ONE
    # dlight's fused row index (m // 55, m % 55) makes the boxes loose: the fast map is wider
    f1 = resolve_edge(fast, "squeeze1x1:expand1x1")
    assert not f1.boxes_exact and f1.fan_in_max > 1 and f1.block_pairs > sq_e1.block_pairs
    assert resolve_edge(exact, "squeeze1x1:expand3x3").edge_class is EdgeClass.ONE_TO_FEW


def test_fire_module_llvm_edges_and_graph():
    from engine.session import Session

    scheduled = Session("fire_module").scheduled("llvm")
    fast = analyze_model(scheduled, Method.FAST)
    exact = analyze_model(scheduled, Method.EXACT)
    assert all(g.axis in (BlockAxis.PARALLEL_LOOP, BlockAxis.SINGLE) for g in exact.grids)
    for f, e in zip(fast.edges, exact.edges):
        assert e.is_within(f)
        if f.boxes_exact:
            assert f.same_map(e)
    # squeeze (rows of its 16 channels) -> expand1x1 (pixel-vectorised: a chunk per channel
    # tile) is all-to-all; expand1x1 -> concat is one-to-one (half the concat reads it)
    assert [e.edge_class for e in exact.edges[:3:2]] == [EdgeClass.ALL_TO_ALL, EdgeClass.ONE_TO_ONE]
    g = block_dependency_graph(exact)
    assert g.number_of_edges() == exact.simplification.graph_edges


def test_bad_kernel_index_raises_one_line(fire_cuda):
    _, scheduled = fire_cuda
    with pytest.raises(BlockDepsError, match="no edge from kernel k3 to kernel k0"):
        analyze_edge(scheduled, 3, 0)
    deps = analyze_model(scheduled, Method.FAST)
    with pytest.raises(BlockDepsError, match="unknown kernel 'nope'"):
        resolve_edge(deps, "nope:expand1x1")


@pytest.fixture(scope="module")
def squeezenet():
    from engine.session import Session

    return Session("zoo:squeezenet")


def test_squeezenet_cuda_fire_squeeze_to_expand(squeezenet):
    labels = {n.id: n.label for n in squeezenet.graph.nodes}
    scheduled = squeezenet.scheduled("cuda")  # nvidia/nvidia-h100, dlight
    deps = analyze_model(scheduled, Method.AUTO, labels=labels)
    for fire in range(2, 10):
        e1 = resolve_edge(deps, f"fire{fire}/squeeze1x1:fire{fire}/expand1x1")
        e3 = resolve_edge(deps, f"fire{fire}/squeeze1x1:fire{fire}/expand3x3")
        assert e1.edge_class is EdgeClass.ONE_TO_ONE, fire
        assert e3.edge_class is EdgeClass.ONE_TO_FEW, fire
    # fire2 on 55x55: dlight tiles the flattened h*55+w rows by 32 on sm_90; a 3x3 halo
    # of +-56 flat rows spans two tiles each side: 5 producer blocks, by hand:
    e3 = resolve_edge(deps, "fire2/squeeze1x1:fire2/expand3x3")
    assert e3.producer_grid.blocks == e3.consumer_grid.blocks == 95
    assert e3.producers_of(0) == (0, 1, 2)  # rows 0..31 read up to 31 + 56 = 87
    assert e3.producers_of(10) == (8, 9, 10, 11, 12)  # 320..351 read 264..407
    assert e3.producers_of(94) == (92, 93, 94)  # 3008..3024 read 2952..3024
    assert e3.fan_in_max == 5 <= DEFAULT_FEW_BOUND
    assert classify(e3.indptr, e3.indices, 95, few_bound=4) is EdgeClass.PARTIAL


@pytest.mark.slow
def test_squeezenet_exact_never_looser_everywhere(squeezenet):
    for target in ("cuda", "llvm"):
        scheduled = squeezenet.scheduled(target)
        fast = analyze_model(scheduled, Method.FAST)
        exact = analyze_model(scheduled, Method.EXACT)
        for f, e in zip(fast.edges, exact.edges):
            assert e.is_within(f), (target, f.producer, f.consumer)
            if f.boxes_exact:
                assert f.same_map(e)


@pytest.mark.slow
def test_inception_v1_cuda_all_edges():
    from engine.session import Session

    deps = analyze_model(Session("zoo:inception_v1").scheduled("cuda"), Method.AUTO)
    assert len(deps.edges) > 100
    counts = deps.class_counts()
    assert counts[EdgeClass.ALL_TO_ALL] > 0 and counts[EdgeClass.ONE_TO_FEW] > 0
    assert deps.simplification.removed_block_pairs > 0
