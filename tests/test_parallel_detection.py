"""Parallel structure detection and plan proposal on the bundled samples (llvm)."""

import pytest

from engine.parallel.plan import DecisionKind, DecisionStatus
from engine.session import Session


@pytest.fixture(scope="module")
def proposals():
    return {name: Session(name).propose("llvm")
            for name in ("fire_module", "mha_block", "moe_block", "inception_block")}


def _label_sets(plan):
    return [{m.labels[0] for m in d.members} for d in plan.decisions]


def test_fire_module_expand_pair(proposals):
    plan = proposals["fire_module"].plan
    assert {"expand1x1/conv", "expand3x3/conv"} in _label_sets(plan)
    d = plan.decisions[0]
    assert d.kind is DecisionKind.HORIZONTAL and d.status is DecisionStatus.PROPOSED
    assert d.evidence.heterogeneous and d.evidence.no_path and d.evidence.no_member_reads_another
    assert d.gain.launches_saved == 1


def test_mha_qkv_projections(proposals):
    sets = _label_sets(proposals["mha_block"].plan)
    assert {"q_proj/matmul", "k_proj/matmul", "v_proj/matmul"} in sets
    # the per-head reshapes of the three branches are the next stage (different inputs)
    assert {"q_proj/reshape", "k_proj/reshape", "v_proj/reshape"} in sets


def test_moe_expert_branches(proposals):
    plan = proposals["moe_block"].plan
    assert any({"expert0/fc1/matmul", "expert1/fc1/matmul"} <= s for s in _label_sets(plan))


def test_inception_block_branches_stage_by_stage(proposals):
    p = proposals["inception_block"]
    (group,) = p.groups
    assert len(group.branches) == 4 and sorted(len(b) for b in group.branches) == [1, 2, 2, 2]
    stage0, stage1 = (d for d in p.plan.decisions if not d.kind.vertical)
    assert {m.labels[0] for m in stage0.members} == {
        "branch1x1/conv", "branch3x3_reduce/conv", "branch5x5_reduce/conv", "branch_pool/maxpool"}
    assert stage1.kind is DecisionKind.BRANCH_STAGE
    assert {m.signature.split("+")[0] for m in stage1.members} == {"Conv3x3", "Conv5x5", "Conv1x1"}
    for d in (stage0, stage1):
        assert d.evidence.heterogeneous
        assert all(m.flops > 0 and m.chunks > 0 for m in d.members)
        assert d.gain.fused_chunks == sum(d.gain.member_chunks)


def test_groups_are_antichains(proposals):
    for p in proposals.values():
        for d in p.plan.decisions:
            if not d.kind.vertical:
                assert p.graph.independent(d.kernels)
            elif d.kind is DecisionKind.VERTICAL_SLICES:  # a concat's producers, and the concat
                *producers, concat = d.kernels
                assert set(producers) <= set(p.graph.producers(concat))
                assert d.status is DecisionStatus.REJECTED or p.graph.independent(producers)
            else:  # a producer and its consumer, joined by no other path
                prod, cons = d.kernels
                assert prod in p.graph.producers(cons) and (d.evidence.link or d.evidence.rows) is not None


def test_proposing_does_not_touch_the_module():
    session = Session("fire_module")
    before = session.scheduled("llvm").module.script()
    session.propose("llvm")
    assert session.scheduled("llvm").module.script() == before
