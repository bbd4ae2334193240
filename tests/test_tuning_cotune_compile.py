"""Co-tuning inside a compile: approved decisions are co-tuned, the kept layout is what the
plan applier builds, the result verifies, and a second compile replays the store."""

import json

import pytest

from engine.errors import BlockwiseError
from engine.parallel.apply import DecisionResult
from engine.pipeline import CompileOptions
from engine.session import Session
from engine.tuning import TuneOptions
from engine.tuning import cotune_plan


def _compile(session, plan, db, trials=3):
    tuning = TuneOptions(trials=0, cotune_trials=trials, db_root=str(db))
    return session.compile(CompileOptions(plan=plan, tuning=tuning, timing=False))


def test_cotuned_decision_is_applied_and_replayed(tmp_path, monkeypatch):
    session = Session("fire_module")
    plan = session.propose("llvm").plan.with_approval("d0")  # the expand pair (horizontal)
    result = _compile(session, plan, tmp_path)
    assert result.verification.passed
    assert result.fusion.decisions[0].result is DecisionResult.APPLIED
    (rec,) = result.cotuned
    assert rec.decision == plan.approved()[0].id and rec.cotuned_ms > 0 and rec.separate_ms > 0
    # the compile keeps the faster of the two configurations, as measured side by side
    assert (rec.kept is cotune_plan.Kept.COTUNED) == (rec.cotuned_ms <= rec.separate_ms), rec
    assert any(n.startswith(f"co-tuning {rec.decision}:") for n in result.notes)
    stored = json.loads((tmp_path / "fire_module-llvm" / "cotuning.json").read_text())
    assert len(stored) == 1

    # the second compile measures nothing: the stored configuration is replayed
    monkeypatch.setattr(cotune_plan, "compare_cotuning",
                        lambda *a, **k: pytest.fail("co-tuning measured again"))
    again = _compile(session, plan, tmp_path)
    assert again.verification.passed and again.cotuned[0].layout == rec.layout


def test_cotuning_needs_a_target_with_a_cotuner(tmp_path, monkeypatch):
    """A target row without a co-tuner refuses --cotune-trials with one line."""
    from dataclasses import replace

    from engine import targets

    monkeypatch.setitem(targets.TARGETS, "cuda", replace(targets.TARGETS["cuda"], cotuner=None))
    session = Session("fire_module")
    plan = session.propose("cuda").plan.with_approval("all")
    tuning = TuneOptions(trials=0, cotune_trials=2, db_root=str(tmp_path))
    with pytest.raises(BlockwiseError, match="co-tuning of fused groups is not implemented for cuda"):
        session.compile(CompileOptions(target="cuda", plan=plan, tuning=tuning))


def test_cli_rejects_cotuning_without_a_plan(cli):
    res = cli("compile", "fire_module", "--cotune-trials", "4")
    assert res.returncode == 2 and "--plan" in res.stderr and "Traceback" not in res.stderr
