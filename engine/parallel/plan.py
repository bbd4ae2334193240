"""The fusion plan: choices (decisions) over detected parallel groups, as JSON that replays.

A plan names its model, target and a fingerprint of the kernel list it was proposed on;
each decision names its member kernels by launch position *and* operators, so loading a
plan for another model, or after the kernels changed, fails with a one-line PlanError.
Proposing never touches IR; `engine.parallel.apply` executes the approved decisions.
"""

from __future__ import annotations

import enum
import hashlib
import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, NewType

from engine.errors import PlanError

if TYPE_CHECKING:  # plain JSON here: no TVM import
    from engine.kernels import KernelCall

PLAN_FORMAT = 1
DecisionId = NewType("DecisionId", str)


class DecisionKind(str, enum.Enum):
    HORIZONTAL = "horizontal"  # kernels reading the same fork value, one launch
    BRANCH_STAGE = "branch-stage"  # the s-th kernels of parallel branches (different inputs)
    VERTICAL_BLOCK = "block-level vertical"  # producer->consumer whose block map is one-to-one
    VERTICAL_ROWS = "row-band vertical"  # producer->consumer, rows one-to-few: scratch per row band
    VERTICAL_SLICES = "slice vertical"  # producers->concat, each one-to-one into a slice: no copy

    @property
    def vertical(self) -> bool:
        """A producer -> consumer fusion (not parallel operators)."""
        return self in (DecisionKind.VERTICAL_BLOCK, DecisionKind.VERTICAL_ROWS, DecisionKind.VERTICAL_SLICES)


class DecisionStatus(str, enum.Enum):
    PROPOSED = "proposed"
    APPROVED = "approved"
    REJECTED = "rejected"


@dataclass(frozen=True)
class MemberRef:
    kernel: int  # KernelCall.index in the scheduled (unfused) module
    func: str
    ops: tuple[str, ...]
    labels: tuple[str, ...]
    signature: str
    out_shape: tuple[int, ...]
    flops: int
    chunks: int


@dataclass(frozen=True)
class Gain:
    """Estimated effect; `estimated_us` is a model, the compile report has measurements."""

    launches_saved: int
    parallel_regions_saved: int  # CPU: thread-pool wake-ups; GPU: same as launches
    member_chunks: tuple[int, ...]
    fused_chunks: int
    utilisation_before: float  # work-weighted share of cores (SMs) busy, members alone
    utilisation_after: float
    estimated_us: float
    # GPU launch facts of the fused kernel as generated (0: not a GPU kernel); ptxas'
    # registers, shared memory and occupancy come with the compile report
    threads_per_block: int = 0
    idle_threads: float = 0.0  # share of launched thread slots with no work
    shared_bytes: int = 0  # per block, estimated from the TIR allocations
    # block-level vertical: bytes of the intermediate a block re-reads right after it wrote
    # them (served from cache, estimated); it is still written to memory
    reread_bytes: int = 0
    # row-band vertical: bytes of intermediates that exist only in per-task scratch (never in
    # main memory), one task's scratch (its cache footprint), and the producer's extra work
    # from recomputed halo rows (share of its rows)
    kept_bytes: int = 0
    scratch_bytes: int = 0
    recomputed: float = 0.0
    # whether estimated_us prices the memory facts above (a target whose cost model has no
    # memory bandwidth, llvm, counts only launches and work)
    memory_priced: bool = True

    def with_launch(self, shape) -> "Gain":
        """With a fused kernel's launch facts (codegen LaunchShape; None: unchanged)."""
        if shape is None:
            return self
        # the generated grid, not the members' own: the code generator may regroup a member's
        # threads into fewer, larger blocks (a 1024-thread max pool in 128-thread blocks)
        return replace(self, threads_per_block=shape.threads_per_block, idle_threads=shape.idle_threads,
                       shared_bytes=shape.shared_bytes, fused_chunks=shape.blocks or self.fused_chunks)


