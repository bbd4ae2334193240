"""One-call GPU benchmark of a packed payload: every variant of every model, stock TVM, torch
eager and torch.compile, interleaved (runs THERE: Python 3.12, torch, onnx, onnxruntime, numpy,
no TVM install, no network). Made by bench/gpu/pack.py; bench/gpu/table.py renders the result.

    python bench/gpu/run_gpu.py --payload bench/gpu/payload --out $OUT/results.json
    python bench/gpu/run_gpu.py --payload /tmp/p_llvm --device cpu --out /tmp/r.json   # dry run here
    python bench/gpu/run_gpu.py --payload bench/gpu/payload --check-payload   # here, before the GPU call

Per model in payload/manifest.json:
  * every packed library (base, parallel, block, both, cotuned, tvm, base-embedded) on the
    runtime-only TVM from the payload (`tvm.runtime.load_module` + `VirtualMachine`), fed the
    model's inputs and then its weights (uploaded once per model, shared by the variants);
  * the same ONNX graph and weights in torch eager (bench/gpu/onnx_torch.py) and
    `torch.compile` (compile time recorded; SIGALRM-bounded);
  * each one's outputs checked against the pack's onnxruntime reference (max abs/rel error,
    ok), launches counted (ours: VM instrument over the build's kernels; torch: profiler);
  * then all of them timed in interleaved rounds (each round: every candidate in turn, a
    couple of untimed calls, then its timed calls, each one device-synchronised, wall clock)
    so that drift hits all alike: median, p10/p90 and min per candidate;
  * per-kernel times of our builds (VM instrument, device synchronised around each kernel
    call) when time is left.
A failing variant is recorded with its one-line error and the others go on. Results are
rewritten after every model. --budget-s (default 450 s) bounds the whole run: models that
no longer fit are recorded as skipped, torch.compile gets what is left of --compile-budget-s
and of the run, and the timing rounds stop early (after at least one) near the deadline.
torch is optional with --device cpu (the dry run here): its peers are then recorded as skipped.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import gzip
import hashlib
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

_REEXEC = "BLOCKWISE_GPU_REEXEC"
EAGER, COMPILED = "torch-eager", "torch-compile"


def log(msg: str) -> None:
    print(f"[run_gpu] {msg}", flush=True)


def one_line(err: BaseException) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    return f"{type(err).__name__}: {lines[0][:300] if lines else ''}"


# --- environment: libcudart for TVM's CUDA plug-in, runtime-only TVM ----------------------------


def cudart_dirs() -> list[str]:
    """Folders holding libcudart.so.13: torch's nvidia packages first, then a CUDA toolkit."""
    found: list[str] = []
    roots = []
    for entry in sys.path:
        if entry and os.path.isdir(os.path.join(entry, "nvidia")):
            roots.append(os.path.join(entry, "nvidia"))
        if entry and os.path.isdir(os.path.join(entry, "torch", "lib")):
            roots.append(os.path.join(entry, "torch", "lib"))
    system = ["/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/lib/x86_64-linux-gnu"]
    patterns = [os.path.join(r, "**", "libcudart.so.13*") for r in roots]
    patterns += [os.path.join(r, "libcudart.so.13*") for r in system]
    for pattern in patterns:
        for path in sorted(glob.glob(pattern, recursive=True)):
            folder = os.path.dirname(path)
            if folder not in found:
                found.append(folder)
    return found


def ensure_cudart_on_loader_path(argv: list[str]) -> None:
    """Re-exec this script once with LD_LIBRARY_PATH naming libcudart.so.13's folder."""
    dirs = cudart_dirs()
    if not dirs:
        log("WARNING: no libcudart.so.13 found (torch nvidia packages, /usr/local/cuda); TVM's CUDA "
            "plug-in may not load")
        return
    current = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    if dirs[0] in current or os.environ.get(_REEXEC) == "1":
        return
    env = dict(os.environ, LD_LIBRARY_PATH=":".join([dirs[0]] + current), **{_REEXEC: "1"})
    log(f"re-exec with LD_LIBRARY_PATH+={dirs[0]}")
    os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + argv, env)


