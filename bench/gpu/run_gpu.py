"""GPU benchmark of a packed payload (runs THERE: Python 3.12, torch, onnx, onnxruntime, numpy,
no TVM install, no network). Made by bench/gpu/pack.py.

    python bench/gpu/run_gpu.py --payload bench/gpu/payload --out $OUT/results.json
    python bench/gpu/run_gpu.py --payload /tmp/p_llvm --device cpu --out /tmp/r.json   # dry run here

Per model in payload/manifest.json:
  * our library (lib.so) on the runtime-only TVM from the payload
    (`tvm.runtime.load_module` + `tvm.runtime.vm.VirtualMachine(lib, tvm.cuda())`),
  * the same ONNX graph and weights in torch eager (bench/gpu/onnx_torch.py) and
    `torch.compile` (mode default, compile time recorded),
each verified against onnxruntime (CPU) on the same inputs and timed as the median of
--runs device-synchronised runs after --warmup runs. Our per-kernel times come from the
VM instrument (device synchronised around every kernel call), which also counts our
launches; torch's launches are counted with torch.profiler when it works.

Results go to --out as JSON after every model (a time-out still leaves what was done).
Time: --budget-s for the whole run (default 540 s), --model-budget-s per model; past it,
torch.compile (the slow part) is skipped with the reason recorded.
"""

from __future__ import annotations

import argparse
import datetime
import glob
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
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

_REEXEC = "BLOCKWISE_GPU_REEXEC"


def log(msg: str) -> None:
    print(f"[run_gpu] {msg}", flush=True)


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
        self.by_sha[source_sha256] = path.read_bytes()

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


def time_fn(fn, sync, runs: int, warmup: int) -> dict:
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - start) * 1e3)
    times.sort()
    return {"median_ms": statistics.median(times), "min_ms": times[0],
            "p90_ms": times[min(len(times) - 1, int(0.9 * len(times)))], "runs": runs, "warmup": warmup}


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


def tvm_kernel_profile(tvm, vm, run, dev, kernels: set[str], rounds: int) -> dict:
    """Per-kernel times with the VM instrument, synchronising around every call."""
    from tvm.runtime.vm import VMInstrumentReturnKind  # noqa: PLC0415

    per_call: dict[int, list[float]] = {}
    names: dict[int, str] = {}
    state = {"k": 0, "t": 0.0}

    seen: dict[str, int] = {}

    def instrument(func, symbol, before, ret, *args):
        symbol = str(symbol)
        if before:
            seen[symbol] = seen.get(symbol, 0) + 1
        if symbol not in kernels:
            return VMInstrumentReturnKind.NO_OP
        if before:
            dev.sync()
            state["t"] = time.perf_counter()
        else:
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
    if not per_call:  # kernel names did not match the manifest's: say what the VM called
        raise RuntimeError("no VM call matched the manifest's kernel names; called: "
                           + ", ".join(f"{k} x{v}" for k, v in sorted(seen.items())[:40]))
    calls = [{"index": k, "kernel": names[k], "median_ms": statistics.median(v)} for k, v in sorted(per_call.items())]
    by_kernel: dict[str, float] = {}
    for c in calls:
        by_kernel[c["kernel"]] = by_kernel.get(c["kernel"], 0.0) + c["median_ms"]
    top = sorted(by_kernel.items(), key=lambda kv: -kv[1])[:15]
    return {"launches": counts[-1] if counts else 0, "sum_ms": sum(c["median_ms"] for c in calls),
            "top_kernels": [{"kernel": k, "ms": round(v, 4)} for k, v in top], "calls": calls}


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
        log(f"  torch.profiler failed: {type(err).__name__}: {str(err)[:200]}")
        return None


# --- one model ----------------------------------------------------------------------------------