class LinkPattern(str, enum.Enum):
    """Which consumer blocks read producer block b (r per producer block, P producer blocks)."""

    CONTIGUOUS = "contiguous"  # b*r + k
    STRIDED = "strided"  # b + k*P


@dataclass(frozen=True)
class BlockLink:
    """Why a producer->consumer pair can run block by block (engine.blockdeps): every consumer
    block reads exactly one producer block, and producer block b's consumers are
    b*per + k (contiguous) or b + k*producer_blocks (strided), k < per."""

    edge_class: str  # "one-to-one"
    method: str  # the block-dependency method that produced the map
    producer_blocks: int
    consumer_blocks: int
    per_producer: int
    pattern: LinkPattern
    consumer_param: int  # the consumer's parameter that reads the producer's output

    def describe(self) -> str:
        head = f"{self.edge_class} block map ({self.method}): {self.producer_blocks} producer blocks"
        if self.per_producer == 1:
            return f"{head}, consumer block b reads producer block b"
        where = (f"b*{self.per_producer}+k" if self.pattern is LinkPattern.CONTIGUOUS
                 else f"b+k*{self.producer_blocks}")
        return f"{head}, consumer blocks {where} (k<{self.per_producer}) read producer block b"


def unit_noun(axis: str) -> str:
    """One unit of a RowLink.axis: "row", "channel" or "slice"."""
    return axis[:-1] if axis in ("rows", "channels") else "slice"


@dataclass(frozen=True)
class RowLink:
    """Why a producer->consumer pair can run by row bands (engine.parallel.codegen.cpu_rows):
    both kernels' parallel chunks are (tile, row), and each consumer row reads a window of
    the producer's rows (per-chunk footprints, engine.blockdeps)."""

    consumer_param: int  # the consumer's parameter that reads the producer's output
    rows: int  # the consumer's output rows (row units when per > 1)
    tasks: int  # row bands, one parallel task each
    band: int  # rows per band
    windows: tuple[str, ...]  # per consumer stage: which rows of its input row y reads
    producer_chunks: int
    consumer_chunks: int
    regions_saved: int  # parallel loops that disappear (the consumer's stages)
    kept_bytes: int
    scratch_bytes: int
    recomputed: float
    whole_band: bool = False  # stage by stage over the band (else row by row)
    per: int = 1  # consumer rows per row unit (a chunk of several rows, a matmul's row tile)
    # what the units slice: "rows" (image or token rows), "channels" (a concat's slices, an
    # LRN's channel window) or "axis-k slices"
    axis: str = "rows"

    def describe(self) -> str:
        one = unit_noun(self.axis)
        order = "stage by stage over each band" if self.whole_band else f"{one} by {one}"
        rows = f"{self.rows} {self.axis}" if self.per == 1 else f"{self.rows} units of {self.per} {self.axis}"
        return (f"{one} bands: {self.tasks} tasks of {self.band} of {rows}, {order}; "
                + "; ".join(self.windows))


@dataclass(frozen=True)
class SliceLink:
    """Why a concat's producers can write straight into its output (engine.parallel.slices):
    each is read by the concat only, and producer i's blocks map one-to-one onto the slice
    [offsets[i], offsets[i] + extents[i]) of `axis`."""

    axis: int
    offsets: tuple[int, ...]
    extents: tuple[int, ...]
    out_shape: tuple[int, ...]
    epilogue: str = ""  # what the concat kernel applies to each element (FuseOps' relu), "" if nothing
    # a one-input copy permuting `axis` (a channel shuffle): where the producer's index j goes
    permutation: str = ""

    def describe(self) -> str:
        then = f", each value through the copy's epilogue {self.epilogue}" if self.epilogue else ""
        if self.permutation:
            return (f"one-to-one onto a permutation of axis {self.axis} of {list(self.out_shape)}: the "
                    f"producer's index j on it is written at {self.permutation}{then}; the copy is not launched")
        parts = ", ".join(f"[{o}, {o + e})" for o, e in zip(self.offsets, self.extents))
        return (f"one-to-one into slices of axis {self.axis} of {list(self.out_shape)}: the producers "
                f"write {parts} in place{then}; the concat's copy is not launched")


