"""Applying plans: fused kernels verify against onnxruntime, failures roll back, CLI."""

import json
from dataclasses import replace

import pytest

from engine import targets
from engine.parallel.apply import DecisionResult
from engine.pipeline import CompileOptions
from engine.session import Session


def _compile(session, target, plan, timing=True):
    return session.compile(CompileOptions(target=target, plan=plan, runs=3, timing=timing))


def test_llvm_inception_block_all_branches():
    session = Session("inception_block")
    plan = session.propose("llvm").plan
    branches = ",".join(d.id for d in plan.decisions if not d.kind.vertical)
    result = _compile(session, "llvm", plan.with_approval(branches))
    assert result.verification.passed
    out = result.fusion
    assert (out.launches_before, out.launches_after) == (8, 3) and result.launches == 3
    for d in (d for d in out.decisions if d.result is not DecisionResult.NOT_APPROVED):
        assert d.result is DecisionResult.APPLIED and d.kernels_after == 1
        assert d.fused_ms > 0 and len(d.members_ms) == d.kernels_before  # measured side by side
    assert out.unfused_ms > 0 and out.fused_ms > 0
    assert {k.func for k in result.kernels} >= {"hfused_d0", "hfused_d1"}


def test_only_approved_decisions_run():
    session = Session("inception_block")
    result = _compile(session, "llvm", session.propose("llvm").plan.with_approval("d1"), timing=False)
    assert result.verification.passed and result.launches == 6
    assert [d.result for d in result.fusion.decisions] == [DecisionResult.NOT_APPROVED,
                                                           DecisionResult.APPLIED,
                                                           DecisionResult.NOT_APPROVED]


@pytest.mark.parametrize("model", ["moe_block",
                                   pytest.param("inception_block", marks=pytest.mark.slow),
                                   pytest.param("mha_block", marks=pytest.mark.slow)])
def test_cuda_emulated(model):
    session = Session(model)
    result = _compile(session, "cuda", session.propose("cuda").plan.with_approval("all"), timing=False)
    assert result.verification.passed
    assert result.fusion.launches_after < result.fusion.launches_before
    # every decision applies, but one whose kernel an earlier applied decision took (mha_block's
    # block-level d2 shares q_proj/reshape with the horizontal d1): skipped, naming it
    applied = {d.id for d in result.fusion.decisions if d.result is DecisionResult.APPLIED}
    for d in result.fusion.decisions:
        assert d.result is DecisionResult.APPLIED or (
            d.result is DecisionResult.OVERLAPPED and any(a in d.reason for a in applied)), (d.id, d.result)


def _breaking_fuse(fuse, broken: tuple[str, ...]):
    """The target's fuse, except that the fused kernel of the members `broken` (PrimFunc
    names) doubles its last output: a decision that fails verification on purpose."""
    import tvm_ffi
    from tvm import tirx

    def fuse_and_break(funcs, names, target, layout=None):
        prim = fuse(funcs, names, target, layout)
        if tuple(names) != broken:
            return prim
        out = prim.params[-1]

        def double(store):
            if store.buffer.same_as(out):
                return tirx.BufferStore(store.buffer, store.value * tirx.const(2.0, "float32"),
                                        store.indices)
            return store

        return tvm_ffi.structural_map(prim, (tirx.BufferStore, double))

    return fuse_and_break


def test_failed_decision_rolls_back_and_others_stay(monkeypatch):
    session = Session("inception_block")
    plan = session.propose("llvm").plan.with_approval("d0,d1")
    llvm = targets.get_target("llvm")
    broken = tuple(m.func for m in plan.decision("d1").members)
    codegen = replace(llvm.fusion, fuse=_breaking_fuse(llvm.fusion.fuse, broken))
    monkeypatch.setitem(targets.TARGETS, "llvm", replace(llvm, fusion=codegen))
    result = _compile(session, "llvm", plan, timing=False)
    assert result.verification.passed  # the final model is the one with the good decision only
    d0, d1, _ = result.fusion.decisions
    assert d0.result is DecisionResult.APPLIED
    assert d1.result is DecisionResult.ROLLED_BACK and ("DIFFERS" in d1.reason or "failed" in d1.reason)
    assert result.fusion.launches_after == 5


def test_cli_plan_then_compile(cli, tmp_path):
    plan_file = tmp_path / "plan.json"
    res = cli("plan", "fire_module", "--out", str(plan_file), "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["decisions"][0]["status"] == "proposed" and plan_file.is_file()
    res = cli("compile", "fire_module", "--plan", str(plan_file), "--approve", "all", "--no-export",
              "--runs", "3", "--out", str(tmp_path / "out"))
    assert res.returncode == 0, res.stderr
    # d1 (the expands writing into the concat's slices) applies first and takes d0's kernels
    assert "launches 4 -> 2" in res.stdout and "d1       applied" in res.stdout
    assert "d0       skipped" in res.stdout
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["fusion"]["decisions"][1]["fused_ms"] > 0
    res = cli("compile", "mha_block", "--plan", str(plan_file), "--no-export")
    assert res.returncode == 2 and f"{plan_file} is for model 'fire_module', not 'mha_block'" in res.stderr


@pytest.mark.parametrize("model", ["fire_module", "mobilenet_block"])
def test_every_operator_stays_in_exactly_one_kernel_after_fusion(model):
    # a vertical or slice fusion's call is bound to one member's Var: its other members'
    # operators must still be listed (FLOPs, the graph's heat, jumps to the kernel)
    session = Session(model)
    plan = session.propose("llvm").plan.with_approval("all")
    plain = session.compile(CompileOptions(timing=False))
    result = session.compile(CompileOptions(plan=plan, timing=False))
    assert result.verification.passed and result.launches < plain.launches
    ops = [o for k in result.kernels for o in k.ops]
    assert sorted(ops) == sorted(o for k in plain.kernels for o in k.ops)
    fused = [k for k in result.kernels if k.func[1:].startswith("fused_d")]
    assert fused and all(len(k.ops) > 2 for k in fused)
