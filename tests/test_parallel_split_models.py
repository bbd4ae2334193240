"""Models whose parallel branches start at a Split and pass through views (torch-exported
transformer blocks, Res2Net): the planner groups only independent kernels, finds the
q/k/v kernels after the Split, and the whole plan compiles to onnxruntime's outputs."""

from collections import Counter

import networkx as nx
import pytest

from engine.events import CompileOptions
from engine.parallel.outcome import DecisionResult
from engine.parallel.plan import DecisionKind, DecisionStatus
from engine.session import Session

MODELS = ("vit_block", "res2net_block")


@pytest.fixture(scope="module")
def sessions():
    return {name: Session(name) for name in MODELS}


def _joined(kg, ops: nx.DiGraph, a, b) -> bool:
    """A path between two members, in the kernel DAG or between their operators (ending at
    an operator only that member computes: one split over several kernels is no end)."""
    listed = Counter(o for k in kg.kernels for o in set(k.ops))

    def op_path(p, q):
        return any(x != y and listed[y] == 1 and nx.has_path(ops, x, y) for x in p.ops for y in q.ops)

    return (nx.has_path(kg.dag, a.kernel, b.kernel) or nx.has_path(kg.dag, b.kernel, a.kernel)
            or op_path(a, b) or op_path(b, a))


@pytest.mark.parametrize("name", MODELS)
def test_no_horizontal_decision_pairs_dependent_operators(sessions, name):
    session = sessions[name]
    proposal = session.propose("llvm")
    for d in proposal.plan.decisions:
        if d.kind.vertical:  # a producer and its consumer, by design
            continue
        ms = d.members
        assert not any(_joined(proposal.graph, session.graph.dag, a, b)
                       for i, a in enumerate(ms) for b in ms[i + 1:]), (d.id, [m.ops for m in ms])
        assert d.evidence.no_path


def test_split_kernel_feeds_its_views_readers(sessions):
    """t[i] of the Split's tuple output, and views of it, lead back to the Split kernel."""
    session = sessions["vit_block"]
    kg = session.propose("llvm").graph
    owner = {op: k.index for k in kg.kernels for op in k.ops}
    split = owner["attn/Split"]
    readers = set(kg.consumers(split))
    # q * scale and k^T read t[0], t[1]; attn @ v reads a view (reshape) of t[2]
    assert {owner["attn/Mul"], owner["attn/Transpose_1"], owner["attn/MatMul_1"]} <= readers
    # the output projection is downstream of norm1 through the views
    assert kg.has_path(owner["norm1/LayerNormalization"], owner["attn/proj/MatMul"])


def test_vit_qkv_group_after_the_split(sessions):
    session = sessions["vit_block"]
    proposal = session.propose("llvm")
    kg = proposal.graph
    owner = {op: k.index for k in kg.kernels for op in k.ops}
    # whatever kernels the fuse stage made of q, k and v after the Split (v is a view)
    qkv = {owner[op] for op in ("attn/Squeeze_0", "attn/Squeeze_1", "attn/Squeeze_2") if op in owner}
    assert len(qkv) >= 2
    group = [d for d in proposal.plan.decisions if set(d.kernels) == qkv]
    assert len(group) == 1, [d.kernels for d in proposal.plan.decisions]
    d = group[0]
    assert d.kind is DecisionKind.HORIZONTAL and d.status is DecisionStatus.PROPOSED
    assert d.evidence.no_path and d.evidence.no_member_reads_another
    assert all(kg.producers(k) == (owner["attn/Split"],) for k in qkv)


@pytest.mark.parametrize("name", MODELS)
def test_every_decision_applied_verifies(sessions, name):
    session = sessions[name]
    plan = session.propose("llvm").plan.with_approval("all")
    result = session.compile(CompileOptions(plan=plan, runs=3))
    assert result.verification.passed  # the verify stage raises otherwise
    outcome = {d.id: d.result for d in result.fusion.decisions}
    assert DecisionResult.ROLLED_BACK not in outcome.values()
    if name == "vit_block":
        qkv = [d.id for d in plan.decisions if d.kind is DecisionKind.HORIZONTAL]
        assert qkv and all(outcome[i] is DecisionResult.APPLIED for i in qkv)


def test_vit_block_is_torch_export_style():
    import onnx
    from engine.model import resolve_path

    nodes = {n.name: n for n in onnx.load(str(resolve_path("vit_block"))).graph.node}
    split = nodes["attn/Split"]
    assert len(split.output) == 3 and split.input[0] == nodes["attn/Transpose"].output[0]
    # the view's target shape is computed: Shape -> Gather -> Unsqueeze -> Concat -> Reshape
    assert nodes["attn/Reshape"].input[1] == nodes["attn/Concat"].output[0]
    assert nodes["attn/Gather_0"].input[0] == nodes["attn/Shape"].output[0]
    assert nodes["mlp/act/Erf"].input[0] == nodes["mlp/act/Div"].output[0]