@dataclass(frozen=True)
class Evidence:
    fork: str  # the value the group forks from
    branches: tuple[tuple[int, ...], ...]  # kernel indices of the group's branches
    no_path: bool
    no_member_reads_another: bool
    launch_after: int
    first_consumer: int
    reorder_needed: bool
    heterogeneous: bool
    dropped: tuple[str, ...] = ()  # members left out, with the reason
    link: BlockLink | None = None  # block-level vertical decisions: the block map behind them
    rows: RowLink | None = None  # row-band vertical decisions: the row structure behind them
    slices: SliceLink | None = None  # slice vertical decisions: where each producer writes


@dataclass(frozen=True)
class FusionDecision:
    id: DecisionId
    kind: DecisionKind
    stage: int
    members: tuple[MemberRef, ...]
    gain: Gain
    evidence: Evidence
    status: DecisionStatus = DecisionStatus.PROPOSED
    reason: str = ""

    @property
    def kernels(self) -> tuple[int, ...]:
        return tuple(m.kernel for m in self.members)

    def title(self, labels: Mapping[str, str] | None = None) -> str:
        """The members' first operators, `a | b`; kernels of one operator are said once with
        their count (`r142/softmax (2 kernels)`), not `r142/softmax | r142/softmax`. `labels`:
        op id -> the label to use (a front end's unique labels), else the member's own."""
        labels = labels or {}
        names = [labels.get(m.ops[0]) if m.ops and m.ops[0] in labels else m.labels[0] if m.labels else m.func
                 for m in self.members]
        counts = {n: names.count(n) for n in names}
        return " | ".join(n if counts[n] == 1 else f"{n} ({counts[n]} kernels)" for n in dict.fromkeys(names))


@dataclass(frozen=True)
class FusionPlan:
    model: str
    target: str
    fingerprint: str
    decisions: tuple[FusionDecision, ...]

    def decision(self, decision_id: str) -> FusionDecision:
        for d in self.decisions:
            if d.id == decision_id:
                return d
        raise PlanError(f"no decision '{decision_id}' in the plan; known: "
                        f"{', '.join(d.id for d in self.decisions) or 'none'}")

    def approved(self) -> tuple[FusionDecision, ...]:
        return tuple(d for d in self.decisions if d.status is DecisionStatus.APPROVED)

    def with_approval(self, spec: str) -> "FusionPlan":
        """`all` approves every proposed decision, `none` none, `d0,d3` those (the others
        proposed stay proposed; rejected ones cannot be approved)."""
        spec = spec.strip()
        if spec == "none":
            wanted: set[str] = set()
        elif spec == "all":
            wanted = {d.id for d in self.decisions if d.status is not DecisionStatus.REJECTED}
        else:
            wanted = {s.strip() for s in spec.split(",") if s.strip()}
            for w in wanted:
                d = self.decision(w)
                if d.status is DecisionStatus.REJECTED:
                    raise PlanError(f"decision {w} was rejected ({d.reason}); it cannot be approved")
        out = []
        for d in self.decisions:
            if d.status is DecisionStatus.REJECTED:
                out.append(d)
            else:
                out.append(replace(d, status=DecisionStatus.APPROVED if d.id in wanted
                                   else DecisionStatus.PROPOSED))
        return replace(self, decisions=tuple(out))

    # --- JSON -----------------------------------------------------------------------------

    def to_json(self) -> dict:
        return {"format": PLAN_FORMAT, "model": self.model, "target": self.target,
                "fingerprint": self.fingerprint,
                "decisions": [_decision_json(d) for d in self.decisions]}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=1) + "\n"

    @staticmethod
    def from_json(data: dict) -> "FusionPlan":
        try:
            if data.get("format") != PLAN_FORMAT:
                raise PlanError(f"unsupported plan format {data.get('format')!r} (expected {PLAN_FORMAT})")
            return FusionPlan(data["model"], data["target"], data["fingerprint"],
                              tuple(_decision_from(d) for d in data["decisions"]))
        except PlanError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise PlanError(f"malformed plan: {type(err).__name__}: {err}") from None