def bench_model(entry: dict, payload: Path, args, tvm, torch, fatbins: FatbinCache | None, deadline: float) -> dict:
    import numpy as np  # noqa: PLC0415
    import onnx  # noqa: PLC0415
    import onnxruntime as ort  # noqa: PLC0415

    from onnx_torch import OnnxTorch  # noqa: PLC0415
    from regen import restore_initializers  # noqa: PLC0415

    model_start = time.perf_counter()
    model_deadline = min(deadline, model_start + args.model_budget_s)
    folder = payload / entry["dir"]
    files = entry["files"]
    rec: dict = {"model": entry["model"], "spec": entry["spec"], "launches_ours_static": entry.get("launches"),
                 "notes": []}
    # ONNX model with the exact weights TVM embeds.
    proto = onnx.load(str(folder / files["onnx"]))
    bad = restore_initializers(proto, entry.get("regenerated_weights", []))
    rec["regenerated_weights"] = len(entry.get("regenerated_weights", []))
    rec["regenerated_weights_exact"] = not bad
    if bad:
        rec["notes"].append(f"{len(bad)} regenerated weights differ from pack's (numpy draws differently): "
                            "torch/onnxruntime run other weights than TVM")
    with np.load(folder / files["inputs"]) as z:
        inputs = {spec["name"]: z[spec["name"]] for spec in entry["inputs"]}
    with np.load(folder / files["reference"]) as z:
        reference = [z[o["name"]] for o in entry["outputs"]]
    # onnxruntime (CPU): the reference.
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    expected = sess.run(None, inputs)
    rec["onnxruntime_vs_pack_reference"] = compare(expected, reference)
    # Ours.
    dev = tvm.cuda(0) if args.device == "cuda" else tvm.cpu(0)
    if fatbins is not None and "fatbin" in files and entry.get("cuda"):
        fatbins.add(entry["cuda"]["source_sha256"], folder / files["fatbin"])
    hits_before = fatbins.hits if fatbins else 0
    compiled_before = len(fatbins.compiled) if fatbins else 0
    start = time.perf_counter()
    lib = tvm.runtime.load_module(str(folder / files["lib"]))
    vm = tvm.runtime.vm.VirtualMachine(lib, dev)
    rec["ours_load_s"] = round(time.perf_counter() - start, 3)
    if fatbins is not None:
        rec["ours_cuda_binary"] = ("fatbin from pack" if fatbins.hits > hits_before else
                                   "nvcc at load" if len(fatbins.compiled) > compiled_before else "unknown")
    tvm_args = [tvm.runtime.tensor(inputs[spec["name"]], dev) for spec in entry["inputs"]]
    main = vm["main"]

    def ours():
        return main(*tvm_args)

    out = ours()
    outs = list(out) if isinstance(out, (list, tuple)) or type(out).__name__ in ("Array", "Tuple") else [out]
    rec["ours_vs_onnxruntime"] = compare([o.numpy() for o in outs], expected)
    rec["ours"] = time_fn(ours, dev.sync, args.runs, args.warmup)
    if not args.no_kernel_times:
        try:
            prof = tvm_kernel_profile(tvm, vm, lambda: (ours(), dev.sync()), dev, set(entry.get("kernels", [])),
                                      rounds=args.kernel_rounds)
            rec["ours_kernels"] = prof
            rec["launches_ours"] = prof["launches"]
        except Exception as err:
            rec["notes"].append(f"kernel profile failed: {type(err).__name__}: {str(err)[:200]}")
    # torch eager.
    tdev = torch.device(args.device)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    module = OnnxTorch(proto).to(tdev).eval()
    targs = [torch.from_numpy(inputs[n]).to(tdev) for n in module.input_names]
    with torch.inference_mode():
        got = module(*targs)
        rec["eager_vs_onnxruntime"] = compare([g.float().cpu().numpy() for g in got], expected)
        rec["torch_eager"] = time_fn(lambda: module(*targs), sync, args.runs, args.warmup)
        if args.device == "cuda" and not args.no_torch_profile:
            rec["launches_torch_eager"] = torch_launches(torch, lambda: module(*targs))
    rec["eager_vs_ours"] = rec["torch_eager"]["median_ms"] / rec["ours"]["median_ms"]
    # torch.compile.
    left = model_deadline - time.perf_counter()
    if args.skip_compile:
        rec["torch_compile"] = {"skipped": "--skip-compile"}
    elif left < 20:
        rec["torch_compile"] = {"skipped": f"time budget: {left:.0f} s left for this model"}
    else:
        torch._dynamo.reset()
        compiled = torch.compile(module, mode=args.compile_mode)

        def first_call():
            with torch.inference_mode():
                result = compiled(*targs)
                sync()
                return result

        try:
            start = time.perf_counter()
            got = run_with_alarm(left - 5, first_call)
            compile_s = time.perf_counter() - start
            with torch.inference_mode():
                rec["compile_vs_onnxruntime"] = compare([g.float().cpu().numpy() for g in got], expected)
                rec["torch_compile"] = time_fn(lambda: compiled(*targs), sync, args.runs, args.warmup)
                rec["torch_compile"]["compile_s"] = round(compile_s, 2)
                rec["torch_compile"]["mode"] = args.compile_mode
                if args.device == "cuda" and not args.no_torch_profile:
                    rec["launches_torch_compile"] = torch_launches(torch, lambda: compiled(*targs))
            rec["compile_vs_ours"] = rec["torch_compile"]["median_ms"] / rec["ours"]["median_ms"]
        except Deadline as err:
            rec["torch_compile"] = {"skipped": f"compile did not finish in the model budget ({err})"}
        except Exception as err:
            rec["torch_compile"] = {"failed": f"{type(err).__name__}: {str(err).strip()[:300]}"}
        torch._dynamo.reset()
    rec["seconds"] = round(time.perf_counter() - model_start, 1)
    del vm, lib
    return rec


