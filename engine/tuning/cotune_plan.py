"""Co-tuning inside a compile: every approved horizontal decision of the fusion plan is
co-tuned in the schedule stage, before the plan is applied.

For each decision (llvm): the members' knobs and the fused layout are searched jointly
(engine.tuning.cotune), the baseline (members tuned alone, fused with the default layout)
gets the same budget, both winners are re-measured side by side and the faster one is
kept: its member schedules go into the module (the schedule stage then prepacks their
weights as for any kernel) and its layout into the record, which the plan applier hands
to the code generator (engine.tuning.hook.TuneOutcome.layouts). Results are stored beside the kernel records and
replayed by a later compile without measuring.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, replace
from typing import Callable

import tvm

from engine.schedule.cpu.rules import is_scheduled
from engine.errors import BlockwiseError, one_line
from engine.parallel.codegen.cpu import CpuLayout
from engine.tuning.cotune import Group, GroupConfig, compare_cotuning
from engine.tuning.database import TuneStore, group_key
from engine.tuning.kernel import as_kernel


class Kept(str, enum.Enum):
    COTUNED = "co-tuned"
    SEPARATE = "separately tuned"


@dataclass(frozen=True)
class CotuneRecord:
    """One decision's co-tuning, as stored and reported."""

    decision: str
    members: tuple[str, ...]
    knobs: tuple[tuple, ...]  # kept configuration: knob values per member
    layout: CpuLayout
    cotuned_ms: float
    separate_ms: float  # members tuned alone, fused with the default layout (same budget)
    trials: int  # per method
    kept: Kept  # which of the two configurations the compile uses (the faster)
    # the separately tuned tiles with the co-tuned layout (same rounds): the layout's part
    layout_only_ms: float | None = None  # None: a record stored before it was measured

    @property
    def speedup(self) -> float:
        return self.separate_ms / self.cotuned_ms

    @property
    def layout_speedup(self) -> float | None:
        return self.separate_ms / self.layout_only_ms if self.layout_only_ms else None

    def to_json(self) -> dict:
        data = asdict(self)
        data["layout"] = asdict(self.layout)
        data["speedup_vs_separate"] = self.speedup
        return data

    @staticmethod
    def from_json(data: dict) -> "CotuneRecord":
        layout = data["layout"]
        shares = tuple(layout["shares"]) if layout["shares"] is not None else None
        return CotuneRecord(data["decision"], tuple(data["members"]), tuple(tuple(k) for k in data["knobs"]),
                            CpuLayout(layout["sliced"], layout["tasks"], shares), data["cotuned_ms"],
                            data["separate_ms"], data["trials"], Kept(data["kept"]), data.get("layout_only_ms"))

    def note(self) -> str:
        part = (f"; the co-tuned layout alone, separately tuned tiles: {self.layout_speedup:.2f}x"
                if self.layout_speedup else "")
        return (f"co-tuning {self.decision}: co-tuned {self.cotuned_ms:.3f} ms vs separately tuned then "
                f"fused {self.separate_ms:.3f} ms ({self.speedup:.2f}x, {self.trials} trials each{part}); "
                f"kept {self.kept.value}: {self.layout.describe()}, knobs {list(self.knobs)}")


def cotune_plan(mod: tvm.IRModule, unscheduled: tvm.IRModule, ctx, plan, trials: int, store: TuneStore,
                emit: Callable[[str], None]) -> tuple[tvm.IRModule, list[CotuneRecord]]:
    """Co-tune the plan's approved decisions; returns the module with the kept member
    schedules and the records (each with the fused kernel's layout)."""
    saved = _load(store)
    records = []
    for d in plan.approved():
        if d.kind.vertical:
            continue  # co-tuning is for horizontal groups
        names = [ctx.kernels[k].func for k in d.kernels]
        funcs = [unscheduled[n] for n in names]
        current = [mod[n] if is_scheduled(mod[n]) else None for n in names]
        try:
            group = Group(funcs, ctx.target, names, current, ctx.spec.before_build)
            group.fused(GroupConfig((0,) * len(names), group.default_layout()))
        except (BlockwiseError, ValueError) as err:
            emit(f"co-tuning {d.id}: skipped ({one_line(err, 120)})")
            continue
        key = _key(funcs, trials)
        rec = saved.get(key)
        cfg = _config(group, rec) if rec is not None else None
        if cfg is None:
            emit(f"co-tuning {d.id}: {len(names)} members, {trials} trials for each method")
            rep = compare_cotuning(group, trials)
            joint = rep.cotuned_s <= rep.separate_s
            cfg = rep.cotuned.config if joint else rep.separate.config
            rec = CotuneRecord(d.id, tuple(names), group.knob_values(cfg), cfg.layout, rep.cotuned_s * 1e3,
                               rep.separate_s * 1e3, trials, Kept.COTUNED if joint else Kept.SEPARATE,
                               rep.layout_only_s * 1e3)
            saved[key] = rec
            _save(store, saved)
        rec = replace(rec, decision=d.id, members=tuple(names))
        emit(rec.note())
        records.append(rec)
        chosen = {names[m]: group.scheduled_member(m, k) for m, k in enumerate(cfg.knobs)
                  if group.variants[m][k][0] != ("as scheduled",)}
        if chosen:
            mod = tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs)
            for name, func in chosen.items():
                gv = mod.get_global_var(name)
                mod[gv] = as_kernel(func, mod[gv])
    return mod, records


def _config(group: Group, rec: CotuneRecord) -> GroupConfig | None:
    """The stored configuration on this group's variants (None if a knob or the layout is no
    longer in the space: the search runs again)."""
    if rec.layout.sliced and rec.layout not in group.layouts:
        return None
    knobs = []
    for m, values in enumerate(rec.knobs):
        found = [k for k, (v, _) in enumerate(group.variants[m]) if tuple(v) == tuple(values)]
        if not found:
            return None
        knobs.append(found[0])
    return GroupConfig(tuple(knobs), rec.layout)


def _key(funcs, trials: int) -> str:
    return f"{group_key(funcs)}@{trials}"


FILE = "cotuning.json"


def _load(store: TuneStore) -> dict[str, CotuneRecord]:
    return {k: CotuneRecord.from_json(v) for k, v in (store.read_json(FILE) or {}).items()}


def _save(store: TuneStore, records: dict[str, CotuneRecord]) -> None:
    store.write_json(FILE, {k: r.to_json() for k, r in sorted(records.items())})
