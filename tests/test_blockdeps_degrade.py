"""Block-dependency analysis degrades per edge: an edge it cannot read (a gather with
data-dependent indices) is mapped all-to-all with the reason; the rest is analysed."""

import onnx
from onnx import TensorProto, helper

from engine.blockdeps import EdgeClass
from engine.blockdeps.analysis import is_analysed
from engine.session import Session


def gather_model(path):
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [64, 32])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, [64, 32])
    nodes = [
        helper.make_node("Relu", ["input"], ["r"], name="relu"),
        helper.make_node("ArgMax", ["input"], ["idx"], name="argmax", axis=1, keepdims=0),
        helper.make_node("Clip", ["idx"], ["idx_c"], name="clip"),  # keeps indices in range
        helper.make_node("Gather", ["r", "idx_c"], ["g"], name="gather", axis=0),
        helper.make_node("Exp", ["input"], ["e"], name="exp"),
        helper.make_node("Add", ["g", "e"], ["s"], name="add"),
        helper.make_node("Sigmoid", ["s"], ["output"], name="sigmoid"),
    ]
    graph = helper.make_graph(nodes, "gather", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return str(path)


def test_a_data_dependent_gather_costs_only_its_own_edges(tmp_path):
    session = Session(gather_model(tmp_path / "gather.onnx"))
    deps = session.block_deps("llvm")
    unread = [e for e in deps.edges if not is_analysed(e)]
    read = [e for e in deps.edges if is_analysed(e)]
    assert unread, "the gather's index edge should not be readable"
    assert all(e.edge_class is EdgeClass.ALL_TO_ALL and "index expression" in e.notes[0] for e in unread)
    assert read, "the other edges are analysed"
    assert any("not analysed" in n for n in deps.notes)


def test_an_unreadable_kernel_costs_only_its_own_proposals(monkeypatch):
    """A kernel whose accesses cannot be read (simulated: res2net_block's concat) maps its
    own edges all-to-all; the block-level proposals between the other kernels (the conv
    after it -> its global pool) survive."""
    import engine.blockdeps.analysis as analysis
    from engine.blockdeps.index_eval import Unsupported
    from engine.parallel.plan import DecisionKind

    real = analysis.kernel_accesses

    def unreadable_concat(func, name, n_inputs):
        if name == "concatenate":
            raise Unsupported("statement Simulated")
        return real(func, name, n_inputs)

    expected = [d.title() for d in Session("res2net_block").propose("llvm").plan.decisions
                if d.kind is DecisionKind.VERTICAL_BLOCK]
    assert expected, "res2net_block proposes block-level pairs (conv3 -> its global pool)"
    monkeypatch.setattr(analysis, "kernel_accesses", unreadable_concat)
    session = Session("res2net_block")
    plan = session.propose("llvm").plan
    assert [d.title() for d in plan.decisions if d.kind is DecisionKind.VERTICAL_BLOCK] == expected
    deps = session.block_deps("llvm")
    into = [e for e in deps.edges if e.consumer.func == "concatenate"]
    assert into and all(not is_analysed(e) and "Simulated" in e.notes[0] for e in into)


def test_an_edge_too_large_to_compare_is_one_line_not_hours(monkeypatch):
    """shufflenet on cuda has conv -> conv edges of 87808 x 87808 blocks in no sorted order:
    comparing every pair took hours. Over the budget an edge degrades to all-to-all; when even
    that map would not fit, the whole-model analysis ends with one line naming the edge, and
    the vertical proposals just leave the edge out."""
    import pytest

    from engine.blockdeps import analysis, block_map
    from engine.errors import BlockDepsError

    session = Session("fire_module")
    scheduled = session.scheduled("llvm")
    monkeypatch.setattr(block_map, "MAX_CANDIDATE_PAIRS", 0)
    deps = session.block_deps("llvm")
    assert deps.edges and not any(is_analysed(e) for e in deps.edges)
    assert "over the analysis budget" in deps.edges[0].notes[0]
    monkeypatch.setattr(analysis, "MAX_DENSE_PAIRS", 0)
    with pytest.raises(BlockDepsError, match="does not fit in memory"):
        session.block_deps("llvm")
    assert analysis.analyze_edges(scheduled, lambda p, c: True) == ()