def environment(args, tvm, torch) -> dict:
    import numpy as np  # noqa: PLC0415
    import onnx  # noqa: PLC0415
    import onnxruntime as ort  # noqa: PLC0415

    from tvm import base  # noqa: PLC0415

    env = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
           "host": platform.node(), "python": platform.python_version(), "device": args.device,
           "torch": torch.__version__, "torch_cuda": torch.version.cuda, "numpy": np.__version__,
           "onnx": onnx.__version__, "onnxruntime": ort.__version__, "tvm": getattr(tvm, "__version__", "?"),
           "tvm_runtime_only": bool(getattr(base, "_RUNTIME_ONLY", False)),
           "tvm_cuda_compile_mode": os.environ.get("TVM_CUDA_COMPILE_MODE"),
           "runs": args.runs, "warmup": args.warmup}
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
        env["threads"] = torch.get_num_threads()
    return env


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--payload", type=Path, default=HERE / "payload")
    parser.add_argument("--out", type=Path, default=Path("results.json"))
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--models", nargs="+", default=None, help="subset of the manifest's models (names)")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--kernel-rounds", type=int, default=5)
    parser.add_argument("--no-kernel-times", action="store_true")
    parser.add_argument("--no-torch-profile", action="store_true")
    parser.add_argument("--skip-compile", action="store_true", help="skip torch.compile")
    parser.add_argument("--compile-mode", default="default")
    parser.add_argument("--budget-s", type=float, default=540.0, help="whole run (default %(default)s)")
    parser.add_argument("--model-budget-s", type=float, default=120.0, help="per model (default %(default)s)")
    parser.add_argument("--tf32", action="store_true", help="allow TF32 in torch (default: strict fp32 like ours)")
    parser.add_argument("--no-cudnn-benchmark", action="store_true")
    parser.add_argument("--runtime-cache", type=Path, default=None, help="where to unpack the TVM runtime")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    deadline = started + args.budget_s
    manifest = json.loads((args.payload / "manifest.json").read_text())
    if args.device == "cuda":
        ensure_cudart_on_loader_path(argv)
        os.environ.setdefault("TVM_CUDA_COMPILE_MODE", "nvcc")  # NVRTC needs cuda-bindings
    if args.device == "cuda" and manifest.get("target") != "cuda":
        raise SystemExit(f"payload was packed for {manifest.get('target')}; use --device cpu")
    if args.device == "cpu" and manifest.get("target") != "llvm":
        raise SystemExit("--device cpu needs a payload packed with --target llvm")

    import torch  # noqa: PLC0415  (before tvm: loads the CUDA runtime libraries)

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

        fatbins = FatbinCache(manifest["models"][0]["cuda"]["arch"] if manifest["models"] else "sm_90a")
        tvm_ffi.register_global_func("tvm_callback_cuda_compile", lambda code, *rest: fatbins(code, *rest),
                                     override=True)
        if not tvm.runtime.enabled("cuda"):
            raise SystemExit("TVM runtime: cuda not enabled (libtvm_runtime_cuda.so failed to load? "
                             "LD_LIBRARY_PATH=" + os.environ.get("LD_LIBRARY_PATH", "") + ")")
    results = {"environment": environment(args, tvm, torch), "payload": {
        "created": manifest.get("created"), "target": manifest.get("target"), "arch": manifest.get("arch"),
        "left_out": manifest.get("left_out", [])}, "models": []}
    log(f"{results['environment'].get('gpu', results['environment'].get('cpu'))}, torch {torch.__version__}, "
        f"tvm {results['environment']['tvm']} (runtime-only: {results['environment']['tvm_runtime_only']})")
    wanted = set(args.models) if args.models else None
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for entry in manifest["models"]:
        if wanted and entry["model"] not in wanted and entry["spec"] not in wanted:
            continue
        if time.perf_counter() > deadline - 10:
            results["models"].append({"model": entry["model"], "skipped": "run budget exhausted"})
            continue
        log(f"{entry['model']} ...")
        try:
            rec = bench_model(entry, args.payload, args, tvm, torch, fatbins, deadline)
        except Exception as err:
            import traceback  # noqa: PLC0415

            rec = {"model": entry["model"], "failed": f"{type(err).__name__}: {str(err).strip()[:500]}",
                   "traceback": traceback.format_exc()[-2000:]}
        results["models"].append(rec)
        log("  " + summary_line(rec))
        results["seconds"] = round(time.perf_counter() - started, 1)
        args.out.write_text(json.dumps(results, indent=1))
    if fatbins is not None:
        results["cuda_binaries"] = {"fatbins_from_pack_used": fatbins.hits, "compiled_at_load": fatbins.compiled}
    results["seconds"] = round(time.perf_counter() - started, 1)
    args.out.write_text(json.dumps(results, indent=1))
    log(f"wrote {args.out} ({results['seconds']} s)")
    failed = [r["model"] for r in results["models"] if "failed" in r or not r.get("ours_vs_onnxruntime", {}).get("ok", True)]
    if failed:
        log(f"FAILED or mismatched: {', '.join(failed)}")
    return 1 if failed else 0


def summary_line(rec: dict) -> str:
    if "failed" in rec:
        return f"{rec['model']}: FAILED {rec['failed'][:200]}"

    def ms(key):
        v = rec.get(key, {})
        return f"{v['median_ms']:.3f} ms" if "median_ms" in v else "-"

    return (f"{rec['model']}: ours {ms('ours')} (err {rec['ours_vs_onnxruntime']['max_abs_err']:.1e}, "
            f"{rec.get('launches_ours', '?')} launches) | eager {ms('torch_eager')} | compile {ms('torch_compile')}"
            + (f" (compile {rec['torch_compile']['compile_s']} s)" if "compile_s" in rec.get("torch_compile", {}) else ""))


if __name__ == "__main__":
    raise SystemExit(main())