def unpack_runtime(payload: Path, manifest: dict, cache: Path | None) -> Path:
    """Unpack tvm_runtime_cpXY.tgz once (keyed by its sha256); returns the import folder."""
    info = manifest.get("runtime")
    if not info:
        raise SystemExit("payload has no runtime-only TVM package (packed with --no-runtime)")
    want = f"{sys.version_info.major}.{sys.version_info.minor}"
    if info["python"] != want:
        log(f"WARNING: runtime package built for Python {info['python']}, running {want}")
    tgz = payload / info["file"]
    digest = hashlib.sha256(tgz.read_bytes()).hexdigest()[:16]
    base = (cache or Path(os.environ.get("TMPDIR", "/tmp"))) / f"blockwise_tvm_runtime_{digest}"
    folder = base / "tvm_runtime"
    if not (folder / "tvm" / "__init__.py").is_file():
        tmp = base.with_name(base.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        with tarfile.open(tgz) as tar:
            tar.extractall(tmp)
        shutil.rmtree(base, ignore_errors=True)
        tmp.rename(base)
    return folder


def import_tvm(runtime_folder: Path):
    sys.path.insert(0, str(runtime_folder))
    if (runtime_folder / "_fallback").is_dir():  # typing_extensions, only if none installed
        sys.path.append(str(runtime_folder / "_fallback"))
    import tvm  # noqa: PLC0415

    location = Path(tvm.__file__).resolve().parent
    if runtime_folder.resolve() not in location.parents:
        log(f"WARNING: imported tvm from {location}, not from the payload runtime")
    return tvm


class FatbinCache:
    """`tvm_callback_cuda_compile`: the CUDA loader calls it with each library's source;
    answer with the fatbin pack.py compiled for that source, else run nvcc here."""

    def __init__(self, arch: str):
        self.arch = arch
        self.by_sha: dict[str, bytes] = {}
        self.hits = 0
        self.compiled: list[dict] = []

    def add(self, source_sha256: str, path: Path) -> None:
        data = path.read_bytes()
        self.by_sha[source_sha256] = gzip.decompress(data) if path.suffix == ".gz" else data

    def __call__(self, code, *rest):
        text = code if isinstance(code, str) else bytes(code).decode()
        sha = hashlib.sha256(text.encode()).hexdigest()
        if sha in self.by_sha:
            self.hits += 1
            return self.by_sha[sha]
        start = time.perf_counter()
        binary = nvcc_fatbin(text, self.arch)
        self.compiled.append({"sha256": sha, "seconds": round(time.perf_counter() - start, 2)})
        return binary


def nvcc_fatbin(code: str, arch: str) -> bytes:
    import tempfile  # noqa: PLC0415

    suffix = arch.replace("sm_", "")
    with tempfile.TemporaryDirectory(prefix="bw_nvcc_") as tmp:
        src, out = os.path.join(tmp, "k.cu"), os.path.join(tmp, "k.fatbin")
        Path(src).write_text(code)
        cmd = ["nvcc", "--fatbin", "-O3", "-gencode", f"arch=compute_{suffix},code=sm_{suffix}", "-o", out, src]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"nvcc failed: {proc.stderr[-2000:]}")
        return Path(out).read_bytes()


# --- measuring ----------------------------------------------------------------------------------


def stats(samples: list[float]) -> dict:
    """Median, p10/p90, min of wall-clock samples (ms); spread = (p90 - p10) / median."""
    xs = sorted(samples)

    def pct(q: float) -> float:
        return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]

    median = statistics.median(xs)
    return {"median_ms": median, "p10_ms": pct(0.1), "p90_ms": pct(0.9), "min_ms": xs[0],
            "spread": (pct(0.9) - pct(0.1)) / median if median else None, "samples": len(xs)}


def compare(actual: list, expected: list) -> dict:
    import numpy as np  # noqa: PLC0415

    worst_abs, worst_rel, shapes_ok = 0.0, 0.0, True
    for got, want in zip(actual, expected):
        got = np.asarray(got)
        if got.shape != want.shape:
            shapes_ok = False
            continue
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        worst_abs = max(worst_abs, float(diff.max(initial=0.0)))
        worst_rel = max(worst_rel, float((diff / (np.abs(want) + 1e-6)).max(initial=0.0)))
    ok = shapes_ok and len(actual) == len(expected) and all(
        np.allclose(np.asarray(g), w, rtol=1e-3, atol=1e-4) for g, w in zip(actual, expected))
    return {"max_abs_err": worst_abs, "max_rel_err": worst_rel, "ok": bool(ok)}


