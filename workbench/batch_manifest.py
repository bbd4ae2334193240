"""The manifest of `workbench batch`: models x targets x variants, checked before any work.

    out = "out/batch"                 # default output folder (relative to the manifest)
    [defaults]                        # any model key below, for every model
    targets = ["llvm"]
    variants = ["base", "both"]
    runs = 20
    [[model]]
    spec = "fire_module"              # bundled sample, ONNX path (relative to the manifest), zoo:NAME
    [[model]]
    spec = "zoo:squeezenet"
    name = "squeezenet"               # its folder under out (default: the file's stem, zoo NAME)
    targets = ["llvm", "cuda"]
    shapes = {}                       # input NAME = [dims], for dynamic inputs
    inputs = "data.npz"               # inputs to verify on (--inputs; relative to the manifest)
    arch = {cuda = "sm_80"}           # --arch per target
    tune_trials = 0                   # tune every variant's kernels (MetaSchedule trials)
    cotune_trials = 0                 # > 0: the `cotuned` variant co-tunes its decisions

TOML (`.toml`) or JSON (any other suffix). `load_manifest(path)` -> `Manifest`, or a
one-line `ManifestError` naming the entry (the CLI exits 2 before writing anything).
"""

from __future__ import annotations

import enum
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from engine.errors import BlockwiseError
from engine.events import FusionPolicy
from engine.model import ZOO_PREFIX, model_name, resolve_path
from engine.parallel.plan import DecisionKind, DecisionStatus, FusionPlan
from engine.session import target_info, target_names
from workbench.args import DEFAULT_TARGET


class ManifestError(BlockwiseError):
    """The batch manifest cannot be read or names something that does not exist."""


class Variant(str, enum.Enum):
    """What a run does with the model's fusion plan (one proposal per model and target)."""

    BASE = "base"  # no plan: the default schedules alone
    PARALLEL = "parallel"  # the horizontal decisions approved (parallel operators, one launch)
    BLOCK = "block"  # the block-level vertical decisions approved
    BOTH = "both"  # every decision approved
    AUTO = "auto"  # every decision tried, measured winners kept (FusionPolicy.MEASURED_WINNERS)
    COTUNED = "cotuned"  # every decision approved and co-tuned (needs cotune_trials)

    @property
    def policy(self) -> FusionPolicy:
        return FusionPolicy.MEASURED_WINNERS if self is Variant.AUTO else FusionPolicy.APPROVED

    def plan(self, proposed: FusionPlan) -> FusionPlan | None:
        """The plan this variant compiles with, from the model's proposal (None: no plan)."""
        if self is Variant.BASE:
            return None
        if self is Variant.AUTO:
            return proposed  # the policy tries every proposed decision
        kinds = _APPROVED_KINDS[self]
        ids = [d.id for d in proposed.decisions if d.kind in kinds and d.status is not DecisionStatus.REJECTED]
        return proposed.with_approval(",".join(ids) or "none")


_APPROVED_KINDS = {Variant.PARALLEL: {DecisionKind.HORIZONTAL, DecisionKind.BRANCH_STAGE},
                   Variant.BLOCK: {DecisionKind.VERTICAL_BLOCK, DecisionKind.VERTICAL_ROWS,
                                   DecisionKind.VERTICAL_SLICES},
                   Variant.BOTH: set(DecisionKind), Variant.COTUNED: set(DecisionKind)}


@dataclass(frozen=True)
class ModelEntry:
    """One [[model]] of the manifest, defaults filled in; `spec` as the engine opens it."""

    name: str
    spec: str
    targets: tuple[str, ...]
    variants: tuple[Variant, ...]
    runs: int = 20
    seed: int = 0
    rtol: float = 1e-3
    atol: float = 1e-4
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    arch: dict[str, str] = field(default_factory=dict)
    tune_trials: int = 0
    cotune_trials: int = 0
    export: bool = True
    inputs: str | None = None  # a file of inputs to verify on (engine.input_data)

    def options_json(self, target: str) -> dict:
        """What a finished run was asked to do (a re-run redoes it when this changed)."""
        return {"spec": self.spec, "runs": self.runs, "seed": self.seed, "rtol": self.rtol, "atol": self.atol,
                "shapes": {k: list(v) for k, v in self.shapes.items()}, "arch": self.arch.get(target),
                "tune_trials": self.tune_trials, "cotune_trials": self.cotune_trials, "export": self.export,
                "inputs": self.inputs}


@dataclass(frozen=True)
class Run:
    """One (model, target, variant) of the batch."""

    model: ModelEntry
    target: str
    variant: Variant

    @property
    def key(self) -> str:
        return f"{self.model.name}/{self.target}/{self.variant.value}"


@dataclass(frozen=True)
class Manifest:
    path: Path
    out: Path | None  # the manifest's `out`, resolved against its folder
    models: tuple[ModelEntry, ...]

    def runs(self) -> tuple[Run, ...]:
        """Every entry, model by model and target by target, `base` first (the others' reference)."""
        order = list(Variant)
        return tuple(Run(m, t, v) for m in self.models for t in m.targets
                     for v in sorted(m.variants, key=lambda v: (v is not Variant.BASE, order.index(v))))


_TOP_KEYS = {"out", "defaults", "model"}
# model keys, their types and checks; all but spec and name may also sit in [defaults]
_SCALARS = {"runs": int, "seed": int, "rtol": float, "atol": float, "tune_trials": int, "cotune_trials": int,
            "export": bool}
