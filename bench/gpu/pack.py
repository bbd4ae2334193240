"""Pack every variant of each model + a runtime-only TVM for the GPU machine (runs HERE).

    .venv/bin/python bench/gpu/pack.py                       # default models -> bench/gpu/payload
    .venv/bin/python bench/gpu/pack.py --models fire_module zoo:squeezenet --out /tmp/p
    .venv/bin/python bench/gpu/pack.py --target llvm --python 3.11 --models fire_module --out /tmp/p
        (a CPU payload: the same layout with llvm libraries, for the dry run of run_gpu.py here)

The GPU machine has no TVM and no network, and a run carries at most 64 MiB. Per model
(payload/models/<name>/), one library per variant, all built for the same target:

  base           our pipeline, no fusion decision approved
  parallel       the plan's horizontal decisions (DecisionKind.HORIZONTAL, BRANCH_STAGE)
  block          its block-level vertical decisions (DecisionKind.VERTICAL_BLOCK)
  both           every decision
  cotuned        every decision, co-tuned (TuneOptions(trials=0, cotune_trials=N); cuda: ranked
                 by the launch estimator, nothing measured)
  tvm            stock TVM: tvm.relax.frontend.onnx.from_onnx + tvm.compile(mod, target) (for
                 cuda its default pipeline: FuseOps/FuseTIR + dlight), the same weights
  base-embedded  control, small models only: `base` with its weights inside the library

A variant whose plan has no decision of its kind is recorded ("no decision of this kind")
and not built; one whose approved decisions equal an earlier variant's, or whose final
module is structurally equal to an earlier one's, is recorded as `same_as` it and not
shipped twice.

Weights: every library but the control is built by bench/gpu/lift.py with its weights
(constants of >= --lift-min-bytes) as parameters of `main` after the inputs, lifted where
tvm.compile's own pipeline has folded every constant, so the kernels are those of the
embedded build. The variants of a model share ONE weights file (weights.npz, keyed by
content); a weight equal to an initializer that regen.py regenerates (models with more than
--regen-above-mib of weights) is not shipped at all: run_gpu.py regenerates it. Files:

  <variant>.so.gz      `export_library`, gzipped (cuda: the CUDA source inside, compiled at load)
  <variant>.fatbin.gz  (cuda) that source compiled here with nvcc; run_gpu.py hands it to TVM's
                       loader by the source's sha256, so no compiler runs there
  weights.npz       the shared weights that are not regenerated
  model.onnx        the normalised ONNX model, without the regenerated initializers
  inputs.npz        the inputs (Model.random_inputs(seed))
  reference.npz     onnxruntime (CPU, here) outputs for those inputs

plus tvm_runtime_cpXY.tgz (the apache-tvm wheel without libtvm_compiler.so and 3rdparty,
plus the apache-tvm-ffi wheel) and manifest.json. Each file's size and the total are
printed; a model that does not fit what is left is left out (listed, with the reason), and
a payload over --limit-mib is refused: one line, exit 1, no manifest.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

from engine.parallel.plan import DecisionKind, DecisionStatus  # noqa: E402  (plain data, no TVM)

DEFAULT_MODELS = ["fire_module", "inception_block", "mha_block", "moe_block", "zoo:squeezenet",
                  "zoo:inception_v1", "zoo:resnet50"]
TVM_WHEEL = "apache-tvm==0.27.0.post1"
FFI_WHEEL = "apache-tvm-ffi==0.1.14.post1"
MIB = 1024 * 1024


@dataclasses.dataclass(frozen=True)
class Variant:
    """One build of a model: which of the plan's decisions are approved, co-tuned or not."""

    name: str
    kinds: frozenset  # DecisionKind approved; empty: no plan
    cotune: bool = False


_ALL_KINDS = frozenset(DecisionKind)
VARIANTS = (Variant("base", frozenset()),
            Variant("parallel", frozenset({DecisionKind.HORIZONTAL, DecisionKind.BRANCH_STAGE})),
            Variant("block", frozenset({DecisionKind.VERTICAL_BLOCK})),
            Variant("both", _ALL_KINDS),
            Variant("cotuned", _ALL_KINDS, cotune=True))
