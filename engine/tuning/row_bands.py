"""Tuning of row-band fusion's knobs (engine.parallel.codegen.cpu_rows): how many row
bands (parallel tasks) the fused kernel splits the consumer's rows into, and whether a task
walks its band row by row (each producer row consumed right after it is computed) or
stage by stage over the whole band (a weight tile read once per band). More bands balance
the cores better and keep less scratch live; fewer recompute fewer halo rows. Each approved
row-band decision's fused kernel is built for every candidate (1-4 bands per core and one
row per band, within the halo limit, in both orders) on the members' final schedules and
timed alone; the fastest is kept and handed to the plan applier as the decision's layout.
Results are stored beside the kernel records and replayed without measuring.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable

import tvm

from engine.errors import BlockwiseError, one_line
from engine.parallel.codegen.cpu_rows import MAX_RECOMPUTED, fuse_rows_cpu, plan_rows, recomputed_share, row_chain
from engine.schedule.cpu.common import num_cores
from engine.tuning.cotune import time_kernel
from engine.tuning.database import TuneStore, group_key


@dataclass(frozen=True)
class RowBandsRecord:
    """One decision's search, as stored and reported; a point is (bands, whole_band)."""

    decision: str
    members: tuple[str, ...]
    layout: tuple[int, bool]  # the kept point (what the plan applier uses)
    default: tuple[int, bool]  # the proposal's
    measured: tuple[tuple[int, bool, float], ...]  # (bands, whole_band, ms of the fused kernel alone)

    @property
    def speedup(self) -> float:
        """The proposal's time over the kept point's."""
        times = {(b, w): ms for b, w, ms in self.measured}
        return times[self.default] / times[self.layout]

    def to_json(self) -> dict:
        return {**asdict(self), "knob": "row bands", "speedup_vs_default": self.speedup}

    @staticmethod
    def from_json(data: dict) -> "RowBandsRecord":
        point = lambda p: (int(p[0]), bool(p[1]))
        return RowBandsRecord(data["decision"], tuple(data["members"]), point(data["layout"]), point(data["default"]),
                              tuple((int(b), bool(w), float(ms)) for b, w, ms in data["measured"]))

    def note(self) -> str:
        name = lambda b, w: f"{b}{' whole-band' if w else ''}"
        tried = ", ".join(f"{name(b, w)}: {ms:.3f} ms" for b, w, ms in self.measured)
        return (f"row bands {self.decision}: {tried}; kept {name(*self.layout)} "
                f"({self.speedup:.2f}x the proposal's {name(*self.default)})")


def candidates(chain, cores: int, default: int) -> list[tuple[int, bool]]:
    rows = chain[-1].rows
    # as the plan runs them: past the row units (bands aligned to a producer's multi-row
    # chunks) a count is clamped, and the same kernel would be measured twice
    counts = {plan_rows(chain, t).tasks for t in {min(rows, k * cores) for k in (1, 2, 3, 4)} | {rows}} | {default}
    counts = sorted(t for t in counts if t == default or recomputed_share(chain, plan_rows(chain, t)) <= MAX_RECOMPUTED)
    return [(t, whole) for whole in (False, True) for t in counts]


def tune_row_bands(mod: tvm.IRModule, ctx, plan, store: TuneStore, emit: Callable[[str], None]) -> list[RowBandsRecord]:
    """A record per approved row-band decision (see the module doc)."""
    from engine.parallel.plan import DecisionKind

    saved = _load(store)
    records = []
    cores = num_cores(ctx.target)
    for d in plan.approved():
        if d.kind is not DecisionKind.VERTICAL_ROWS:
            continue
        names = [ctx.kernels[k].func for k in d.kernels]
        link = d.evidence.rows
        key = f"{group_key([mod[n] for n in names])}@rows{link.consumer_param}"
        rec = saved.get(key)
        if rec is None:
            try:
                _, _, chain = row_chain(mod[names[0]], mod[names[1]], names, link.consumer_param)
                measured = []
                for bands, whole in candidates(chain, cores, link.tasks):
                    fused = fuse_rows_cpu(mod[names[0]], mod[names[1]], names, link.consumer_param, bands, whole)
                    ms = time_kernel(fused, ctx.target, before_build=ctx.spec.before_build) * 1e3
                    measured.append((bands, whole, ms))
            except BlockwiseError as err:
                emit(f"row bands {d.id}: skipped ({one_line(err, 120)})")
                continue
            best = min(measured, key=lambda m: m[2])
            rec = RowBandsRecord(d.id, tuple(names), (best[0], best[1]), (link.tasks, link.whole_band),
                                 tuple(measured))
            saved[key] = rec
            _save(store, saved)
        rec = RowBandsRecord(d.id, tuple(names), rec.layout, rec.default, rec.measured)
        emit(rec.note())
        records.append(rec)
    return records


FILE = "row_bands.json"


def _load(store: TuneStore) -> dict[str, RowBandsRecord]:
    try:
        return {k: RowBandsRecord.from_json(v) for k, v in (store.read_json(FILE) or {}).items()}
    except (OSError, ValueError, KeyError, TypeError):
        return {}  # unreadable: measured again


def _save(store: TuneStore, saved: dict[str, RowBandsRecord]) -> None:
    store.write_json(FILE, {k: v.to_json() for k, v in saved.items()})
