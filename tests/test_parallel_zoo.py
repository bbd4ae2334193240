"""zoo:inception_v1: every Inception module gives a heterogeneous group; fused builds verify."""

import re

import pytest

from engine.parallel.apply import DecisionResult
from engine.parallel.plan import DecisionStatus
from engine.pipeline import CompileOptions
from engine.session import Session

MODULES = ["3a", "3b", "4a", "4b", "4c", "4d", "4e", "5a", "5b"]


@pytest.fixture(scope="module")
def session():
    return Session("zoo:inception_v1")


def _module_of(decision) -> set[str]:
    return {m.group(1) for ref in decision.members for label in ref.labels
            for m in [re.match(r"inception_(\d[a-e])/", label)] if m}


@pytest.mark.slow
@pytest.mark.parametrize("target", ["llvm", "cuda"])
def test_inception_v1_groups_and_fused_build(session, target):
    plan = session.propose(target).plan
    for name in MODULES:
        hetero = [d for d in plan.decisions if _module_of(d) == {name} and d.evidence.heterogeneous
                  and d.status is DecisionStatus.PROPOSED]
        assert hetero, f"inception_{name}: no heterogeneous group"
        kernel_sizes = {m.signature.split("+")[0] for d in hetero for m in d.members}
        assert len(kernel_sizes) >= 2
    result = session.compile(CompileOptions(target=target, plan=plan.with_approval("all"), runs=5,
                                            timing=target == "llvm"))
    assert result.verification.passed
    out = result.fusion
    assert out.launches_after < out.launches_before
    applied = [d for d in out.decisions if d.result is DecisionResult.APPLIED]
    assert len(applied) >= len(MODULES)
    if target == "llvm":
        assert all(d.fused_ms and d.members_ms for d in applied)
        assert out.unfused_ms and out.fused_ms
