"""Fusion plans: JSON round trip, approval, validation against the model."""

import json

import pytest

from engine.errors import PlanError
from engine.parallel import DecisionStatus, FusionPlan, load_plan, propose, validate_plan
from engine.session import Session


@pytest.fixture(scope="module")
def session():
    return Session("inception_block")


@pytest.fixture(scope="module")
def plan(session):
    return propose(session, "llvm").plan


def test_round_trip_is_exact(plan, tmp_path):
    approved = plan.with_approval("d1")
    path = tmp_path / "plan.json"
    path.write_text(approved.dumps())
    again = load_plan(path)
    assert again == approved
    assert again.dumps() == approved.dumps()
    assert [d.status for d in again.decisions] == [DecisionStatus.PROPOSED, DecisionStatus.APPROVED]


def test_approval_specs(plan):
    assert len(plan.with_approval("all").approved()) == 2
    assert plan.with_approval("none").approved() == ()
    with pytest.raises(PlanError, match="no decision 'd9'"):
        plan.with_approval("d0,d9")


def test_validation_against_the_model(plan, session):
    kernels = session.scheduled("llvm").kernels
    validate_plan(plan, "inception_block", "llvm", kernels)
    with pytest.raises(PlanError, match="for model 'inception_block', not 'fire_module'"):
        validate_plan(plan, "fire_module", "llvm", kernels)
    data = plan.to_json()
    data["decisions"][0]["members"][0]["kernel"] = 42
    with pytest.raises(PlanError, match=r"decision d0: unknown member kernel 42"):
        validate_plan(FusionPlan.from_json(data), "inception_block", "llvm", kernels)


def test_bad_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(PlanError, match="not a JSON plan"):
        load_plan(bad)
    bad.write_text(json.dumps({"format": 1, "model": "x"}))
    with pytest.raises(PlanError, match="malformed plan"):
        load_plan(bad)
    with pytest.raises(PlanError, match="not found"):
        load_plan(tmp_path / "missing.json")
