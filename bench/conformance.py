"""ONNX backend node tests through blockwise and through stock TVM, side by side.

    .venv/bin/python bench/conformance.py                       # all 2,024 cases, 2 workers
    .venv/bin/python bench/conformance.py --ops Relu,Conv --limit 20 --jobs 1

Cases are `onnx.backend.test.case.node.collect_testcases()`: one-node models (and their
function-expanded forms) with inputs and expected outputs, then ONNX's model tests: 117
PyTorch exports (`data/pytorch-converted`, `data/pytorch-operator`, op "torch:OP") and 23
small models (`data/simple`, op "simple:OP"). Each case is run twice, in
worker processes with a timeout so that a crash or a hang is counted, not fatal:

- blockwise: what `workbench compile` does up to the build (load_model with the case's
  input shapes given as `--shape` would give them, import, fuse, schedule, build for
  llvm; no verify or timing stage: the case's own data is the check), then the VM runs
  the case's inputs.
- stock TVM: `from_onnx` (the same static input shapes) and `tvm.compile(mod, "llvm")`.

Outputs are compared as ONNX's backend runner does: same count, shapes and dtypes, then
`np.testing.assert_allclose` with the case's rtol/atol (1e-3/1e-7 for every node case).
A case is pass, wrong (ran, different answer), clean error (an exception with a message)
or crash/hang (the worker died or ran past --timeout). Writes docs/conformance.md
(`--doc`) and the raw results to bench/results/conformance-<UTC time>.json;
`--from-json` renders the report of an earlier run again without running anything.
"""

from __future__ import annotations

import argparse
import enum
import json
import multiprocessing as mp
import os
import platform
import sys
import tempfile
import time
import warnings
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
DOC = ROOT / "docs" / "conformance.md"
OURS, STOCK = "blockwise", "stock"
PIPELINES = (OURS, STOCK)


class Status(str, enum.Enum):
    PASS = "pass"
    WRONG = "wrong"  # ran to the end, the answer differs from the expected outputs
    ERROR = "clean error"  # an exception with a message; the process lived on
    CRASH = "crash"  # the worker process died
    HANG = "hang"  # the worker ran past the timeout and was killed


@dataclass(frozen=True)
class Case:
    """One node test: the model, one data set, ONNX's tolerances."""

    name: str
    op: str
    model: bytes  # serialised ModelProto
    inputs: tuple  # numpy arrays, lists of them (sequences) or None (empty optionals)
    outputs: tuple
    rtol: float
    atol: float


@dataclass(frozen=True)
class Outcome:
    status: Status
    message: str = ""
    seconds: float = 0.0


# --- cases --------------------------------------------------------------------------------

def collect_cases(ops: set[str] | None = None, names: set[str] | None = None,
                  limit: int | None = None) -> list[Case]:
    """The node tests, in ONNX's order; `ops`/`names` keep those cases (an `_expanded` case
    belongs to the op of its base case), `limit` the first N after that."""
    import onnx
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generators' own overflow warnings
        tests = collect_testcases()
    op_of = {t.name: _node_op(t.model) for t in tests if "_expanded" not in t.name}
    cases = []
    for t in tests:
        op = op_of.get(t.name.split("_expanded")[0], _node_op(t.model))
        if (ops and op not in ops) or (names and t.name not in names) or not t.data_sets:
            continue
        inputs, outputs = t.data_sets[0]
        cases.append(Case(t.name, op, t.model.SerializeToString(), tuple(_normalize(x) for x in inputs),
                          tuple(_normalize(x) for x in outputs), t.rtol, t.atol))
        if limit and len(cases) >= limit:
            break
    if not limit or len(cases) < limit:
        cases += collect_model_cases(ops, names, limit - len(cases) if limit else None)
    assert all(isinstance(c.model, bytes) for c in cases) and onnx  # bytes pickle to workers
    return cases