@dataclass
class Candidate:
    """One thing timed in the rounds: `call` runs one inference (asynchronously on a GPU),
    `sync` waits for the device."""

    name: str
    call: Callable[[], object]
    sync: Callable[[], None]
    samples: list[float] = field(default_factory=list)
    error: str = ""


def time_interleaved(cands: list[Candidate], rounds: int, per_round: int, warmup: int, deadline: float) -> int:
    """Rounds of: for each candidate, 2 untimed calls then `per_round` timed, synchronised
    calls. Stops early (after one full round) past `deadline`; a candidate that raises is
    dropped with its error. Each round starts one candidate later than the previous one.
    Returns the rounds done."""
    if not cands:
        return 0
    for c in cands:
        try:
            for _ in range(warmup):
                c.call()
            c.sync()
        except Exception as err:
            c.error = one_line(err)
    done = 0
    for r in range(rounds):
        for c in cands[r % len(cands):] + cands[:r % len(cands)]:
            if c.error:
                continue
            try:
                c.call()
                c.call()
                c.sync()
                for _ in range(per_round):
                    start = time.perf_counter()
                    c.call()
                    c.sync()
                    c.samples.append((time.perf_counter() - start) * 1e3)
            except Exception as err:
                c.error = one_line(err)
        done += 1
        if time.perf_counter() > deadline:
            break
    return done


class Deadline(Exception):
    pass


