"""Parallel structure detection and fusion of parallel operators (Magneto-style) and of
block-level one-to-one producer/consumer pairs (BlockDepend-style).

    propose(session, target) -> Proposal(groups, plan)     facts + choices, IR untouched
    FusionPlan.with_approval("all"|"none"|"d0,d2")           choices
    apply_plan(plan, mod, ctx)  in the "apply plan" stage    executes approved decisions,
                                                             verifies, rolls back failures
Files: kernel_graph (dependencies), detection (ParallelGroup), plan (FusionPlan JSON, no
TVM), propose, vertical (block-level pairs), gain (estimates), codegen/{cpu,gpu} (one fused
PrimFunc per decision), relax_rewrite (the call site in main), apply (verify, roll back,
measure). Import the module you need; this package imports none of them (no cycles).
"""