def collect_model_cases(ops: set[str] | None = None, names: set[str] | None = None,
                        limit: int | None = None) -> list[Case]:
    """ONNX's model tests with their first data set: the PyTorch exports (`data/pytorch-converted`,
    `data/pytorch-operator`: torch.nn modules and operators, opset 6 and a few 9 and 12, op
    "torch:OP" by the model's last node) and `data/simple` (op "simple:OP"); ONNX's
    model-test tolerances."""
    import onnx
    from onnx import numpy_helper

    cases = []
    for suite, prefix in (("pytorch-converted", "torch"), ("pytorch-operator", "torch"), ("simple", "simple")):
        for folder in sorted((Path(onnx.__file__).parent / "backend" / "test" / "data" / suite).iterdir()):
            data = folder / "test_data_set_0"
            if not (folder / "model.onnx").is_file() or not data.is_dir():
                continue
            model = onnx.load(str(folder / "model.onnx"))
            op = f"{prefix}:{_node_op(model)}"
            if (ops and op not in ops and op.split(":", 1)[1] not in ops) or (names and folder.name not in names):
                continue

            def tensors(kind):
                files = sorted(data.glob(f"{kind}_*.pb"), key=lambda f: int(f.stem.split("_")[1]))
                return tuple(numpy_helper.to_array(onnx.load_tensor(str(f))) for f in files)

            cases.append(Case(folder.name, op, model.SerializeToString(), tensors("input"), tensors("output"),
                              1e-3, 1e-7))
            if limit and len(cases) >= limit:
                return cases
    return cases


def _node_op(model) -> str:
    node = model.graph.node[-1]
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"


def _normalize(value):
    """A data-set value as the backend runner hands it to a backend."""
    import onnx
    from onnx import numpy_helper

    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, (list, tuple)):
        return [_normalize(v) for v in value]
    return value


def static_shapes(model, inputs) -> dict[str, tuple[int, ...]]:
    """The shapes of the case's tensor inputs whose declared shape is not fully static: what
    a user passes as `--shape`."""
    shapes = {}
    for vi, value in zip(model.graph.input, inputs):
        if vi.type.WhichOneof("value") != "tensor_type" or not isinstance(value, np.ndarray):
            continue
        dims = vi.type.tensor_type.shape.dim
        if not vi.type.tensor_type.HasField("shape") or any(not d.HasField("dim_value") for d in dims):
            shapes[vi.name] = tuple(int(d) for d in value.shape)
    return shapes


# --- the two pipelines --------------------------------------------------------------------

def run_blockwise(case: Case) -> list:
    """The case through load_model and our stages up to the build, run on its inputs."""
    import onnx
    import tvm
    from tvm import relax

    from engine.events import CompileOptions, Stage
    from engine.model import load_model
    from engine.opgraph import build_operator_graph
    from engine.pipeline import compile_model

    proto = onnx.load_from_string(case.model)
    with tempfile.TemporaryDirectory(prefix="conformance-") as tmp:
        path = Path(tmp) / f"{case.name}.onnx"
        path.write_bytes(case.model)
        model = load_model(str(path), static_shapes(proto, case.inputs))
    result = compile_model(model, build_operator_graph(model),
                           CompileOptions(target="llvm", stop_after=Stage.BUILD, timing=False))
    by_name = dict(zip((vi.name for vi in proto.graph.input), case.inputs))
    dev = tvm.cpu()
    vm = relax.VirtualMachine(result.executable, dev)
    value = vm["main"](*(_to_tvm(by_name[spec.name], dev) for spec in model.inputs))
    return _from_tvm(value, len(proto.graph.output))


def run_stock(case: Case) -> list:
    """The case through stock TVM: from_onnx and the default llvm pipeline."""
    import onnx
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    proto = onnx.load_from_string(case.model)
    mod = from_onnx(proto, shape_dict=static_shapes(proto, case.inputs) or None, keep_params_in_input=False)
    ex = tvm.compile(mod, target="llvm")
    dev = tvm.cpu()
    vm = relax.VirtualMachine(ex, dev)
    inits = {i.name for i in proto.graph.initializer}
    args = [_to_tvm(v, dev) for vi, v in zip(proto.graph.input, case.inputs) if vi.name not in inits]
    return _from_tvm(vm["main"](*args), len(proto.graph.output))


RUNNERS = {OURS: run_blockwise, STOCK: run_stock}


def _to_tvm(value, dev):
    import tvm

    if isinstance(value, list):
        return [_to_tvm(v, dev) for v in value]
    return tvm.runtime.tensor(value, dev)


def _from_tvm(value, n_outputs: int) -> list:
    def convert(v):
        if hasattr(v, "numpy"):
            return v.numpy()
        if isinstance(v, (list, tuple)) or type(v).__name__ in ("Array", "Tuple"):
            return [convert(x) for x in v]
        return np.asarray(v)

    converted = convert(value)
    return [converted] if n_outputs == 1 else converted if isinstance(converted, list) else [converted]