def run_with_alarm(seconds: float, fn):
    """Run fn() with a SIGALRM deadline (main thread only); raises Deadline."""
    if seconds <= 0:
        raise Deadline("no time left")

    def on_alarm(signum, frame):
        raise Deadline(f"over {seconds:.0f} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def kernel_calls(vm, run, dev, kernels: set[str], rounds: int, timed: bool) -> dict:
    """Calls of the build's kernels per inference (VM instrument); with `timed`, per-kernel
    times too, the device synchronised around every kernel call."""
    from tvm.runtime.vm import VMInstrumentReturnKind  # noqa: PLC0415

    per_call: dict[int, list[float]] = {}
    names: dict[int, str] = {}
    state = {"k": 0, "t": 0.0}

    def instrument(func, symbol, before, ret, *args):
        symbol = str(symbol)
        if symbol in kernels:
            if before:
                if timed:
                    dev.sync()
                state["t"] = time.perf_counter()
            else:
                if timed:
                    dev.sync()
                k = state["k"]
                per_call.setdefault(k, []).append((time.perf_counter() - state["t"]) * 1e3)
                names[k] = symbol
                state["k"] += 1
        return VMInstrumentReturnKind.NO_OP

    vm.set_instrument(instrument)
    try:
        counts = []
        for _ in range(rounds):
            state["k"] = 0
            run()
            counts.append(state["k"])
    finally:
        vm.set_instrument(None)
    out: dict = {"launches": counts[-1] if counts else 0}
    if timed and per_call:
        by_kernel: dict[str, float] = {}
        for k, v in per_call.items():
            by_kernel[names[k]] = by_kernel.get(names[k], 0.0) + statistics.median(v)
        out["kernel_sum_ms"] = sum(by_kernel.values())
        out["top_kernels"] = [{"kernel": n, "ms": round(ms, 4)}
                              for n, ms in sorted(by_kernel.items(), key=lambda kv: -kv[1])[:10]]
    return out


def torch_launches(torch, fn) -> int | None:
    """CUDA kernels launched by one call of fn, from torch.profiler (None if it fails)."""
    try:
        from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        count = 0
        for evt in prof.events():
            if str(getattr(evt, "device_type", "")).endswith("CUDA") and not evt.name.startswith(("Memcpy", "Memset")):
                count += 1
        return count or None
    except Exception as err:  # profiler/CUPTI missing: not essential
        log(f"  torch.profiler failed: {one_line(err)[:200]}")
        return None


# --- one model ----------------------------------------------------------------------------------


def output_list(out) -> list:
    return list(out) if isinstance(out, (list, tuple)) or type(out).__name__ in ("Array", "Tuple") else [out]


def model_weights(entry: dict, folder: Path, proto) -> dict:
    """key -> numpy array: weights.npz for the shipped ones, the restored initializers of
    `proto` for the regenerated ones (checked against the pack's sha256)."""
    import numpy as np  # noqa: PLC0415
    from onnx import numpy_helper  # noqa: PLC0415

    from regen import sha256_of  # noqa: PLC0415

    initializers = {i.name: i for i in proto.graph.initializer}
    out = {}
    with np.load(folder / entry["files"]["weights"]) as shipped:
        for key, ref in entry["weights"].items():
            array = shipped[ref["npz"]] if "npz" in ref else numpy_helper.to_array(initializers[ref["regen"]])
            if sha256_of(array) != ref["sha256"]:
                raise RuntimeError(f"weight {key} differs from the pack's (sha256)")
            out[key] = array
    return out


class ModelRun:
    """Everything measured for one model; `rec` is its JSON record."""

    def __init__(self, entry: dict, payload: Path, args, tvm, torch, fatbins, deadline: float, later: float = 0.0):
        self.entry, self.args, self.tvm, self.torch, self.fatbins = entry, args, tvm, torch, fatbins
        self.folder = payload / entry["dir"]
        self.deadline = deadline
        self.later = later  # seconds kept for the models after this one (torch.compile may not take them)
        self.rec: dict = {"model": entry["model"], "spec": entry["spec"], "status": "running", "notes": [],
                          "variants": {}}
        self.cands: list[Candidate] = []
        self.vms: dict[str, object] = {}
        self.scratch = Path(tempfile.mkdtemp(prefix="bw_libs_"))  # removed by close()

    def close(self) -> None:
        self.cands, self.vms = [], {}
        shutil.rmtree(self.scratch, ignore_errors=True)

    def unzipped(self, path: Path) -> Path:
        """A gzipped library, decompressed into a scratch folder (libraries load from files)."""
        if path.suffix != ".gz":
            return path
        out = self.scratch / path.stem
        out.write_bytes(gzip.decompress(path.read_bytes()))
        return out

    def left(self) -> float:
        return self.deadline - time.perf_counter()

    def run(self) -> dict:
        import numpy as np  # noqa: PLC0415
        import onnx  # noqa: PLC0415
        import onnxruntime as ort  # noqa: PLC0415

        from regen import restore_initializers  # noqa: PLC0415

        start = time.perf_counter()
        entry, files, rec = self.entry, self.entry["files"], self.rec
        proto = onnx.load(str(self.folder / files["onnx"]))
        bad = restore_initializers(proto, entry.get("regenerated_weights", []))
        rec["regenerated_weights"] = len(entry.get("regenerated_weights", []))
        rec["regenerated_weights_exact"] = not bad
        if bad:
            rec["notes"].append(f"{len(bad)} regenerated weights differ from pack's (numpy draws differently)")
        with np.load(self.folder / files["inputs"]) as z:
            self.inputs = {spec["name"]: z[spec["name"]] for spec in entry["inputs"]}
        with np.load(self.folder / files["reference"]) as z:
            self.reference = [z[o["name"]] for o in entry["outputs"]]
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        sess = ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        rec["onnxruntime_vs_pack_reference"] = compare(sess.run(None, self.inputs), self.reference)
        del sess
        weights = model_weights(entry, self.folder, proto)
        self.dev = self.tvm.cuda(0) if self.args.device == "cuda" else self.tvm.cpu(0)
        self.dev_weights = {k: self.tvm.runtime.tensor(a, self.dev) for k, a in weights.items()}
        self.dev_inputs = [self.tvm.runtime.tensor(self.inputs[s["name"]], self.dev) for s in entry["inputs"]]
        for name, v in entry["variants"].items():
            self.setup_ours(name, v)
        self.setup_torch(proto)
        rec["order"] = [c.name for c in self.cands]
        budget_end = min(self.deadline - self.args.reserve_s, time.perf_counter() + self.args.timing_budget_s)
        rounds = time_interleaved(self.cands, self.args.rounds, max(1, self.args.runs // self.args.rounds),
                                  self.args.warmup, budget_end)
        rec["rounds"] = rounds
        for c in self.cands:
            out = rec["variants"][c.name]
            if c.error:
                out.update(status="failed", error=c.error)
            elif c.samples:
                out.update(status="measured", **stats(c.samples))
        self.profile_ours()
        rec["seconds"] = round(time.perf_counter() - start, 1)
        rec["status"] = "done"
        return rec

    def setup_ours(self, name: str, v: dict) -> None:
        out = self.rec["variants"].setdefault(name, {})
        for key in ("launches_planned", "approved", "fusion", "cotuned_decisions"):
            if key in v:
                out[key] = v[key]
        if v["status"] != "packed":  # not built here: the pack said why
            out["status"] = "pack failed" if v["status"] == "failed" else v["status"]
            for key in ("same_as", "reason", "error"):
                if key in v:
                    out[key] = v[key]
            return
        if self.left() < self.args.reserve_s:
            out.update(status="skipped", reason="run budget exhausted")
            return
        try:
            if self.fatbins is not None and "fatbin" in v["files"]:
                self.fatbins.add(v["cuda"]["source_sha256"], self.folder / v["files"]["fatbin"])
            hits, compiled = (self.fatbins.hits, len(self.fatbins.compiled)) if self.fatbins else (0, 0)
            start = time.perf_counter()
            lib = self.tvm.runtime.load_module(str(self.unzipped(self.folder / v["files"]["lib"])))
            vm = self.tvm.runtime.vm.VirtualMachine(lib, self.dev)
            main = vm["main"]
            args = self.dev_inputs + [self.dev_weights[k] for k in v["params"]]
            got = output_list(main(*args))
            self.dev.sync()
            out["load_s"] = round(time.perf_counter() - start, 3)
            if self.fatbins is not None:
                out["cuda_binary"] = ("fatbin from pack" if self.fatbins.hits > hits else
                                      "nvcc at load" if len(self.fatbins.compiled) > compiled else "unknown")
            out.update(compare([g.numpy() for g in got], self.reference))
            out["weights_embedded"] = v.get("weights_embedded", False)
            # a closure over the inputs and weights: one FFI call per inference, whatever the
            # number of weight parameters (the VM still checks each one, as it would anyway)
            vm.save_function("main", "main_bound", *args)
            bound = vm["main_bound"]
            if v.get("kernels"):
                out.update(kernel_calls(vm, lambda: (bound(), self.dev.sync()), self.dev, set(v["kernels"]),
                                        rounds=1, timed=False))
            self.vms[name] = (vm, bound, set(v.get("kernels") or ()))
            self.cands.append(Candidate(name, bound, self.dev.sync))
        except Exception as err:
            out.update(status="failed", error=one_line(err))
            log(f"  {name}: FAILED {out['error']}")

    def setup_torch(self, proto) -> None:
        variants, args, torch = self.rec["variants"], self.args, self.torch
        if torch is None:
            for name in (EAGER, COMPILED):
                variants[name] = {"status": "skipped", "reason": "torch not installed"}
            return
        from onnx_torch import OnnxTorch  # noqa: PLC0415

        tdev = torch.device(args.device)
        sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
        variants[EAGER] = out = {}
        try:
            module = OnnxTorch(proto).to(tdev).eval()
            targs = [torch.from_numpy(self.inputs[n]).to(tdev) for n in module.input_names]

            def eager():
                with torch.inference_mode():
                    return module(*targs)

            out.update(compare([g.float().cpu().numpy() for g in eager()], self.reference))
            if args.device == "cuda" and not args.no_torch_profile:
                out["launches"] = torch_launches(torch, eager)
            self.cands.append(Candidate(EAGER, eager, sync))
        except Exception as err:
            out.update(status="failed", error=one_line(err))
            return
        variants[COMPILED] = out = {}
        left = min(args.compile_budget_s, self.left() - self.later - args.reserve_s - 10)
        if args.skip_compile:
            out.update(status="skipped", reason="--skip-compile")
            return
        if left < 15:
            out.update(status="skipped", reason=f"time budget: {max(left, 0):.0f} s left for torch.compile")
            return
        torch._dynamo.reset()
        compiled = torch.compile(module, mode=args.compile_mode)

        def call():
            with torch.inference_mode():
                return compiled(*targs)

        def first():
            result = call()
            sync()
            return result

        try:
            start = time.perf_counter()
            got = run_with_alarm(left, first)
            out["compile_s"] = round(time.perf_counter() - start, 2)
            out["mode"] = args.compile_mode
            out.update(compare([g.float().cpu().numpy() for g in got], self.reference))
            if args.device == "cuda" and not args.no_torch_profile:
                out["launches"] = torch_launches(torch, call)
            self.cands.append(Candidate(COMPILED, call, sync))
        except Deadline as err:
            out.update(status="skipped", reason=f"compile did not finish in its budget ({err})")
        except Exception as err:
            out.update(status="failed", error=one_line(err))

    def profile_ours(self) -> None:
        if self.args.kernel_rounds <= 0:
            return
        for name, (vm, bound, kernels) in self.vms.items():
            if not kernels or self.left() < self.args.reserve_s:
                continue
            try:
                prof = kernel_calls(vm, lambda: (bound(), self.dev.sync()), self.dev, kernels,
                                    rounds=self.args.kernel_rounds, timed=True)
                self.rec["variants"][name].update({k: v for k, v in prof.items() if k != "launches"})
            except Exception as err:
                self.rec["notes"].append(f"{name}: kernel profile failed: {one_line(err)[:200]}")


def check_payload(payload: Path, manifest: dict) -> list[str]:
    """What can be checked without TVM, torch or a GPU (`--check-payload`, here before the
    one GPU call): every file present and readable, every weight restored with the pack's
    sha256, onnxruntime on the shipped model equal to the pack's reference. Returns problems."""
    import numpy as np  # noqa: PLC0415
    import onnx  # noqa: PLC0415
    import onnxruntime as ort  # noqa: PLC0415

    from regen import restore_initializers  # noqa: PLC0415

    problems = []
    for entry in manifest["models"]:
        folder, files = payload / entry["dir"], entry["files"]
        try:
            for name, v in entry["variants"].items():
                for f in v.get("files", {}).values():
                    gzip.decompress((folder / f).read_bytes())
            proto = onnx.load(str(folder / files["onnx"]))
            bad = restore_initializers(proto, entry.get("regenerated_weights", []))
            if bad:
                problems.append(f"{entry['model']}: {len(bad)} regenerated weights differ")
            model_weights(entry, folder, proto)
            with np.load(folder / files["inputs"]) as z:
                inputs = {spec["name"]: z[spec["name"]] for spec in entry["inputs"]}
            with np.load(folder / files["reference"]) as z:
                reference = [z[o["name"]] for o in entry["outputs"]]
            got = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, inputs)
            check = compare(got, reference)
            if not check["ok"]:
                problems.append(f"{entry['model']}: onnxruntime differs from the reference ({check['max_abs_err']:.1e})")
            packed = [n for n, v in entry["variants"].items() if v["status"] == "packed"]
            log(f"{entry['model']}: {len(packed)} libraries, {len(entry['weights'])} weights, "
                f"onnxruntime vs reference {check['max_abs_err']:.1e}")
        except Exception as err:
            problems.append(f"{entry['model']}: {one_line(err)}")
    return problems


def environment(args, tvm, torch) -> dict:
    import numpy as np  # noqa: PLC0415
    import onnx  # noqa: PLC0415
    import onnxruntime as ort  # noqa: PLC0415

    from tvm import base  # noqa: PLC0415

    env = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
           "host": platform.node(), "python": platform.python_version(), "device": args.device,
           "torch": torch.__version__ if torch else None, "torch_cuda": torch.version.cuda if torch else None,
           "numpy": np.__version__, "onnx": onnx.__version__, "onnxruntime": ort.__version__,
           "tvm": getattr(tvm, "__version__", "?"), "tvm_runtime_only": bool(getattr(base, "_RUNTIME_ONLY", False)),
           "tvm_cuda_compile_mode": os.environ.get("TVM_CUDA_COMPILE_MODE")}
    if args.device == "cuda":
        env["gpu"] = torch.cuda.get_device_name(0)
        env["gpu_capability"] = "sm_%d%d" % torch.cuda.get_device_capability(0)
        env["cudnn"] = torch.backends.cudnn.version()
        env["cudnn_benchmark"] = torch.backends.cudnn.benchmark
        env["tf32_matmul"] = torch.backends.cuda.matmul.allow_tf32
        env["tf32_cudnn"] = torch.backends.cudnn.allow_tf32
        try:
            env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                           capture_output=True, text=True, timeout=20).stdout.strip()
        except Exception:
            env["driver"] = None
    else:
        env["cpu"] = platform.processor() or platform.machine()
        env["threads"] = torch.get_num_threads() if torch else None
    return env


