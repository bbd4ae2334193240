"""Parallel structure detection and horizontal fusion of parallel operators (Magneto-style).

    propose(session, target) -> Proposal(groups, plan)     facts + choices, IR untouched
    FusionPlan.with_approval("all"|"none"|"d0,d2")           choices
    PlanApplier(plan)  as CompileOptions.apply_plan          executes approved decisions,
                                                             verifies, rolls back failures
Files: kernel_graph (dependencies), detection (ParallelGroup), plan (FusionPlan JSON),
propose, gain (estimates), codegen_cpu / codegen_gpu (one fused PrimFunc per decision),
relax_rewrite (the call site in main), apply (verify, roll back, measure).
"""

from engine.parallel.detection import Legality, MemberInfo, ParallelGroup, Stage, detect_parallel_groups
from engine.parallel.plan import (DecisionId, DecisionKind, DecisionStatus, FusionDecision, FusionPlan,
                                  load_plan, validate_plan)
from engine.parallel.propose import Proposal, propose

__all__ = ["Legality", "MemberInfo", "ParallelGroup", "Stage", "detect_parallel_groups", "DecisionId",
           "DecisionKind", "DecisionStatus", "FusionDecision", "FusionPlan", "load_plan",
           "validate_plan", "Proposal", "propose"]
