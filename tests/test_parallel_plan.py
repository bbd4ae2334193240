"""Fusion plans: JSON round trip, approval, validation against the model."""

import json

import pytest

from engine.errors import PlanError
from engine.parallel.plan import DecisionStatus, FusionPlan, load_plan, validate_plan
from engine.session import Session


@pytest.fixture(scope="module")
def session():
    return Session("inception_block")


@pytest.fixture(scope="module")
def plan(session):
    return session.propose("llvm").plan


def test_round_trip_is_exact(plan, tmp_path):
    approved = plan.with_approval("d1")
    path = tmp_path / "plan.json"
    path.write_text(approved.dumps())
    again = load_plan(path)
    assert again == approved
    assert again.dumps() == approved.dumps()
    assert [d.status for d in again.decisions] == [DecisionStatus.PROPOSED, DecisionStatus.APPROVED,
                                                   DecisionStatus.PROPOSED]
    assert again.decisions[2].evidence.slices == plan.decisions[2].evidence.slices is not None


def test_approval_specs(plan):
    # two branch stages (its 1x1 reduce convs are pixel-vectorised: no row bands to fuse) and
    # the concat's producers writing into its slices
    assert len(plan.with_approval("all").approved()) == 3
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


def test_plan_for_other_kernels_fails_to_load(tmp_path):
    """Same model name, same operators: only the kernels' fingerprint tells them apart."""
    fire = Session("fire_module")
    plan = fire.propose("llvm").plan
    path = tmp_path / "plan.json"
    path.write_text(plan.dumps())
    assert fire.load_plan(path) == plan
    # the same model at batch 2: every kernel's output shape changes, not its operators
    batch2 = Session("fire_module", shapes={"input": (2, 96, 28, 28)})
    with pytest.raises(PlanError, match=r"proposed for other kernels of model 'fire_module'") as err:
        batch2.load_plan(path)
    assert "\n" not in str(err.value) and str(path) in str(err.value)
    # a plan file whose fingerprint was edited
    data = plan.to_json()
    data["fingerprint"] = "0" * 16
    path.write_text(json.dumps(data))
    with pytest.raises(PlanError, match=r"proposed for other kernels of model 'fire_module' "
                                        r"\(fingerprint 0{16}, now "):
        fire.load_plan(path)


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


def test_block_level_memory_line_states_the_cache_footprint_per_producer_block():
    from engine.parallel.plan import Gain
    from workbench.present.plan import reread_text

    gain = Gain(1, 1, (4, 8), 4, 1.0, 1.0, 4.0, reread_bytes=8192)
    text = reread_text(gain)
    assert "intermediate 8 KiB" in text and "cache footprint 2.0 KiB per producer block" in text
    assert "0 bytes kept off DRAM" in text  # the intermediate is still written: nothing claimed