STOCK = "tvm"  # TVM's own import + tvm.compile
CONTROL = "base-embedded"  # `base` with the weights inside the library (small models)
VARIANT_NAMES = tuple(v.name for v in VARIANTS) + (STOCK, CONTROL)
NO_DECISION = "no decision of this kind"


def log(msg: str) -> None:
    print(f"[pack] {msg}", flush=True)


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


# --- runtime-only TVM ---------------------------------------------------------------------------


def _find_wheels(wheels: Path, py: str) -> tuple[Path, Path] | None:
    tag = "cp" + py.replace(".", "")
    tvm = sorted(wheels.glob("apache_tvm-0.27.0.post1-*.whl"))
    ffi = sorted(wheels.glob(f"apache_tvm_ffi-0.1.14.post1-{tag}-*.whl"))
    return (tvm[0], ffi[0]) if tvm and ffi else None


def download_wheels(wheels: Path, py: str) -> tuple[Path, Path]:
    """The cp<py> wheels (gpu.md's pip download command), cached in `wheels`."""
    wheels.mkdir(parents=True, exist_ok=True)
    found = _find_wheels(wheels, py)
    if found:
        return found
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--python-version", py, "--implementation", "cp", "--platform", "manylinux_2_28_x86_64",
           "--platform", "manylinux_2_24_x86_64", "-d", str(wheels), TVM_WHEEL, FFI_WHEEL]
    log("downloading wheels: " + " ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    found = _find_wheels(wheels, py)
    if proc.returncode != 0 or not found:
        raise SystemExit(f"pip download failed ({proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return found


def build_runtime(py: str, wheels: Path, out: Path) -> dict:
    """tvm_runtime_cpXY.tgz: top folder tvm_runtime/ holding tvm/ and tvm_ffi/ (import path)."""
    tvm_whl, ffi_whl = download_wheels(wheels, py)
    with tempfile.TemporaryDirectory(prefix="tvm_rt_") as tmp:
        stage = Path(tmp) / "tvm_runtime"
        for whl in (tvm_whl, ffi_whl):
            with zipfile.ZipFile(whl) as zf:
                for info in zf.infolist():
                    name = info.filename
                    if name.startswith("tvm/3rdparty/") or name == "tvm/lib/libtvm_compiler.so":
                        continue
                    zf.extract(info, stage)
                    mode = (info.external_attr >> 16) & 0o777
                    if mode:
                        os.chmod(stage / name, mode)
        # tvm_ffi imports typing_extensions (pure Python): torch brings it along, but keep a
        # copy that run_gpu.py puts at the END of sys.path in case the machine lacks it.
        import typing_extensions

        (stage / "_fallback").mkdir()
        shutil.copy(typing_extensions.__file__, stage / "_fallback" / "typing_extensions.py")
        unpacked = dir_size(stage)
        with tarfile.open(out, "w:gz", compresslevel=6) as tar:
            tar.add(stage, arcname="tvm_runtime")
    log(f"runtime-only TVM for cp{py.replace('.', '')}: {unpacked / MIB:.1f} MiB unpacked, "
        f"{out.stat().st_size / MIB:.1f} MiB as {out.name}")
    return {"file": out.name, "python": py, "wheels": [tvm_whl.name, ffi_whl.name],
            "unpacked_bytes": unpacked, "bytes": out.stat().st_size}


# --- models -------------------------------------------------------------------------------------


def _weight_bytes(proto) -> int:
    from onnx import numpy_helper

    return sum(numpy_helper.to_array(i).nbytes for i in proto.graph.initializer)


def regenerate_weights(model, seed: int, min_elements: int):
    """A copy of `model` whose large float initializers follow regen.py's recipe, batch norm
    re-calibrated to them; returns (model, manifest entries)."""
    import onnx
    from onnx import numpy_helper

    from engine.calibrate import calibrate_batchnorm
    from regen import regen_tensor, sha256_of

    proto = onnx.ModelProto()
    proto.CopyFrom(model.proto)
    entries = []
    for k, init in enumerate(proto.graph.initializer):
        array = numpy_helper.to_array(init)
        if array.dtype != np.float32 or array.size < min_elements:
            continue
        mean, std = float(np.float32(array.mean())), float(np.float32(array.std()))
        new = regen_tensor(seed, init.name, array.shape, mean, std)
        init.CopyFrom(numpy_helper.from_array(new, init.name))
        entries.append({"name": init.name, "shape": list(array.shape), "dtype": "float32",
                        "seed": seed, "mean": mean, "std": std, "sha256": sha256_of(new)})
    calibrated = calibrate_batchnorm(proto, model.random_inputs(seed)) if entries else 0
    if calibrated:
        log(f"  re-calibrated {calibrated} BatchNormalization nodes for the regenerated weights")
    return dataclasses.replace(model, proto=proto), entries


def sanitize_io_names(proto) -> dict[str, str]:
    """Rename graph inputs and outputs that are not C identifiers (in place); returns old ->
    new. TVM's CUDA code generator names kernel parameters after them: zoo:resnet50's input
    `gpu_0/data_0` became `float* gpu_0/data_0_ptr`, which nvcc refuses (ours and stock TVM's
    build alike)."""
    import re

    taken = {v.name for v in [*proto.graph.input, *proto.graph.output]}
    renamed: dict[str, str] = {}
    for value in [*proto.graph.input, *proto.graph.output]:
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value.name):
            continue
        new = re.sub(r"\W", "_", value.name)
        new = new if re.match(r"[A-Za-z_]", new) else f"v_{new}"
        while new in taken:
            new += "_"
        taken.add(new)
        renamed[value.name] = new
    if not renamed:
        return renamed
    for node in proto.graph.node:
        node.input[:] = [renamed.get(x, x) for x in node.input]
        node.output[:] = [renamed.get(x, x) for x in node.output]
    for value in [*proto.graph.input, *proto.graph.output, *proto.graph.value_info]:
        value.name = renamed.get(value.name, value.name)
    return renamed


def strip_initializers(proto, names: set[str]):
    import onnx

    out = onnx.ModelProto()
    out.CopyFrom(proto)
    keep = [i for i in out.graph.initializer if i.name not in names]
    del out.graph.initializer[:]
    out.graph.initializer.extend(keep)
    return out


def onnx_dtype(elem_type: int) -> str:
    from onnx import helper

    return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name


def _one_line(err: Exception) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    return f"{type(err).__name__}: {lines[0][:300] if lines else ''}"


def approved_ids(plan, kinds: frozenset) -> list[str]:
    """Ids of the plan's decisions of `kinds` that can be approved (not rejected)."""
    return [d.id for d in plan.decisions if d.kind in kinds and d.status is not DecisionStatus.REJECTED]


class WeightStore:
    """The weights of one model's variants: shared by content, regenerated ones by recipe."""

    def __init__(self, regenerated: list[dict]):
        self.by_sha = {e["sha256"]: e for e in regenerated}
        self.arrays: dict[str, np.ndarray] = {}  # key -> array shipped in weights.npz
        self.refs: dict[str, dict] = {}  # key -> {"regen": name} or {"npz": key}, shape, dtype

    def keys_for(self, weights) -> list[str]:
        from regen import sha256_of

        keys = []
        for array in weights:
            sha = sha256_of(array)
            key = f"{array.dtype.name}-{'x'.join(map(str, array.shape)) or 'scalar'}-{sha[:16]}"
            if key not in self.refs:
                regen = self.by_sha.get(sha)
                if regen is not None and list(array.shape) == regen["shape"] and array.dtype == np.float32:
                    self.refs[key] = {"regen": regen["name"]}
                else:
                    self.refs[key] = {"npz": key}
                    self.arrays[key] = array
                self.refs[key].update(shape=list(array.shape), dtype=array.dtype.name, sha256=sha)
            keys.append(key)
        return keys

    def save(self, path: Path) -> None:
        np.savez(path, **self.arrays)


def _stock_module(model):
    """TVM's own import of the model (weights as constants, as a TVM user gets them)."""
    from tvm.relax.frontend.onnx import from_onnx

    return from_onnx(model.proto, keep_params_in_input=False)


def _our_module(session, variant: Variant, args, plan, store: str):
    """The module our pipeline hands to its build stage for `variant`, and its compile result."""
    from engine.events import CompileOptions, Stage
    from engine.tuning import TuneOptions

    if not variant.kinds:  # the scheduled module goes to the build as it is
        result = session.scheduled(args.target, args.arch)
        return result.module, result
    tuning = TuneOptions(trials=0, cotune_trials=args.cotune_trials, db_root=store) if variant.cotune else None
    approved = plan.with_approval(",".join(approved_ids(plan, variant.kinds)))
    options = CompileOptions(target=args.target, arch=args.arch, seed=args.seed, plan=approved,
                             tuning=tuning, stop_after=Stage.APPLY_PLAN)
    result = session.compile(options)
    return result.module, result


def _export(name: str, executable, dest: Path, args) -> dict:
    """Write <name>.so.gz (and <name>.fatbin.gz for cuda); returns the files and the cuda
    facts. Gzipped: host code and CUDA source shrink about 7x, the carry is what counts."""
    lib = dest / f"{name}.so"
    executable.export_library(str(lib))
    out: dict = {"files": {}}
    if args.target == "cuda":
        from engine.schedule.gpu import cuda_source, nvcc_compile

        source = cuda_source(executable)
        target = _target("cuda", args.arch)
        start = time.perf_counter()
        fatbin = nvcc_compile(source, target, fmt="fatbin")
        out["files"]["fatbin"] = _gzip_bytes(fatbin, dest / f"{name}.fatbin.gz")
        out["cuda"] = {"arch": str(target.arch), "source_sha256": hashlib.sha256(source.encode()).hexdigest(),
                       "source_bytes": len(source), "fatbin_bytes": len(fatbin),
                       "global_kernels": source.count("__global__"),
                       "nvcc_s": round(time.perf_counter() - start, 1),
                       # the loader hands this text to tvm_callback_cuda_compile: the key
                       # under which run_gpu.py finds the fatbin
                       "source_in_lib": source.encode() in lib.read_bytes()}
    out["lib_bytes"] = lib.stat().st_size
    out["files"]["lib"] = _gzip_bytes(lib.read_bytes(), dest / f"{name}.so.gz")
    lib.unlink()
    return out


def _gzip_bytes(data: bytes, path: Path) -> str:
    with gzip.open(path, "wb", compresslevel=6) as f:
        f.write(data)
    return path.name


def _compile_facts(result) -> dict:
    """What our compile did: launches, the approved decisions not applied and why, co-tuning."""
    from engine.parallel.outcome import DecisionResult

    facts: dict = {"launches_planned": result.launches}
    if result.fusion is not None:
        facts["fusion"] = {"applied": result.fusion.applied(), "decisions": len(result.fusion.decisions),
                           "launches_before": result.fusion.launches_before,
                           "launches_after": result.fusion.launches_after,
                           "not_applied": {d.id: f"{d.result.value}: {d.reason}"[:200] for d in result.fusion.decisions
                                           if d.result not in (DecisionResult.APPLIED, DecisionResult.NOT_APPROVED)}}
    if result.cotuned:
        facts["cotuned_decisions"] = len(result.cotuned)
    notes = [n for n in result.notes if not n.startswith("fusion plan:")]
    if notes:
        facts["notes"] = notes[:10]
    return facts


@dataclasses.dataclass
class Seen:
    """What earlier variants of a model were: so that no build is shipped twice."""

    decisions: dict = dataclasses.field(default_factory=dict)  # approved ids -> variant
    builds: dict = dataclasses.field(default_factory=dict)  # (final module hash, weight keys) -> variant


def _pack_variant(name: str, session, plan, target, weights: "WeightStore", seen: Seen, dest: Path, args,
                  store: str) -> dict:
    """Build and export one variant; returns its manifest record (status packed, same_as,
    no decision of this kind, or failed with a one-line error)."""
    from lift import build_weights_as_inputs

    rec: dict = {}
    variant = next((v for v in VARIANTS if v.name == name), None)
    if variant is not None and variant.kinds:
        ids = tuple(approved_ids(plan, variant.kinds))
        if not ids:
            log(f"  {name}: {NO_DECISION}")
            return {"status": NO_DECISION}
        rec["approved"] = list(ids)
        if not variant.cotune and ids in seen.decisions:
            log(f"  {name}: same decisions as {seen.decisions[ids]}")
            return {**rec, "status": "same_as", "same_as": seen.decisions[ids],
                    "reason": "the same decisions as " + seen.decisions[ids]}
        if not variant.cotune:
            seen.decisions[ids] = name
    start = time.perf_counter()
    try:
        if name == STOCK:
            mod, result = _stock_module(session.model), None
        else:
            mod, result = _our_module(session, variant or VARIANTS[0], args, plan, store)
        # the control lifts nothing: tvm.compile's build, weights inside
        built = build_weights_as_inputs(mod, target, 1 << 62 if name == CONTROL else args.lift_min_bytes)
        keys = weights.keys_for(built.weights)
        rec["build_s"] = round(time.perf_counter() - start, 1)
        if result is not None:
            rec.update(_compile_facts(result))
        key = (built.fingerprint, tuple(keys))
        if key in seen.builds:
            log(f"  {name}: the same build as {seen.builds[key]}")
            return {**rec, "status": "same_as", "same_as": seen.builds[key],
                    "reason": f"its final module equals {seen.builds[key]}'s"}
        seen.builds[key] = name
        exported = _export(name, built.executable, dest, args)
    except Exception as err:  # one variant failing must not cost the others
        rec.update(status="failed", error=_one_line(err))
        log(f"  {name}: FAILED {rec['error']}")
        return rec
    rec.update(status="packed", params=keys, weights_embedded=name == CONTROL, kernels=list(built.kernels),
               **exported)
    rec["bytes"] = sum((dest / f).stat().st_size for f in rec["files"].values())
    log(f"  {name}: {rec['bytes'] / MIB:.2f} MiB, {len(keys)} weight parameters, {len(built.kernels)} "
        f"kernels ({rec.get('launches_planned', '-')} launches planned), built in {rec['build_s']} s")
    return rec


def pack_model(spec: str, args, dest: Path) -> dict:
    """Build and export every variant of one model into `dest`; returns its manifest entry."""
    import onnx

    from engine.runtime.measure import onnxruntime_session
    from engine.session import Session

    model = Session(spec, seed=args.seed).model
    entry: dict = {"model": model.name, "spec": spec, "seed": args.seed,
                   "weights_bytes": _weight_bytes(model.proto)}
    regenerated: list[dict] = []
    if entry["weights_bytes"] > args.regen_above_mib * MIB:
        model, regenerated = regenerate_weights(model, args.seed, args.regen_min_elements)
        log(f"  {len(regenerated)} weight tensors regenerated by recipe "
            f"({sum(int(np.prod(e['shape'])) * 4 for e in regenerated) / MIB:.1f} MiB not shipped)")
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bw_pack_") as tmp:
        # The session opens exactly the model shipped (regenerated weights included).
        proto = onnx.ModelProto()
        proto.CopyFrom(model.proto)
        renamed = sanitize_io_names(proto)
        if renamed:
            entry["renamed_io"] = renamed
            log(f"  inputs/outputs renamed for CUDA C: {renamed}")
        path = Path(tmp) / f"{model.name}.onnx"
        onnx.save(proto, str(path))
        session = Session(str(path), seed=args.seed)
        model = session.model
        target = _target(args.target, args.arch)
        weights = WeightStore(regenerated)
        variants: dict[str, dict] = {}
        start = time.perf_counter()
        plan = session.propose(args.target, args.arch).plan if any(v.kinds for v in VARIANTS
                                                                   if v.name in args.variants) else None
        entry["propose_s"] = round(time.perf_counter() - start, 1)
        if plan is not None:
            entry["decisions"] = {k.value: [d.id for d in plan.decisions if d.kind is k
                                            and d.status is not DecisionStatus.REJECTED] for k in DecisionKind}
        seen = Seen()
        for name in args.variants:
            variants[name] = _pack_variant(name, session, plan, target, weights, seen, dest, args, tmp)
        entry["variants"] = variants
        entry["weights"] = weights.refs
        weights.save(dest / "weights.npz")
    files = {"onnx": "model.onnx", "inputs": "inputs.npz", "reference": "reference.npz", "weights": "weights.npz"}
    onnx.save(strip_initializers(model.proto, {e["name"] for e in regenerated}), str(dest / files["onnx"]))
    inputs = model.random_inputs(args.seed)
    np.savez(dest / files["inputs"], **inputs)
    sess = onnxruntime_session(model.proto.SerializeToString(), threads=os.cpu_count() or 1)
    expected = sess.run(None, inputs)
    np.savez(dest / files["reference"], **dict(zip(model.outputs, expected)))
    entry["inputs"] = [{"name": s.name, "shape": list(s.shape), "dtype": s.dtype} for s in model.inputs]
    out_types = {o.name: o.type.tensor_type for o in model.proto.graph.output}
    entry["outputs"] = [{"name": n, "shape": list(a.shape), "dtype": onnx_dtype(out_types[n].elem_type)}
                        for n, a in zip(model.outputs, expected)]
    entry["regenerated_weights"] = regenerated
    entry["dir"] = f"models/{model.name}"
    entry["files"] = files
    entry["bytes"] = dir_size(dest)
    return entry


def _target(name: str, arch: str | None):
    """The target our pipeline builds for (engine.targets' row), used for every variant."""
    from engine.targets import get_target

    return get_target(name).target(arch)


def _parse_list(values: list[str]) -> list[str]:
    return [m for v in values for m in v.split(",") if m]


def _shipped_weight_estimate(spec: str, args) -> int:
    """Bytes of weights the model ships at least once (the rest is regenerated there)."""
    from onnx import numpy_helper

    from engine.session import Session

    proto = Session(spec, seed=args.seed).model.proto
    total = _weight_bytes(proto)
    if total <= args.regen_above_mib * MIB:
        return total * (2 if CONTROL in args.variants else 1)
    return sum(a.nbytes for a in map(numpy_helper.to_array, proto.graph.initializer)
               if not (a.dtype == np.float32 and a.size >= args.regen_min_elements))


def print_sizes(out: Path, limit: int) -> int:
    """Every file of the payload with its size, then the total; returns the total."""
    total = 0
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        size = path.stat().st_size
        total += size
        log(f"  {size / MIB:9.3f} MiB  {path.relative_to(out)}")
    log(f"payload {out}: {total / MIB:.2f} MiB total ({total} bytes), limit {limit / MIB:.0f} MiB")
    return total


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=DEFAULT_MODELS,
                        help="model specs (space or comma separated); default: %(default)s")
    parser.add_argument("--variants", nargs="+", default=list(VARIANT_NAMES),
                        help="which builds, in this order (default: all: %(default)s)")
    parser.add_argument("--out", type=Path, default=HERE / "payload", help="payload folder (default %(default)s)")
    parser.add_argument("--target", default="cuda", choices=["cuda", "llvm"])
    parser.add_argument("--arch", default=None, help="cuda: sm_90 (default; H100/H200 tag, sm_90a)")
    parser.add_argument("--python", default="3.12", help="CPython version of the GPU machine (default %(default)s)")
    parser.add_argument("--wheels", type=Path, default=None,
                        help="wheel cache outside the repo (default /tmp/gpu_wheels)")
    parser.add_argument("--no-runtime", action="store_true", help="do not build the runtime-only TVM package")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cotune-trials", type=int, default=16,
                        help="co-tuning trials per method of the `cotuned` variant (default %(default)s)")
    parser.add_argument("--lift-min-bytes", type=int, default=4096,
                        help="constants this large become weight parameters (default %(default)s)")
    parser.add_argument("--control-below-mib", type=float, default=1.0,
                        help=f"models with fewer weight bytes also get `{CONTROL}` (default %(default)s)")
    parser.add_argument("--regen-above-mib", type=float, default=1.0,
                        help="models with more weight bytes than this get regenerated weights")
    parser.add_argument("--regen-min-elements", type=int, default=4096,
                        help="float initializers at least this large are regenerated")
    parser.add_argument("--limit-mib", type=float, default=64.0, help="carry limit (default %(default)s)")
    parser.add_argument("--margin-mib", type=float, default=1.0,
                        help="kept free under the limit for the scripts travelling alongside")
    args = parser.parse_args(argv)
    if args.target == "cuda" and args.arch is None:
        args.arch = "sm_90"
    models = _parse_list(args.models)
    wanted = _parse_list(args.variants)
    unknown = [v for v in wanted if v not in VARIANT_NAMES]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {', '.join(VARIANT_NAMES)}")
    args.variants = [v for v in VARIANT_NAMES if v in wanted]
    out: Path = args.out
    if out.exists():
        shutil.rmtree(out)
    (out / "models").mkdir(parents=True)
    limit = int(args.limit_mib * MIB)
    budget = int((args.limit_mib - args.margin_mib) * MIB)
    manifest: dict = {"created": time.strftime("%Y-%m-%d %H:%M:%S"), "target": args.target,
                      "arch": args.arch, "seed": args.seed, "limit_bytes": limit, "variants": args.variants,
                      "cotune_trials": args.cotune_trials, "lift_min_bytes": args.lift_min_bytes,
                      "models": [], "left_out": []}
    if not args.no_runtime:
        wheels = args.wheels or Path("/tmp/gpu_wheels")
        tgz = out / f"tvm_runtime_cp{args.python.replace('.', '')}.tgz"
        manifest["runtime"] = build_runtime(args.python, wheels, tgz)
    import regen

    manifest["regen_recipe"] = regen.RECIPE
    all_variants = args.variants
    for spec in models:
        used = dir_size(out)
        log(f"{spec}: packing ({used / MIB:.1f} MiB used of {budget / MIB:.1f})")
        shipped = _shipped_weight_estimate(spec, args)
        if used + shipped > budget:
            reason = (f"it would ship {shipped / MIB:.1f} MiB of weights; "
                      f"{(budget - used) / MIB:.1f} MiB of the {args.limit_mib:.0f} MiB carry left")
            log(f"  left out: {reason}")
            manifest["left_out"].append({"model": spec, "reason": reason, "weights_bytes": shipped})
            continue
        from engine.session import Session

        small = _weight_bytes(Session(spec, seed=args.seed).model.proto) < args.control_below_mib * MIB
        args.variants = [v for v in all_variants if v != CONTROL or small]
        dest = out / "models" / Path(spec.split(":", 1)[-1]).stem
        start = time.perf_counter()
        try:
            entry = pack_model(spec, args, dest)
        except Exception as err:  # keep packing the others; say why this one is missing
            shutil.rmtree(dest, ignore_errors=True)
            reason = f"pack failed: {_one_line(err)}"
            log(f"  left out: {reason}")
            manifest["left_out"].append({"model": spec, "reason": reason})
            continue
        entry["pack_s"] = round(time.perf_counter() - start, 1)
        if dir_size(out) > budget:
            shutil.rmtree(dest)
            reason = f"packed size {entry['bytes'] / MIB:.1f} MiB exceeds the space left"
            log(f"  left out: {reason}")
            manifest["left_out"].append({"model": spec, "reason": reason, "bytes": entry["bytes"]})
            continue
        manifest["models"].append(entry)
        packed = [n for n, v in entry["variants"].items() if v["status"] == "packed"]
        log(f"  {entry['model']}: {entry['bytes'] / MIB:.2f} MiB, packed {', '.join(packed)} "
            f"in {entry['pack_s']} s")
    args.variants = all_variants
    manifest_path = out / "manifest.json"
    manifest_path.write_text(json.dumps(manifest, indent=1))
    manifest["total_bytes"] = dir_size(out)
    manifest_path.write_text(json.dumps(manifest, indent=1))
    total = print_sizes(out, limit)
    if manifest["left_out"]:
        log("left out: " + "; ".join(f"{m['model']} ({m['reason']})" for m in manifest["left_out"]))
    if total > limit:
        manifest_path.unlink()
        print(f"pack: refused: the payload is {total / MIB:.2f} MiB, over the {args.limit_mib:.0f} MiB carry "
              f"limit (manifest removed)", file=sys.stderr)
        return 1
    if not manifest["models"]:
        print("pack: no model packed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