def import_torch(device: str):
    """torch, or None on the CPU dry run without it (its peers are then skipped)."""
    try:
        import torch  # noqa: PLC0415
    except ImportError:
        if device == "cuda":
            raise SystemExit("torch is needed on the GPU machine") from None
        return None
    return torch


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--payload", type=Path, default=HERE / "payload")
    parser.add_argument("--out", type=Path, default=Path("results.json"))
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--models", nargs="+", default=None, help="subset of the manifest's models (names)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default %(default)s)")
    parser.add_argument("--runs", type=int, default=50, help="timed calls per candidate in all (default %(default)s)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed calls per candidate first (default %(default)s)")
    parser.add_argument("--kernel-rounds", type=int, default=3, help="per-kernel profile runs (0: none)")
    parser.add_argument("--no-torch-profile", action="store_true")
    parser.add_argument("--skip-compile", action="store_true", help="skip torch.compile")
    parser.add_argument("--compile-mode", default="default")
    parser.add_argument("--budget-s", type=float, default=450.0, help="whole run (default %(default)s)")
    parser.add_argument("--compile-budget-s", type=float, default=90.0,
                        help="torch.compile's first call, per model (default %(default)s)")
    parser.add_argument("--timing-budget-s", type=float, default=60.0,
                        help="the timing rounds, per model (default %(default)s)")
    parser.add_argument("--model-floor-s", type=float, default=20.0,
                        help="kept per later model when torch.compile's budget is set (default %(default)s)")
    parser.add_argument("--reserve-s", type=float, default=10.0,
                        help="kept before the deadline to finish and write (default %(default)s)")
    parser.add_argument("--tf32", action="store_true", help="allow TF32 in torch (default: strict fp32 like ours)")
    parser.add_argument("--no-cudnn-benchmark", action="store_true")
    parser.add_argument("--check-payload", action="store_true",
                        help="only check the payload (no TVM, torch or GPU needed): files, weights, reference")
    parser.add_argument("--runtime-cache", type=Path, default=None, help="where to unpack the TVM runtime")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    deadline = started + args.budget_s
    manifest_path = args.payload / "manifest.json"
    if not manifest_path.is_file():
        raise SystemExit(f"{manifest_path}: no manifest (not packed, or refused by pack.py)")
    manifest = json.loads(manifest_path.read_text())
    if args.check_payload:
        problems = check_payload(args.payload, manifest)
        for line in problems:
            log("PROBLEM " + line)
        log(f"payload {'ok' if not problems else 'NOT ok'}: {len(manifest['models'])} models")
        return 1 if problems else 0
    if args.device == "cuda":
        ensure_cudart_on_loader_path(argv)
        os.environ.setdefault("TVM_CUDA_COMPILE_MODE", "nvcc")  # NVRTC needs cuda-bindings
    if args.device == "cuda" and manifest.get("target") != "cuda":
        raise SystemExit(f"payload was packed for {manifest.get('target')}; use --device cpu")
    if args.device == "cpu" and manifest.get("target") != "llvm":
        raise SystemExit("--device cpu needs a payload packed with --target llvm")

    torch = import_torch(args.device)  # before tvm: loads the CUDA runtime libraries
    if args.device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("torch sees no CUDA device")
        torch.backends.cuda.matmul.allow_tf32 = args.tf32
        torch.backends.cudnn.allow_tf32 = args.tf32
        torch.backends.cudnn.benchmark = not args.no_cudnn_benchmark
    folder = unpack_runtime(args.payload, manifest, args.runtime_cache)
    tvm = import_tvm(folder)
    import tvm.runtime.vm  # noqa: PLC0415,F401

    fatbins = None
    if args.device == "cuda":
        import tvm_ffi  # noqa: PLC0415

        arches = [v["cuda"]["arch"] for m in manifest["models"] for v in m["variants"].values() if "cuda" in v]
        fatbins = FatbinCache(arches[0] if arches else "sm_90a")
        tvm_ffi.register_global_func("tvm_callback_cuda_compile", lambda code, *rest: fatbins(code, *rest),
                                     override=True)
        if not tvm.runtime.enabled("cuda"):
            raise SystemExit("TVM runtime: cuda not enabled (libtvm_runtime_cuda.so failed to load? "
                             "LD_LIBRARY_PATH=" + os.environ.get("LD_LIBRARY_PATH", "") + ")")
    settings = {k: getattr(args, k) for k in ("rounds", "runs", "warmup", "kernel_rounds", "skip_compile",
                                               "compile_mode", "budget_s", "compile_budget_s", "timing_budget_s",
                                               "model_floor_s", "reserve_s", "tf32")}
    results = {"environment": environment(args, tvm, torch), "settings": settings, "payload": {
        "created": manifest.get("created"), "target": manifest.get("target"), "arch": manifest.get("arch"),
        "variants": manifest.get("variants"), "cotune_trials": manifest.get("cotune_trials"),
        "left_out": manifest.get("left_out", [])}, "models": []}
    env = results["environment"]
    log(f"{env.get('gpu', env.get('cpu'))}, torch {env['torch']}, tvm {env['tvm']} "
        f"(runtime-only: {env['tvm_runtime_only']}), budget {args.budget_s:.0f} s")
    wanted = set(args.models) if args.models else None
    args.out.parent.mkdir(parents=True, exist_ok=True)

    def write() -> None:
        if fatbins is not None:
            results["cuda_binaries"] = {"fatbins_from_pack_used": fatbins.hits, "compiled_at_load": fatbins.compiled}
        results["seconds"] = round(time.perf_counter() - started, 1)
        args.out.write_text(json.dumps(results, indent=1))

    todo = [e for e in manifest["models"] if not wanted or e["model"] in wanted or e["spec"] in wanted]
    for k, entry in enumerate(todo):
        if deadline - time.perf_counter() < 3 * args.reserve_s:
            results["models"].append({"model": entry["model"], "spec": entry["spec"], "status": "skipped",
                                      "reason": "run budget exhausted"})
            log(f"{entry['model']}: skipped (run budget exhausted)")
            continue
        log(f"{entry['model']} ...")
        later = args.model_floor_s * (len(todo) - k - 1)
        run = ModelRun(entry, args.payload, args, tvm, torch, fatbins, deadline, later)
        try:
            rec = run.run()
        except Exception as err:
            import traceback  # noqa: PLC0415

            rec = run.rec
            rec.update(status="failed", error=one_line(err), traceback=traceback.format_exc()[-2000:])
        results["models"].append(rec)
        for line in summary_lines(rec):
            log("  " + line)
        write()
        run.close()  # its libraries and device memory go before the next model
    write()
    log(f"wrote {args.out} ({results['seconds']} s)")
    bad = [f"{r['model']}/{n}" for r in results["models"] for n, v in r.get("variants", {}).items()
           if v.get("ok") is False or v.get("status") == "failed"]
    bad += [r["model"] for r in results["models"] if r.get("status") == "failed"]
    if bad:
        log(f"FAILED or mismatched: {', '.join(bad)}")
    return 1 if bad else 0


def summary_lines(rec: dict) -> list[str]:
    if rec.get("status") != "done":
        return [f"{rec['model']}: {rec.get('status', '?').upper()} {rec.get('error', rec.get('reason', ''))[:200]}"]
    lines = []
    for name, v in rec["variants"].items():
        if "median_ms" in v:
            check = "ok" if v.get("ok") else f"MISMATCH (max abs err {v.get('max_abs_err', float('nan')):.1e})"
            lines.append(f"{name:>14}: {v['median_ms']:.4f} ms (p10-p90 {v['p10_ms']:.4f}-{v['p90_ms']:.4f}), "
                         f"{v.get('launches', '?')} launches, {check}")
        else:
            why = v.get("same_as") or v.get("error") or v.get("reason") or ""
            lines.append(f"{name:>14}: {v.get('status')} {why}"[:220])
    return [f"{rec['model']} ({rec['seconds']} s, {rec.get('rounds')} rounds):"] + lines


if __name__ == "__main__":
    raise SystemExit(main())
