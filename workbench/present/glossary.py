"""The terms the views use, for the `?` screen: what a block is per target, the edge classes,
the decision kinds and statuses, the marks of the Blocks view and of the Fusion table."""

from __future__ import annotations

from engine.blockdeps.facts import EdgeClass
from engine.parallel.plan import DecisionKind, DecisionStatus
from engine.session import target_info, target_names

# every value of the engine's enums has a line: a new class or kind without one fails the test
EDGE_CLASSES = {
    EdgeClass.INDEPENDENT: "no consumer block reads anything the producer wrote",
    EdgeClass.ONE_TO_ONE: "each consumer block reads at most one producer block: the pair can run block by "
                          "block (block-level vertical fusion)",
    EdgeClass.ONE_TO_FEW: "each consumer block reads a few producer blocks (halo rows of a 3x3 conv, a pool)",
    EdgeClass.PARTIAL: "more than a few, but not every consumer block needs all of them",
    EdgeClass.ALL_TO_ALL: "every consumer block needs every producer block (a matmul over the whole "
                          "input): the consumer must wait for the whole producer",
}
DECISION_KINDS = {
    DecisionKind.HORIZONTAL: "kernels reading the same value (a fork), launched as one kernel",
    DecisionKind.BRANCH_STAGE: "the s-th kernels of parallel branches (different inputs), launched as one",
    DecisionKind.VERTICAL_BLOCK: "a producer and its consumer with a one-to-one block map, fused so each "
                                 "block runs the consumer right after the producer part it reads",
    DecisionKind.VERTICAL_ROWS: "a producer and its consumer whose rows (or channels) read a few producer "
                                "rows (halo), fused by bands of them: the intermediate lives only in each task's scratch",
    DecisionKind.VERTICAL_SLICES: "the producers of a concat (or of a copy that permutes one axis, a channel "
                                  "shuffle), each one-to-one into a slice (or the permuted places) of its "
                                  "output, fused so they write there in place: the copy is not launched",
}
STATUSES = {
    DecisionStatus.PROPOSED: "found by the planner, not decided: a compile with the plan (C) skips it",
    DecisionStatus.APPROVED: "applied by C (W approves the ones a compile measured as faster); "
                             "⚠ dN: shares a kernel with approved dN, only the first is applied (slice decisions, then plan order)",
    DecisionStatus.REJECTED: "not applied; the planner rejects illegal ones itself (reason below the table)",
}


def edge_class_meaning(value: str) -> str:
    """What an edge class (its value, `one-to-few`) means, or "" for an unknown one."""
    return next((text for c, text in EDGE_CLASSES.items() if c.value == value), "")


def glossary(target: str, block_axis: str) -> list[tuple[str, str]]:
    """(term, meaning) rows; `target` is the one analysed now, whose block comes first."""
    others = [t for t in target_names() if t != target]
    rows = [("op  nN", "an ONNX operator; its id (a node name or nN) is the same in every tab"),
            ("kernel  kN", "one launched function computing one or more ops; kN is its launch position "
                           "(the plan's and the Blocks view's numbering)"),
            (f"block ({target}, now)", f"one {block_axis}: the unit of work a kernel's launch splits into")]
    rows += [(f"block ({t})", f"one {target_info(t).block_axis}") for t in others]
    rows += [(f"edge: {c.value}", text) for c, text in EDGE_CLASSES.items()]
    rows += [("Blocks: ◆", "the consumer block under the cursor (arrows / hjkl / click move it)"),
             ("Blocks: ■", "the producer blocks it reads: it can start once those are done"),
             ("Blocks: ·", "any other block of the grid")]
    rows += [(f"decision: {k.value}", text) for k, text in DECISION_KINDS.items()]
    rows += [(f"status: {s.value}", text) for s, text in STATUSES.items()]
    rows += [("estimated / measured", "estimated: the target's cost model, before any build; measured: the "
                                      "kernel times of a compile with the plan (C), same run")]
    return rows