def compare(expected, actual, rtol: float, atol: float) -> str:
    """'' when `actual` matches as ONNX's backend runner requires, else the first difference."""
    if not isinstance(actual, list) or len(actual) != len(expected):
        return f"{len(actual) if isinstance(actual, list) else 1} outputs, expected {len(expected)}"
    for k, (want, got) in enumerate(zip(expected, actual)):
        if isinstance(want, list):
            if not isinstance(got, list):
                return f"output {k}: a tensor, expected a sequence"
            problem = compare(want, got, rtol, atol)
            if problem:
                return f"output {k}: {problem}"
            continue
        got = np.asarray(got)
        if got.shape != want.shape:
            return f"output {k}: shape {got.shape}, expected {want.shape}"
        if want.dtype == object:
            if not np.array_equal(got, want):
                return f"output {k}: strings differ"
            continue
        if got.dtype != want.dtype:
            return f"output {k}: dtype {got.dtype}, expected {want.dtype}"
        if want.dtype.name == "bfloat16":
            got, want, rtol = got.astype(np.float32), want.astype(np.float32), max(rtol, 2 ** -6)
        try:
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
        except AssertionError as err:
            lines = [ln.strip() for ln in str(err).splitlines() if "Mismatched" in ln or "Max abs" in ln]
            return f"output {k}: " + ("; ".join(lines) or "values differ")
        except TypeError as err:  # a dtype numpy cannot compare (float8, int4)
            if not np.array_equal(got.view(np.uint8), want.view(np.uint8)):
                return f"output {k}: values differ ({err})"
    return ""


def run_case(case: Case, pipeline: str) -> Outcome:
    """One case through one pipeline, in this process."""
    start = time.perf_counter()
    try:
        actual = RUNNERS[pipeline](case)
    except Exception as err:  # noqa: BLE001 - every failure is a result here
        return Outcome(Status.ERROR, _one_line(err), time.perf_counter() - start)
    problem = compare(list(case.outputs), actual, case.rtol, case.atol)
    return Outcome(Status.WRONG if problem else Status.PASS, problem, time.perf_counter() - start)


def _one_line(err: BaseException) -> str:
    from engine.errors import one_line

    return f"{type(err).__name__}: {one_line(err, 300)}"


# --- workers ------------------------------------------------------------------------------

def _worker(conn) -> None:
    """Runs the tasks it is sent until the pipe closes; TVM's own printing goes to /dev/null."""
    sys.path.insert(0, str(ROOT))
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    import tvm  # noqa: F401 - paid once per worker, not per case

    while True:
        try:
            case, pipeline = conn.recv()
        except EOFError:
            return
        conn.send(run_case(case, pipeline))


