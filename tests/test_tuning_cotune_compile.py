"""Co-tuning inside a compile: approved decisions are co-tuned, the kept layout is what the
plan applier builds, the result verifies, and a second compile replays the store."""

import json

import pytest

from engine.errors import BlockwiseError
from engine.parallel import propose
from engine.parallel.apply import DecisionResult, PlanApplier
from engine.pipeline import CompileOptions
from engine.session import Session
from engine.tuning import KernelTuner, TuneOptions
from engine.tuning import cotune_plan


def _compile(session, plan, db, trials=3):
    tuner = KernelTuner(TuneOptions(trials=0, cotune_trials=trials, db_root=str(db)), plan=plan)
    applier = PlanApplier(plan)
    result = session.compile(CompileOptions(apply_plan=applier, tune=tuner, timing=False))
    return result, tuner, applier


def test_cotuned_decision_is_applied_and_replayed(tmp_path, monkeypatch):
    session = Session("fire_module")
    plan = propose(session, "llvm").plan.with_approval("d0")  # the expand pair (horizontal)
    result, tuner, applier = _compile(session, plan, tmp_path)
    assert result.verification.passed
    assert applier.outcome.decisions[0].result is DecisionResult.APPLIED
    (rec,) = tuner.cotuned
    assert rec.decision == plan.approved()[0].id and rec.cotuned_ms > 0 and rec.separate_ms > 0
    assert rec.kept in (cotune_plan.Kept.COTUNED, cotune_plan.Kept.SEPARATE)
    assert any(n.startswith(f"co-tuning {rec.decision}:") for n in result.notes)
    stored = json.loads((tmp_path / "fire_module-llvm" / "cotuning.json").read_text())
    assert len(stored) == 1

    # the second compile measures nothing: the stored configuration is replayed
    monkeypatch.setattr(cotune_plan, "compare_cotuning",
                        lambda *a, **k: pytest.fail("co-tuning measured again"))
    again, tuner2, _ = _compile(session, plan, tmp_path)
    assert again.verification.passed and tuner2.cotuned[0].layout == rec.layout


def test_cotuning_needs_llvm(tmp_path):
    session = Session("fire_module")
    plan = propose(session, "cuda").plan.with_approval("all")
    tuner = KernelTuner(TuneOptions(trials=0, cotune_trials=2, db_root=str(tmp_path)), plan=plan)
    with pytest.raises(BlockwiseError, match="llvm only"):
        session.compile(CompileOptions(target="cuda", tune=tuner, apply_plan=PlanApplier(plan)))


def test_cli_rejects_cotuning_without_a_plan(cli):
    res = cli("compile", "fire_module", "--cotune-trials", "4")
    assert res.returncode == 2 and "--plan" in res.stderr and "Traceback" not in res.stderr
