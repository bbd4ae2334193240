"""The fusion plan (engine.parallel.plan) as `workbench plan` lines and as table cells.

    plan_lines(plan, groups)[0]  ->  "model        fire_module   target llvm   fingerprint 3f2a..."
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from engine.parallel.plan import FusionDecision, FusionPlan

if TYPE_CHECKING:
    from engine.parallel.detection import ParallelGroup


def plan_lines(plan: FusionPlan, groups: tuple[ParallelGroup, ...]) -> list[str]:
    """The groups found, then each decision: members, why it is legal, its estimated gain."""
    lines = [f"model        {plan.model}   target {plan.target}   fingerprint {plan.fingerprint}",
             f"groups       {len(groups)} fork/join groups, {len(plan.decisions)} decisions",
             *(f"  {g.describe()}" for g in groups)]
    unit = "blocks" if any(d.gain.threads_per_block for d in plan.decisions) else "chunks"
    for d in plan.decisions:
        lines += ["", *_decision_lines(d, unit)]
    return lines


def launch_text(gain) -> str:
    """The fused GPU kernel's launch facts, or "" (not a GPU decision)."""
    if not gain.threads_per_block:
        return ""
    return (f"{gain.fused_chunks} blocks of {gain.threads_per_block} threads, {gain.idle_threads:.0%} of thread slots idle, "
            f"~{gain.shared_bytes / 1024:.1f} KiB shared/block (estimated from TIR; ptxas figures in the "
            f"compile report)")


def reread_text(gain) -> str:
    # a producer block's share of the intermediate: what one block pair keeps in cache
    per_block = gain.reread_bytes / max(gain.member_chunks[0], 1) if gain.member_chunks else gain.reread_bytes
    return (f"intermediate {gain.reread_bytes / 1024:.0f} KiB re-read by the block that wrote it (from cache, "
            f"estimated; cache footprint {per_block / 1024:.1f} KiB per producer block); still written to "
            f"memory, 0 bytes kept off DRAM")


UNPRICED = "launches and work only: the memory saved is not priced on this target"


def unpriced(gain) -> bool:
    """Whether the estimate leaves out memory the decision saves (llvm's model)."""
    return not gain.memory_priced and bool(gain.kept_bytes or gain.reread_bytes)


def kept_text(gain, slices: bool = False) -> str:
    """Row-band (or, `slices`, concat-slice) fusion's memory facts (estimated from the shapes)."""
    if slices:
        return (f"the producers write their {gain.kept_bytes / 1024:.0f} KiB once, into the copy's output; "
                f"the copy's read and write of it are gone (estimated)")
    return (f"intermediate {gain.kept_bytes / 1024:.0f} KiB kept off main memory (it exists only in "
            f"per-task scratch); scratch {gain.scratch_bytes / 1024:.1f} KiB per task; halo "
            f"recomputation {gain.recomputed:.1%} of the producer's rows (estimated)")


def _decision_lines(d: FusionDecision, unit: str = "chunks") -> list[str]:
    ev, gain = d.evidence, d.gain
    edge = ev.link or ev.rows or ev.slices
    where = f"edge {ev.fork}" if edge else f"stage {d.stage}  fork {ev.fork}"
    lines = [f"{d.id:<4} {d.kind.value:<13} {d.status.value:<9} {where}"
             f"{'  heterogeneous' if ev.heterogeneous and not edge else ''}"]
    for m in d.members:
        lines.append(f"       k{m.kernel:<3} {', '.join(m.labels)[:44]:<44} {m.signature[:22]:<22} "
                     f"{'x'.join(map(str, m.out_shape)):<14} {m.flops / 1e6:>8.2f} MFLOP  {m.chunks:>5} {unit}")
    if edge:
        lines.append(f"     legal: {edge.describe()}; no other path joins them"
                     f"{'; the consumer is the only reader' if ev.rows or ev.slices else ''}")
    else:
        lines.append(f"     legal: no path {ev.no_path}, no member reads another {ev.no_member_reads_another}, "
                     f"inputs ready after k{ev.launch_after}, first consumer k{ev.first_consumer}"
                     f"{' (reorders independent kernels)' if ev.reorder_needed else ''}")
    lines.append(f"     gain (estimate): {gain.launches_saved} launches and {gain.parallel_regions_saved} "
                 f"parallel regions saved, utilisation {gain.utilisation_before:.0%} -> "
                 f"{gain.utilisation_after:.0%}, ~{gain.estimated_us:.1f} us"
                 f"{f' ({UNPRICED})' if unpriced(gain) else ''}")
    if launch_text(gain):
        lines.append(f"     launch: {launch_text(gain)}")
    if gain.reread_bytes:
        lines.append(f"     memory: {reread_text(gain)}")
    if gain.kept_bytes:
        lines.append(f"     memory: {kept_text(gain, ev.slices is not None)}")
    lines += [f"     dropped: {note}" for note in ev.dropped]
    if d.reason:
        lines.append(f"     reason: {d.reason}")
    return lines


@dataclass(frozen=True)
class DecisionCells:
    """One decision as a table row shows it."""

    ops: tuple[str, ...]  # the members' operator ids
    evidence: str  # members, then why the decision is legal, then core utilisation
    estimate: str  # e.g. "3.2 µs, -1 launch"
    reason: str  # why it was rejected, and what applying it did
    title: str  # the members as the engine names them


def decision_cells(d: FusionDecision, result: str = "", labels: Mapping[str, str] | None = None) -> DecisionCells:
    """`result`: what the apply step did with it (fusion.decision_result), when it ran;
    `labels`: op id -> unique label (present.opgraph.op_labels) for the title."""
    ev, g = d.evidence, d.gain
    edge = ev.link or ev.rows or ev.slices
    if edge is not None:  # vertical: the block map is the evidence
        facts = [ev.fork, edge.describe()]
    else:
        facts = [f"fork {ev.fork}", f"{len(ev.branches)} branches"]
        if ev.heterogeneous:
            facts.append("different ops")
        facts.append("no path" if ev.no_path else "PATH between members")
        if ev.reorder_needed:
            facts.append("reorder needed")
        facts.extend(f"dropped {x}" for x in ev.dropped)
    members = ", ".join(f"{m.signature}×{m.chunks}" if m.chunks else m.signature for m in d.members)
    out_bytes = sum(4 * math.prod(m.out_shape) for m in d.members if m.out_shape)  # float32 outputs
    members += f" ({sum(m.flops for m in d.members) / 1e6:.2f} MFLOP, {out_bytes / 1024:.0f} KiB written)"
    where = "SMs" if g.threads_per_block else "cores"
    util = f"; {where} busy {g.utilisation_before:.0%} -> {g.utilisation_after:.0%} (estimated)"
    if g.threads_per_block:
        util += f"; {launch_text(g)}"
    if g.reread_bytes:
        util += f"; {reread_text(g)}"
    if g.kept_bytes:
        util += f"; {kept_text(g, ev.slices is not None)}"
    if unpriced(g):  # the estimate cell is narrow: the caveat goes with the memory facts
        util += f"; the estimate counts {UNPRICED}"
    estimate = f"{g.estimated_us:.1f} µs, -{g.launches_saved} launch{'es' if g.launches_saved != 1 else ''}"
    return DecisionCells(ops=tuple(op for m in d.members for op in m.ops),
                         evidence=f"{members}; " + ", ".join(facts) + util, estimate=estimate,
                         reason="; ".join(x for x in (d.reason, result) if x), title=d.title(labels))
