"""The persistent tuning store of one model on one target.

    .blockwise/tune/<model>-<target>/
        database_workload.json, database_tuning_record.json   MetaSchedule JSONDatabase
        choices.json      per kernel workload: default time, tuned time, trials, choice
        logs/             MetaSchedule task logs

A later compile finds every kernel it has seen here and measures nothing again.
"""

from __future__ import annotations

import enum
import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import tvm
import tvm_ffi
from tvm.s_tir import meta_schedule as ms

DEFAULT_ROOT = Path(".blockwise/tune")


class Choice(str, enum.Enum):
    TUNED = "tuned"  # MetaSchedule's best schedule measured fastest
    TEMPLATE = "template"  # a point of our default rule's knob space (engine.tuning.knobs) measured fastest
    DEFAULT = "default"  # the default schedule measured faster (or the tuner found nothing valid)
    NOT_TUNED = "not tuned"  # outside the trial budget: only the default was measured


@dataclass(frozen=True)
class KernelRecord:
    """What is known about one kernel workload (keyed by structural hash)."""

    workload: str
    name: str  # PrimFunc name when first seen
    default_s: float | None
    tuned_s: float | None = None
    trials: int = 0
    choice: Choice = Choice.NOT_TUNED
    knobs: tuple | None = None  # the template knobs when choice is TEMPLATE

    @property
    def speedup(self) -> float | None:
        if self.default_s and self.tuned_s:
            return self.default_s / self.tuned_s
        return None


def workload_key(mod: tvm.IRModule) -> str:
    return f"{tvm_ffi.structural_hash(mod) & 0xFFFFFFFFFFFFFFFF:016x}"


def group_key(funcs) -> str:
    """The workload keys of several PrimFuncs (a fused group's members), joined by `+`."""
    return "+".join(workload_key(tvm.IRModule({"main": f.with_attr("global_symbol", "main")})) for f in funcs)


class TuneStore:
    """The database folder of one (model, target) pair."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    @staticmethod
    def for_model(model: str, target: str, root: str | os.PathLike | None = None) -> "TuneStore":
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{model}-{target}")
        return TuneStore(Path(root or DEFAULT_ROOT) / safe)

    def database(self) -> ms.database.JSONDatabase:
        self.path.mkdir(parents=True, exist_ok=True)
        return ms.database.JSONDatabase(work_dir=str(self.path))

    def read_json(self, name: str) -> dict | None:
        """A JSON file of the store; None when it was not written yet."""
        path = self.path / name
        return json.loads(path.read_text()) if path.exists() else None

    def write_json(self, name: str, data: dict) -> None:
        """Write a JSON file of the store whole or not at all (a temporary file, renamed)."""
        self.path.mkdir(parents=True, exist_ok=True)
        path = self.path / name
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(path)

    def load_records(self) -> dict[str, KernelRecord]:
        raw = self.read_json("choices.json") or {}
        return {k: KernelRecord(**{**v, "choice": Choice(v["choice"]),
                                   "knobs": tuple(v["knobs"]) if v.get("knobs") is not None else None})
                for k, v in raw.items()}

    def save_records(self, records: dict[str, KernelRecord]) -> None:
        self.write_json("choices.json", {k: {**asdict(r), "choice": r.choice.value} for k, r in sorted(records.items())})