def _decision_json(d: FusionDecision) -> dict:
    data = asdict(d)
    data["kind"], data["status"] = d.kind.value, d.status.value
    return data


def _tuple(x):
    return tuple(_tuple(v) for v in x) if isinstance(x, list) else x


def _decision_from(d: dict) -> FusionDecision:
    members = tuple(MemberRef(**{k: _tuple(v) for k, v in m.items()}) for m in d["members"])
    gain = Gain(**{k: _tuple(v) for k, v in d["gain"].items()})
    ev = dict(d["evidence"])
    link = ev.pop("link", None)
    rows = ev.pop("rows", None)
    slices = ev.pop("slices", None)
    evidence = Evidence(**{k: _tuple(v) for k, v in ev.items()},
                        link=BlockLink(**{**link, "pattern": LinkPattern(link["pattern"])}) if link else None,
                        rows=RowLink(**{k: _tuple(v) for k, v in rows.items()}) if rows else None,
                        slices=SliceLink(**{k: _tuple(v) for k, v in slices.items()}) if slices else None)
    return FusionDecision(DecisionId(d["id"]), DecisionKind(d["kind"]), int(d["stage"]), members,
                          gain, evidence, DecisionStatus(d["status"]), d.get("reason", ""))


def application_rank(kind: DecisionKind) -> int:
    """Where decisions of `kind` come in application order: slice decisions first (each also
    runs its producers as one horizontally fused kernel, and removes the concat's copy)."""
    return 0 if kind is DecisionKind.VERTICAL_SLICES else 1


def application_order(decisions) -> list[FusionDecision]:
    """The order approved decisions are applied in, where they share a kernel the first one
    wins: by application_rank, then plan order."""
    return sorted(decisions, key=lambda d: application_rank(d.kind))


def kernel_fingerprint(kernels: tuple[KernelCall, ...]) -> str:
    text = "\n".join(f"{k.index} {' '.join(k.ops)} {k.out_shape}" for k in kernels)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def validate_plan(plan: FusionPlan, model: str, target: str, kernels: tuple[KernelCall, ...],
                  source: str = "plan") -> FusionPlan:
    """Check the plan against the model's kernels; PlanError (one line) when it does not fit."""
    if plan.model != model:
        raise PlanError(f"{source} is for model '{plan.model}', not '{model}'")
    if plan.target != target:
        raise PlanError(f"{source} is for target '{plan.target}', not '{target}'")
    for d in plan.decisions:
        if len(d.members) < 2:
            raise PlanError(f"{source}: decision {d.id} has fewer than 2 members")
        for m in d.members:
            if not 0 <= m.kernel < len(kernels) or tuple(kernels[m.kernel].ops) != tuple(m.ops):
                raise PlanError(f"{source}: decision {d.id}: unknown member kernel {m.kernel} "
                                f"({', '.join(m.labels) or m.func}) in model '{model}'")
    ids = [d.id for d in plan.decisions]
    if len(set(ids)) != len(ids):
        raise PlanError(f"{source}: duplicate decision ids")
    now = kernel_fingerprint(kernels)
    if plan.fingerprint != now:
        raise PlanError(f"{source} was proposed for other kernels of model '{model}' (fingerprint "
                        f"{plan.fingerprint}, now {now}: operators, order or shapes changed); "
                        f"propose a new plan")
    return plan


def load_plan(path: str | Path) -> FusionPlan:
    """Parse a plan file (not yet validated against a model: see validate_plan)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise PlanError(f"plan file not found: {path}") from None
    except (OSError, ValueError) as err:
        raise PlanError(f"{path}: not a JSON plan: {str(err).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise PlanError(f"{path}: not a JSON plan object")
    return FusionPlan.from_json(data)
