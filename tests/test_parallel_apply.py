"""Applying plans: fused kernels verify against onnxruntime, failures roll back, CLI."""

import json

import pytest

from engine.parallel import propose
from engine.parallel.apply import DecisionResult, PlanApplier
from engine.parallel.relax_rewrite import replace_with_fused
from engine.pipeline import CompileOptions
from engine.session import Session


def _compile(session, target, applier, timing=True):
    return session.compile(CompileOptions(target=target, apply_plan=applier, runs=3, timing=timing))


def test_llvm_inception_block_all_branches():
    session = Session("inception_block")
    applier = PlanApplier(propose(session, "llvm").plan.with_approval("all"))
    result = _compile(session, "llvm", applier)
    assert result.verification.passed
    out = applier.outcome
    assert (out.launches_before, out.launches_after) == (8, 3) and result.launches == 3
    for d in out.decisions:
        assert d.result is DecisionResult.APPLIED and d.kernels_after == 1
        assert d.fused_ms > 0 and len(d.members_ms) == d.kernels_before  # measured side by side
    assert out.unfused_ms > 0 and out.fused_ms > 0
    assert {k.func for k in result.kernels} >= {"hfused_d0", "hfused_d1"}


def test_only_approved_decisions_run():
    session = Session("inception_block")
    applier = PlanApplier(propose(session, "llvm").plan.with_approval("d1"))
    result = _compile(session, "llvm", applier, timing=False)
    assert result.verification.passed and result.launches == 6
    assert [d.result for d in applier.outcome.decisions] == [DecisionResult.NOT_APPROVED,
                                                             DecisionResult.APPLIED]


@pytest.mark.parametrize("model", ["moe_block",
                                   pytest.param("inception_block", marks=pytest.mark.slow),
                                   pytest.param("mha_block", marks=pytest.mark.slow)])
def test_cuda_emulated(model):
    session = Session(model)
    applier = PlanApplier(propose(session, "cuda").plan.with_approval("all"))
    result = _compile(session, "cuda", applier, timing=False)
    assert result.verification.passed
    assert applier.outcome.launches_after < applier.outcome.launches_before
    assert all(d.result is DecisionResult.APPLIED for d in applier.outcome.decisions)


class _BreakOne(PlanApplier):
    """Breaks decision d1 on purpose: its fused kernel doubles the last member's output."""

    def _fuse(self, mod, d, members, ctx):
        if d.id != "d1":
            return super()._fuse(mod, d, members, ctx)
        import tvm_ffi
        from tvm import tirx

        from engine.parallel.codegen import codegen_for
        from engine.parallel.relax_rewrite import call_of

        funcs = [call_of(mod, v).args[0].name_hint for v in members]
        prim = codegen_for("llvm").fuse([mod[f] for f in funcs], funcs, ctx.target)
        out = prim.params[-1]

        def double(store):
            if store.buffer.same_as(out):
                return tirx.BufferStore(store.buffer, store.value * tirx.const(2.0, "float32"),
                                        store.indices)
            return store

        prim = tvm_ffi.structural_map(prim, (tirx.BufferStore, double))
        new, _ = replace_with_fused(mod, members, prim, f"hfused_{d.id}")
        return new, f"hfused_{d.id}"


def test_failed_decision_rolls_back_and_others_stay():
    session = Session("inception_block")
    plan = propose(session, "llvm").plan.with_approval("all")
    applier = _BreakOne(plan)
    result = _compile(session, "llvm", applier, timing=False)
    assert result.verification.passed  # the final model is the one with the good decision only
    d0, d1 = applier.outcome.decisions
    assert d0.result is DecisionResult.APPLIED
    assert d1.result is DecisionResult.ROLLED_BACK and ("DIFFERS" in d1.reason or "failed" in d1.reason)
    assert applier.outcome.launches_after == 5


def test_cli_plan_then_compile(cli, tmp_path):
    plan_file = tmp_path / "plan.json"
    res = cli("plan", "fire_module", "--out", str(plan_file), "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["decisions"][0]["status"] == "proposed" and plan_file.is_file()
    res = cli("compile", "fire_module", "--plan", str(plan_file), "--approve", "all", "--no-export",
              "--runs", "3", "--out", str(tmp_path / "out"))
    assert res.returncode == 0, res.stderr
    assert "launches 4 -> 3" in res.stdout and "d0       applied" in res.stdout
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["fusion"]["decisions"][0]["fused_ms"] > 0
    res = cli("compile", "mha_block", "--plan", str(plan_file), "--no-export")
    assert res.returncode == 2 and "plan is for model 'fire_module', not 'mha_block'" in res.stderr
