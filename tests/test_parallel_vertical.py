"""Block-level vertical fusion: one-to-one block maps proposed as decisions, fused block
by block on llvm, verified against onnxruntime."""

from types import SimpleNamespace

import numpy as np
import pytest

from engine.blockdeps import EdgeClass, Method
from engine.parallel.apply import DecisionResult
from engine.parallel.plan import DecisionKind, FusionPlan
from engine.parallel.vertical import block_link
from engine.pipeline import CompileOptions
from engine.session import Session


def _edge(owner, n_p, edge_class=EdgeClass.ONE_TO_ONE):
    owner = np.asarray(owner)
    return SimpleNamespace(edge_class=edge_class, via_view=False, method=Method.EXACT,
                           producer_grid=SimpleNamespace(blocks=n_p), consumer_grid=SimpleNamespace(blocks=len(owner)),
                           fan_in=np.ones(len(owner), dtype=int), indices=owner)


@pytest.mark.parametrize("owner,n_p,pattern,per", [
    ([0, 1, 2, 3], 4, "contiguous", 1),  # identity
    ([0, 0, 1, 1, 2, 2], 3, "contiguous", 2),  # producer block b -> consumer blocks 2b, 2b+1
    ([0, 1, 2, 0, 1, 2], 3, "strided", 2),  # b -> b, b+3 (channel tiles outside rows)
])
def test_regular_one_to_one_maps_give_a_link(owner, n_p, pattern, per):
    link = block_link(_edge(owner, n_p), consumer_param=0)
    assert (link.pattern, link.per_producer, link.producer_blocks) == (pattern, per, n_p)


@pytest.mark.parametrize("edge", [
    _edge([0, 2, 1, 3], 4),  # one-to-one but permuted
    _edge([0, 1, 2], 2),  # consumer blocks not a multiple of producer blocks
    _edge([0, 1], 2, EdgeClass.ONE_TO_FEW),
])
def test_other_maps_give_none(edge):
    assert block_link(edge, consumer_param=0) is None


@pytest.fixture(scope="module")
def mha():
    session = Session("mha_block")
    return session, session.propose("llvm").plan


@pytest.fixture(scope="module")
def res2net():
    session = Session("res2net_block")
    return session, session.propose("llvm").plan


def _block_level(plan):
    return [d for d in plan.decisions if d.kind is DecisionKind.VERTICAL_BLOCK]


def test_a_conv_to_its_global_pool_is_proposed_one_to_one(res2net):
    _, plan = res2net
    d = _block_level(plan)[0]
    assert [m.labels[0] for m in d.members] == ["conv3/conv", "se/fc1/globalaveragepool"]
    link = d.evidence.link
    # the conv's 8 channel tiles; the pool sums the same channels' planes, one tile per block
    assert (link.producer_blocks, link.consumer_blocks, link.per_producer, link.pattern) == (8, 8, 1, "contiguous")
    assert FusionPlan.from_json(plan.to_json()) == plan  # the link replays from JSON


def test_a_pair_fusable_both_ways_is_a_row_band(mha):
    """The attention scores -> softmax pair is one-to-one and row-structured: it is proposed
    once, as a row band (its intermediate in per-task scratch), not also one-to-one."""
    _, plan = mha
    pairs = [tuple(m.labels[0] for m in d.members) for d in plan.decisions if d.kind.vertical]
    assert pairs.count(("attn/qk_matmul", "attn/softmax")) == 1
    (d,) = [d for d in plan.decisions if tuple(m.labels[0] for m in d.members) == ("attn/qk_matmul", "attn/softmax")]
    assert d.kind is DecisionKind.VERTICAL_ROWS and not _block_level(plan)


def test_vertical_decision_compiles_verifies_and_saves_a_launch(res2net):
    session, plan = res2net
    d = _block_level(plan)[0]
    result = session.compile(CompileOptions(plan=plan.with_approval(d.id), runs=3))
    assert result.verification.passed
    out = {o.id: o for o in result.fusion.decisions}[d.id]
    assert out.result is DecisionResult.APPLIED and out.fused_kernel == f"vfused_{d.id}"
    assert result.fusion.launches_after == result.fusion.launches_before - 1
    assert out.fused_ms > 0 and len(out.members_ms) == 2


def test_cuda_vertical_pair_compiles_and_verifies_in_emulation():
    """fire_module for cuda: squeeze1x1 -> expand1x1 is one-to-one over blockIdx; fused, the
    pair is one launch (producer tile, barrier, consumer tiles) that nvcc compiles and the
    CPU emulation verifies against onnxruntime."""
    session = Session("fire_module")
    plan = session.propose("cuda").plan
    (d,) = [d for d in plan.decisions if d.kind is DecisionKind.VERTICAL_BLOCK]
    assert [m.labels[0] for m in d.members] == ["squeeze1x1/conv", "expand1x1/conv"]
    result = session.compile(CompileOptions(target="cuda", plan=plan.with_approval(d.id), runs=3))
    assert result.verification.passed and result.ran_on == "host emulation"
    out = {o.id: o for o in result.fusion.decisions}[d.id]
    assert out.result is DecisionResult.APPLIED and out.fused_kernel == f"vfused_{d.id}"
    assert (result.fusion.launches_before, result.fusion.launches_after) == (4, 3)


def test_an_overlapping_decision_is_skipped_and_says_by_which(mha):
    """The scores matmul is in two row bands, q reshape -> scores and scores -> softmax: with
    both approved, plan order applies the first and skips the second, naming it (not
    'rejected by code generation')."""
    session, plan = mha
    pairs = {tuple(m.labels[0] for m in d.members): d.id for d in plan.decisions}
    first, second = pairs[("q_proj/reshape", "attn/qk_matmul")], pairs[("attn/qk_matmul", "attn/softmax")]
    result = session.compile(CompileOptions(plan=plan.with_approval(f"{first},{second}"), runs=3))
    out = {o.id: o for o in result.fusion.decisions}
    assert out[first].result is DecisionResult.APPLIED
    assert out[second].result is DecisionResult.OVERLAPPED and first in out[second].reason

def test_block_groups_leave_every_core_chunks_and_fit_the_intermediate():
    from engine.parallel.codegen.cpu import GROUP_BYTES, block_group

    assert block_group(3136, 1024, 2) == 196  # resnet50's res2 projection -> expansion: 16 chunks
    assert block_group(3136, GROUP_BYTES // 7, 2) == 7  # the group's intermediate within GROUP_BYTES
    assert block_group(8, 1024, 2) == 1  # too few blocks to group


def test_two_reductions_fuse_in_groups_of_blocks_and_verify(res2net, monkeypatch):
    """conv -> its global pool: both reduce, so a fused chunk runs a group of producer
    blocks, then their consumer blocks (with one chunk per core asked: fewer chunks than
    the conv's 8 blocks)."""
    import tvm_ffi
    from tvm import tirx

    import engine.parallel.codegen.cpu as cpu

    monkeypatch.setattr(cpu, "CHUNKS_PER_CORE", 1)
    session, plan = res2net
    d = _block_level(plan)[0]
    result = session.compile(CompileOptions(plan=plan.with_approval(d.id), runs=1))
    assert result.verification.passed
    loops = []
    tvm_ffi.structural_walk(result.module[f"vfused_{d.id}"].body, (tirx.For, lambda f: loops.append(int(f.extent))
                            if f.kind == tirx.ForKind.PARALLEL else None), order="pre")
    assert len(loops) == 1 and loops[0] < 8 and 8 % loops[0] == 0