class _Slot:
    """One worker process and the task it is running."""

    def __init__(self, ctx):
        self.parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self.task = None
        self.started = 0.0

    def stop(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join()
        self.parent.close()


def run_all(cases: list[Case], jobs: int = 2, timeout: float = 120.0, budget_s: float | None = None,
            progress=None) -> dict[tuple[str, str], Outcome]:
    """Every case through both pipelines on `jobs` worker processes; a worker that dies or
    runs past `timeout` is replaced and its task counted as crash/hang. Past `budget_s` no
    new task starts (the results are partial)."""
    ctx = mp.get_context("spawn")
    tasks = [(c, p) for c in cases for p in PIPELINES]
    tasks.reverse()  # popped from the end: ONNX's order
    slots = [_Slot(ctx) for _ in range(max(1, jobs))]
    results: dict[tuple[str, str], Outcome] = {}
    began = time.perf_counter()
    try:
        while tasks or any(s.task for s in slots):
            if budget_s is not None and time.perf_counter() - began >= budget_s:
                tasks.clear()
            for k, slot in enumerate(slots):
                if slot.task is None and tasks:
                    slot.task, slot.started = tasks.pop(), time.perf_counter()
                    slot.parent.send(slot.task)
                if slot.task is None:
                    continue
                outcome = None
                elapsed = time.perf_counter() - slot.started
                if slot.parent.poll(0.05):
                    try:
                        outcome = slot.parent.recv()
                    except (EOFError, OSError):
                        outcome = Outcome(Status.CRASH, f"worker died (exit {slot.proc.exitcode})", elapsed)
                elif not slot.proc.is_alive():
                    outcome = Outcome(Status.CRASH, f"worker died (exit {slot.proc.exitcode})", elapsed)
                elif elapsed > timeout:
                    outcome = Outcome(Status.HANG, f"no result after {timeout:.0f} s", elapsed)
                if outcome is None:
                    continue
                case, pipeline = slot.task
                results[(case.name, pipeline)] = outcome
                if progress:
                    progress(case, pipeline, outcome, len(results), 2 * len(cases))
                slot.task = None
                if outcome.status in (Status.CRASH, Status.HANG):
                    slot.stop()
                    slots[k] = _Slot(ctx)
    finally:
        for slot in slots:
            slot.stop()
    return results


# --- report -------------------------------------------------------------------------------

COLUMNS = (Status.PASS, Status.WRONG, Status.ERROR)


def totals(results: dict, pipeline: str) -> Counter:
    return Counter(o.status for (_, p), o in results.items() if p == pipeline)


def render(cases: list[Case], results: dict, meta: dict) -> str:
    """docs/conformance.md from one run's results."""
    done = [c for c in cases if all((c.name, p) in results for p in PIPELINES)]
    ours, stock = totals(results, OURS), totals(results, STOCK)
    out = [
        "# ONNX conformance: blockwise vs stock TVM",
        "",
        "ONNX's backend node tests (`onnx.backend.test.case.node.collect_testcases()`) and its "
        "model tests (the PyTorch exports of `data/pytorch-converted` and `data/pytorch-operator`, "
        "op `torch:OP`, mostly opset 6; the small models of `data/simple`, op `simple:OP`) compiled "
        "for llvm and run on their own inputs, through blockwise (load, import, fuse, schedule, "
        "build: what `workbench compile` does before verifying) and through stock TVM "
        "(`from_onnx` + `tvm.compile(mod, target=\"llvm\")`), both given the cases' input shapes. "
        "Compared as ONNX's backend runner compares (shapes, dtypes, `assert_allclose` with the "
        "case's rtol/atol). Written by `bench/conformance.py` from one run; raw results in "
        f"`{meta['json']}`.",
        "",
        f"- date: {meta['date']}",
        f"- machine: {meta['machine']}",
        f"- versions: TVM {meta['tvm']}, onnx {meta['onnx']}, onnxruntime {meta['onnxruntime']}, "
        f"numpy {meta['numpy']}, Python {meta['python']}",
        f"- command: `{meta['command']}`",
        f"- run time: {meta['seconds'] / 60:.1f} min for {len(done)} of {meta['collected']} cases"
        + (" (**partial**: the time budget ran out)" if len(done) < meta["collected"] else ""),
        "",
        f"| {len(done)} cases | blockwise | stock TVM |",
        "|---|---|---|",
    ]
    for status in COLUMNS:
        out.append(f"| {status.value} | {ours[status]} | {stock[status]} |")
    out.append(f"| crash / hang | {ours[Status.CRASH]} / {ours[Status.HANG]} | "
               f"{stock[Status.CRASH]} / {stock[Status.HANG]} |")

    def status(case, p):
        return results[(case.name, p)].status

    behind = [c for c in done if status(c, STOCK) is Status.PASS and status(c, OURS) is not Status.PASS]
    out += ["", f"## Cases stock TVM passes and blockwise does not ({len(behind)})", ""]
    out += [f"- `{c.name}`: {status(c, OURS).value}: {results[(c.name, OURS)].message}" for c in behind] or ["none"]
    wrong = [c for c in done if status(c, OURS) is Status.WRONG]
    out += ["", f"## Wrong answers of blockwise ({len(wrong)})", "",
            "| case | op | difference | stock TVM |", "|---|---|---|---|"]
    out += [f"| `{c.name}` | {c.op} | {_cell(results[(c.name, OURS)].message)} | {status(c, STOCK).value} |"
            for c in wrong]
    reasons = Counter(_reason(results[(c.name, OURS)].message) for c in done
                      if status(c, OURS) in (Status.ERROR, Status.CRASH, Status.HANG))
    out += ["", "## Why blockwise fails (most common first lines of its errors)", "",
            "| cases | error |", "|---|---|"]
    out += [f"| {n} | {_cell(reason)} |" for reason, n in reasons.most_common(25)]
    by_op: dict[str, list[Case]] = {}
    for c in done:
        by_op.setdefault(c.op, []).append(c)
    out += ["", "## Per operator", "", "| op | cases | blockwise pass | stock pass |", "|---|---|---|---|"]
    for op in sorted(by_op):
        cs = by_op[op]
        n_ours = sum(status(c, OURS) is Status.PASS for c in cs)
        n_stock = sum(status(c, STOCK) is Status.PASS for c in cs)
        mark = " ⚠" if n_ours < n_stock else ""
        out.append(f"| {op} | {len(cs)} | {n_ours}{mark} | {n_stock} |")
    return "\n".join(out) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")[:200]


def _reason(message: str) -> str:
    """An error's message without the case-specific parts (node and file names)."""
    import re

    text = re.sub(r"/tmp/\S+|test_\w+", "…", message)
    return re.sub(r"(?<![A-Za-z])'[^']*'", "'…'", text)[:160]  # quoted names, not TVM's apostrophe


def metadata(argv: list[str], seconds: float, collected: int, json_path: str) -> dict:
    import onnx
    import onnxruntime
    import tvm

    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    return {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}",
            "tvm": tvm.__version__, "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__,
            "numpy": np.__version__, "python": platform.python_version(),
            "command": " ".join(["bench/conformance.py", *argv]), "seconds": seconds,
            "collected": collected, "json": json_path}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", help="comma-separated ONNX op types (Relu,Conv)")
    p.add_argument("--cases", help="comma-separated case names (test_relu,test_conv_with_strides_padding)")
    p.add_argument("--limit", type=int, help="the first N cases (after --ops/--cases)")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per case and pipeline (default 120)")
    p.add_argument("--budget-min", type=float, help="start no case after this many minutes (partial results)")
    p.add_argument("--doc", nargs="?", const=str(DOC), help=f"write the markdown report (default {DOC})")
    p.add_argument("--from-json", metavar="RESULTS", help="run nothing: render --doc from an earlier run's raw results")
    args = p.parse_args(argv)
    if args.from_json:
        return _render_saved(Path(args.from_json), Path(args.doc or DOC))
    if args.jobs < 1 or args.timeout <= 0:
        p.error("--jobs and --timeout must be positive")
    ops = set(filter(None, (args.ops or "").split(","))) or None
    names = set(filter(None, (args.cases or "").split(","))) or None
    cases = collect_cases(ops, names, args.limit)
    if not cases:
        print(f"no node test matches --ops {args.ops or '-'} --cases {args.cases or '-'}", file=sys.stderr)
        return 2
    print(f"{len(cases)} cases x {len(PIPELINES)} pipelines on {args.jobs} workers", file=sys.stderr)

    def progress(case, pipeline, outcome, done, total):
        note = f": {outcome.message[:150]}" if outcome.status is not Status.PASS else ""
        print(f"[{done}/{total}] {case.name} {pipeline} {outcome.status.value} "
              f"{outcome.seconds:.1f}s{note}", file=sys.stderr, flush=True)

    start = time.perf_counter()
    results = run_all(cases, args.jobs, args.timeout, args.budget_min * 60 if args.budget_min else None, progress)
    seconds = time.perf_counter() - start
    RESULTS.mkdir(parents=True, exist_ok=True)
    json_path = RESULTS / f"conformance-{datetime.now(timezone.utc).strftime('%Y%m%d-%H%M')}.json"
    meta = metadata(argv, seconds, len(cases), str(json_path.relative_to(ROOT)))
    json_path.write_text(json.dumps({
        **meta, "cases": [{"name": c.name, "op": c.op, **{p: {**asdict(results[(c.name, p)]),
                                                             "status": results[(c.name, p)].status.value}
                                                          for p in PIPELINES if (c.name, p) in results}}
                          for c in cases]}, indent=1))
    for pipeline in PIPELINES:
        t = totals(results, pipeline)
        print(f"{pipeline:>9}: " + ", ".join(f"{s.value} {t[s]}" for s in Status), file=sys.stderr)
    print(f"wrote {json_path}", file=sys.stderr)
    if args.doc:
        Path(args.doc).write_text(render(cases, results, meta))
        print(f"wrote {args.doc}", file=sys.stderr)
    return 0


def _render_saved(path: Path, doc: Path) -> int:
    """The report of a run from its raw results file (same cases, outcomes and metadata)."""
    try:
        saved = json.loads(path.read_text())
        cases = [Case(c["name"], c["op"], b"", (), (), 0.0, 0.0) for c in saved["cases"]]
        results = {(c["name"], p): Outcome(Status(c[p]["status"]), c[p]["message"], c[p]["seconds"])
                   for c in saved["cases"] for p in PIPELINES if p in c}
        meta = {k: v for k, v in saved.items() if k != "cases"}
        text = render(cases, results, meta)
    except (OSError, ValueError, KeyError, TypeError) as err:
        print(f"{path}: not a conformance results file ({type(err).__name__}: {err})", file=sys.stderr)
        return 2
    doc.write_text(text)
    print(f"wrote {doc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
