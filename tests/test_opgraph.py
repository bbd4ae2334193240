import networkx as nx
import onnx
import pytest

from engine.model import load_model, resolve_path, zoo_names
from engine.opgraph import build_operator_graph
from engine.relax_import import import_relax
from tests.conftest import SAMPLES


@pytest.fixture(scope="module")
def inception():
    return build_operator_graph(load_model("zoo:inception_v1"))


def test_inception_v1_conv_count_matches_the_onnx_file(inception):
    raw = onnx.load(str(resolve_path("zoo:inception_v1")))
    expected = sum(n.op_type == "Conv" for n in raw.graph.node)
    assert expected == 57
    assert sum(n.op == "Conv" for n in inception.nodes) == expected


def test_inception_v1_graph_facts(inception):
    s = inception.summary()
    assert nx.is_directed_acyclic_graph(inception.dag)
    assert (s.ops, s.edges, s.depth, s.max_width) == (143, 169, 62, 4)
    # The first Inception module's four branches start on one level.
    level, ops = s.widest_levels[0]
    labels = sorted(inception.node(o).label for o in ops)
    # the pool branch's weightless maxpool is named after the branch it starts
    assert labels == ["inception_3a/1x1", "inception_3a/3x3_reduce", "inception_3a/5x5_reduce",
                      "inception_3a/maxpool"]
    conv = inception.node(next(o for o in ops if inception.node(o).label == "inception_3a/1x1"))
    n, c, h, w = conv.outputs[0].shape
    assert (n, c, h, w) == (1, 64, 27, 27)  # this export pools without ceil mode: 27, not 28
    assert conv.inputs[1].shape == (64, 192, 1, 1)
    assert conv.flops == 2 * c * h * w * 192 + c * h * w  # MACs x2 plus bias


def test_levels_are_longest_paths(inception):
    for src, dst in inception.dag.edges:
        assert inception.node(dst).level > inception.node(src).level


def test_squeezenet_fire_module_shape():
    g = build_operator_graph(load_model("zoo:squeezenet"))
    s = g.summary()
    assert (s.ops, s.edges, s.max_width) == (66, 73, 2)
    hist = dict(s.histogram)
    assert hist["Conv"] == 26 and hist["Concat"] == 8
    squeeze = next(n for n in g.nodes if n.label == "fire2/squeeze1x1")
    users = sorted(g.node(u).label for u in g.dag.successors(squeeze.id))
    assert users == ["fire2/squeeze1x1/relu"]
    relu = users[0]
    relu_id = next(n.id for n in g.nodes if n.label == relu)
    expands = sorted(g.node(u).label for u in g.dag.successors(relu_id))
    assert expands == ["fire2/expand1x1", "fire2/expand3x3"]


def test_ids_are_stable_and_unique():
    a = build_operator_graph(load_model("zoo:squeezenet"))
    b = build_operator_graph(load_model("zoo:squeezenet"))
    assert [n.id for n in a.nodes] == [n.id for n in b.nodes]
    assert len({n.id for n in a.nodes}) == len(a.nodes)


def test_sample_graph_json_roundtrip_fields():
    g = build_operator_graph(load_model(str(SAMPLES / "inception_block.onnx")))
    data = g.to_json()
    assert {"id", "op", "label", "level", "flops", "inputs", "outputs"} <= set(data["nodes"][0])
    assert len(data["edges"]) == len(g.edges)


@pytest.mark.parametrize("name", zoo_names())
def test_every_light_model_imports_into_relax(name):
    model = load_model(f"zoo:{name}")
    graph = build_operator_graph(model)
    relax_mod = import_relax(model, graph)
    bindings = [b.var for blk in relax_mod.mod["main"].body.blocks for b in blk.bindings]
    assert bindings and set(bindings) == set(relax_mod.owner)  # every binding traced to an op
    assert set(relax_mod.owner.values()) == {n.id for n in graph.nodes}
