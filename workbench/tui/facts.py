"""The small shapes the TUI views are written against. engine_adapter.py fills them from the
engine's analyses (through workbench.present); tests fill them by hand. Views see one engine
type: a decision's status is the plan's own DecisionStatus.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from engine.parallel.plan import DecisionKind, DecisionStatus, application_rank


@dataclass(frozen=True)
class Unavailable:
    """An analysis the view cannot show, and why (never replaced by made-up data)."""

    reason: str


@dataclass(frozen=True)
class BlockGrid:
    """A kernel's blocks (thread blocks or parallel chunks), drawn row-major in `dims`."""

    kernel: str
    dims: tuple[int, ...]  # e.g. (rows, cols); count = product
    ops: tuple[str, ...] = ()
    axes: tuple[str, ...] = ()  # the grid's axis names (blockIdx.y, blockIdx.x; a parallel loop's variable)

    @property
    def count(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n

    @property
    def cols(self) -> int:
        return self.dims[-1] if self.dims else 1


@dataclass(frozen=True)
class EdgeDeps:
    """One producer -> consumer kernel edge and its block dependency map."""

    key: str
    producer: BlockGrid
    consumer: BlockGrid
    edge_class: str  # independent / one-to-one / one-to-few / partial / all-to-all
    needs: Callable[[int], tuple[int, ...]]  # consumer block -> producer blocks it reads
    figures: tuple[tuple[str, str], ...] = ()
    tensor: str = ""
    handle: object = field(default=None, repr=False, compare=False)  # the engine's edge object

    @property
    def title(self) -> str:
        return f"{self.producer.kernel} -> {self.consumer.kernel}"


@dataclass(frozen=True)
class BlockDepsReport:
    edges: tuple[EdgeDeps, ...]
    figures: tuple[tuple[str, str], ...] = ()
    note: str = ""
    handle: object = field(default=None, repr=False, compare=False)  # the engine's result
    target: str = ""  # the target whose schedules were analysed
    block_axis: str = ""  # what a block is there (the target row's block_axis: "blockIdx", "chunk of ...")

    @property
    def unit(self) -> str:
        """One block, in a word: "blockIdx" (cuda), "chunk" (llvm), "block" when not said."""
        return self.block_axis.split()[0] if self.block_axis else "block"


@dataclass(frozen=True)
class DecisionRow:
    id: str
    kind: str
    members: tuple[str, ...]  # op ids
    evidence: str
    estimated_gain: str  # as the engine states it (e.g. "0.12 ms", "3 launches")
    status: DecisionStatus
    reason: str = ""
    measured_gain_ms: float | None = None
    title: str = ""  # the members as the engine names them (kernels), else the ops are listed


@dataclass
class PlanState:
    """The fusion plan as the TUI sees it: rows, plus the adapter's handle on the real plan."""

    rows: list[DecisionRow]
    path: str  # the JSON file shared with the CLI (one per target)
    handle: object = field(repr=False, default=None)
    target: str = ""  # the target the plan's kernels were scheduled for
    dirty: bool = False
    note: str = ""  # where it came from (loaded, proposed, why a saved one did not fit)
    # the file at `path` holds this plan (loaded from it, or saved there) or did not exist when
    # the plan was made: ctrl+s writes it without asking; else it asks before overwriting
    owns_file: bool = True
    labels: dict = field(default_factory=dict)  # op id -> unique label (present.opgraph.op_labels)
    measured: dict = field(default_factory=dict)  # decision id -> ms saved, from the last plan compile
    results: dict = field(default_factory=dict)  # decision id -> what the apply step did

    def row(self, decision_id: str) -> DecisionRow:
        return next(r for r in self.rows if r.id == decision_id)

    @property
    def approved(self) -> list[DecisionRow]:
        return [r for r in self.rows if r.status is DecisionStatus.APPROVED]


def conflicts(rows) -> dict[str, tuple[str, ...]]:
    """Approved decision id -> the other approved decisions that share a kernel with it (in
    plan order). Kernels partition the ops, so sharing a member op is sharing a kernel; the
    engine applies only the first approved of overlapping decisions.

        >>> conflicts([DecisionRow("d0", "horizontal", ("a", "b"), "", "", DecisionStatus.APPROVED),
        ...            DecisionRow("d1", "horizontal", ("b", "c"), "", "", DecisionStatus.APPROVED)])
        {'d0': ('d1',), 'd1': ('d0',)}
    """
    approved = [r for r in rows if r.status is DecisionStatus.APPROVED]
    out = {}
    for r in approved:
        others = tuple(o.id for o in approved if o.id != r.id and set(o.members) & set(r.members))
        if others:
            out[r.id] = others
    return out


def overlaps(row, rows) -> tuple[str, ...]:
    """The approved decisions other than `row` sharing a kernel with it (whatever its status)."""
    return tuple(o.id for o in rows if o.id != row.id and o.status is DecisionStatus.APPROVED
                 and set(o.members) & set(row.members))


def conflict_lines(rows, changed) -> list[str]:
    """For decisions just approved (`changed` ids) that share a kernel with other approved ones:
    one line each saying which, and which one the engine applies (slice decisions first, then
    the first in plan order: engine.parallel.plan.application_order)."""
    clashes = conflicts(rows)
    order = {r.id: (application_rank(DecisionKind(r.kind)), n) for n, r in enumerate(rows)}
    lines = []
    for i in changed:
        if i in clashes:
            first = min((i, *clashes[i]), key=order.__getitem__)
            why = "slice decisions apply first" if order[first][0] == 0 else "first in plan order"
            lines.append(f"{i} shares a kernel with approved {', '.join(clashes[i])}: only {first} ({why}) "
                         f"is applied; reject one (r)")
    if len(lines) > 4:
        lines = lines[:3] + [f"… and {len(lines) - 3} more: see ⚠ in the status column"]
    return lines


@dataclass(frozen=True)
class KernelGroup:
    """A fused kernel: `k27 func` (its launch position, as every tab names it) and the ops it
    computes (drawn as a cluster)."""

    name: str
    ops: tuple[str, ...]


def kernel_groups(kernels) -> tuple[KernelGroup, ...]:
    """Fused kernels (more than one op) from a CompileResult's KernelCall list."""
    return tuple(KernelGroup(f"k{k.index} {k.func}", tuple(k.ops)) for k in kernels if len(k.ops) > 1)


def op_times(kernels, kernel_times) -> dict[str, float]:
    """Op id -> total ms per inference of the kernel that computes it."""
    total = {t.name: t.total_ms for t in kernel_times}
    out: dict[str, float] = {}
    for k in kernels:
        for op in k.ops:
            if k.func in total:
                out[op] = total[k.func]
    return out


def measured_gains(rows, before_kernels, before_times, after_kernels, after_times) -> dict[str, float]:
    """Decision id -> ms saved: the time of the kernels computing its members before the plan
    minus after it. Only for decisions whose members are all timed in both runs."""
    def time_of(members, kernels, times: Mapping[str, float]) -> float | None:
        funcs = {k.func for k in kernels if set(k.ops) & set(members)}
        covered = {op for k in kernels if k.func in funcs for op in k.ops}
        if not funcs or not set(members) <= covered or not funcs <= set(times):
            return None
        calls = [k for k in kernels if k.func in funcs]
        return sum(times[f] for f in funcs) if calls else None

    bt = {t.name: t.total_ms for t in before_times}
    at = {t.name: t.total_ms for t in after_times}
    gains = {}
    for r in rows:
        b = time_of(r.members, before_kernels, bt)
        a = time_of(r.members, after_kernels, at)
        if a is not None and b is not None:
            gains[r.id] = b - a
    return gains