_MODEL_KEYS = {"spec", "name", "targets", "variants", "shapes", "arch", "inputs", *_SCALARS}
_DEFAULT_KEYS = _MODEL_KEYS - {"spec", "name", "inputs"}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def load_manifest(path: str | Path) -> Manifest:
    path = Path(path)
    data = _read(path)
    where = str(path)
    _known(data, _TOP_KEYS, where)
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise ManifestError(f"{where}: [defaults] must be a table")
    _known(defaults, _DEFAULT_KEYS, f"{where} [defaults]")
    models = data.get("model")
    if not isinstance(models, list) or not models or not all(isinstance(m, dict) for m in models):
        raise ManifestError(f"{where}: no models: add [[model]] tables with spec = \"...\"")
    entries = tuple(_model(path, i, m, defaults) for i, m in enumerate(models, 1))
    names = [e.name for e in entries]
    for name in names:
        if names.count(name) > 1:
            raise ManifestError(f"{where}: two models named '{name}': give one a name = \"...\"")
    out = data.get("out")
    if out is not None and not isinstance(out, str):
        raise ManifestError(f"{where}: out must be a string (a folder)")
    return Manifest(path, path.parent / out if out else None, entries)


def _read(path: Path) -> dict:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ManifestError(f"manifest not found: {path}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ManifestError(f"{path}: cannot read the manifest ({err})") from None
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, ValueError) as err:
        kind = "TOML" if path.suffix == ".toml" else "JSON"
        raise ManifestError(f"{path}: not a {kind} manifest: {str(err).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ManifestError(f"{path}: the manifest must be a table (object) of out, defaults and model")
    return data


def _known(table: dict, keys: set[str], where: str) -> None:
    unknown = sorted(set(table) - keys)
    if unknown:
        raise ManifestError(f"{where}: unknown key '{unknown[0]}'; known: {', '.join(sorted(keys))}")


def _model(manifest: Path, index: int, raw: dict, defaults: dict) -> ModelEntry:
    spec = raw.get("spec")
    where = f"{manifest}: model {index}" + (f" ({spec})" if isinstance(spec, str) else "")
    _known(raw, _MODEL_KEYS, where)
    if not isinstance(spec, str) or not spec:
        raise ManifestError(f"{where}: spec = \"...\" is missing (sample name, ONNX path or zoo:NAME)")
    merged = {**defaults, **raw}
    local = manifest.parent / spec  # a path is relative to the manifest; a bare name may be a sample
    if not spec.startswith(ZOO_PREFIX) and (local.exists() or local.suffix or "/" in spec):
        spec = str(local)
    try:
        file = resolve_path(spec)
    except BlockwiseError as err:
        raise ManifestError(f"{where}: {err}") from None
    name = merged.get("name", spec[len(ZOO_PREFIX):] if spec.startswith(ZOO_PREFIX) else model_name(file))
    if not isinstance(name, str) or not _NAME.match(name):
        raise ManifestError(f"{where}: name must be letters, digits, '.', '_' or '-', got {name!r}")
    targets = _names(merged.get("targets", [DEFAULT_TARGET]), target_names(), "target", where)
    variants = tuple(Variant(v) for v in _names(merged.get("variants", [Variant.BASE.value]),
                                                tuple(v.value for v in Variant), "variant", where))
    scalars = {key: _scalar(key, kind, merged[key], where) for key, kind in _SCALARS.items() if key in merged}
    entry = ModelEntry(name, spec, targets, variants, shapes=_shapes(merged.get("shapes", {}), where),
                       arch=_arch(merged.get("arch", {}), where), inputs=_inputs(manifest, raw, where), **scalars)
    if Variant.COTUNED in variants:
        if not entry.cotune_trials:
            raise ManifestError(f"{where}: variant 'cotuned' needs cotune_trials > 0")
        other = [t for t in targets if not target_info(t).cotunes]
        if other:
            raise ManifestError(f"{where}: variant 'cotuned': co-tuning is not implemented for target {other[0]}")
    return entry


def _scalar(key: str, kind: type, value, where: str):
    numbers = (int, float) if kind is float else (int,)
    ok = isinstance(value, bool) if kind is bool else isinstance(value, numbers) and not isinstance(value, bool)
    if not ok:
        what = "a number" if kind is float else kind.__name__
        raise ManifestError(f"{where}: {key} must be {what}, got {value!r}")
    least = 1 if key == "runs" else 0
    if kind is not bool and value < least:
        raise ManifestError(f"{where}: {key} must be >= {least}, got {value}")
    return kind(value)


def _names(value, known: tuple[str, ...], what: str, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ManifestError(f"{where}: {what}s must be a non-empty list of names")
    for v in value:
        if v not in known:
            raise ManifestError(f"{where}: unknown {what} '{v}'; known: {', '.join(known)}")
    return tuple(dict.fromkeys(value))


def _shapes(value, where: str) -> dict[str, tuple[int, ...]]:
    if not isinstance(value, dict):
        raise ManifestError(f"{where}: shapes must be a table of input NAME = [dims]")
    for name, dims in value.items():
        if not isinstance(dims, list) or not dims or not all(type(d) is int and d > 0 for d in dims):
            raise ManifestError(f"{where}: shapes.{name} must be a list of positive integers, got {dims!r}")
    return {name: tuple(dims) for name, dims in value.items()}


def _inputs(manifest: Path, raw: dict, where: str) -> str | None:
    if "inputs" not in raw:
        return None
    value = raw["inputs"]
    if not isinstance(value, str) or not value:
        raise ManifestError(f"{where}: inputs must be a path (.npz, a test_data_set folder or a .pb)")
    path = manifest.parent / value
    if not path.exists():
        raise ManifestError(f"{where}: inputs {path}: no such file or folder")
    return str(path)


def _arch(value, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ManifestError(f"{where}: arch must be a table of target = \"arch\"")
    for target in value:
        if target not in target_names():
            raise ManifestError(f"{where}: arch: unknown target '{target}'; known: {', '.join(target_names())}")
    return dict(value)
