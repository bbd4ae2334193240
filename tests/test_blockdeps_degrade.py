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
