"""Tuning: the builder fix, per-kernel MetaSchedule with a persistent store, the pipeline hook."""

import inspect
import sys
import tempfile

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import relax

from engine.pipeline import CompileOptions, Stage, StageStatus
from engine.session import Session
from engine.targets import get_target
from engine.tuning import Choice, TuneOptions, TuneStore, tune_module
from engine.tuning.builder import build_without_intrinsics, fast_inspect_stack
from engine.tuning.cotune import time_kernel
from engine.tuning.tuner import _workloads
from tests.conftest import SAMPLES


def matmul_module(n: int = 256) -> tvm.IRModule:
    """main(a, b) = a @ b, legalized: one unscheduled PrimFunc."""
    bb = relax.BlockBuilder()
    a = relax.Var("a", relax.TensorType((n, n), "float32"))
    b = relax.Var("b", relax.TensorType((n, n), "float32"))
    with bb.function("main", [a, b]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.matmul(a, b))
        bb.emit_func_output(out)
    return relax.transform.LegalizeOps()(bb.get())


def test_fast_inspect_stack_is_scoped_and_equivalent():
    original = inspect.stack
    with fast_inspect_stack():
        assert inspect.stack is not original
        cheap = inspect.stack()
    assert inspect.stack is original
    full = inspect.stack()
    assert [f.function for f in cheap[:3]] == [f.function for f in full[:3]]
    assert [f.code_context for f in cheap[1:3]] == [f.code_context for f in full[1:3]]


def test_build_function_skips_the_intrinsics_import():
    code = ("import sys, tvm; from tvm import te; from engine.tuning.builder import build_without_intrinsics;"
            "A = te.placeholder((8,), name='A'); B = te.compute((8,), lambda i: A[i] + 1, name='B');"
            "f = te.create_prim_func([A, B]).with_attr('global_symbol', 'main');"
            "build_without_intrinsics(tvm.IRModule({'main': f}), tvm.target.Target('llvm'), None);"
            "print('tvm.s_tir.tensor_intrin' in sys.modules)")
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"


def test_tuning_builds_split_ragged_rows_as_the_compile_does(monkeypatch):
    """A candidate (a default schedule measured beside MetaSchedule's) is built as the
    compile builds it: a marked 55-wide row becomes register vectors and a tail, not one
    55-lane vector that LLVM would build lane by lane; the tuner's builder gets the llvm
    target's rewrite."""
    import re

    from tvm import s_tir, te

    import engine.tuning.tuner as tuner
    from engine.schedule.cpu.ragged import mark_ragged_row
    from engine.tuning.builder import local_builder

    a = te.placeholder((4, 55), name="A")
    b = te.compute((4, 55), lambda i, j: a[i, j] * 2.0, name="B")
    sch = s_tir.Schedule(te.create_prim_func([a, b]).with_attr("global_symbol", "main"))
    mark_ragged_row(sch, sch.get_loops(sch.get_sblock("B"))[1], 55, 16)
    target = tvm.target.Target({"kind": "llvm", "mcpu": "znver4"})
    vectors = lambda lib: set(re.findall(r"<(\d+) x float>", lib.inspect_source("ll")))
    llvm = get_target("llvm").before_build
    assert vectors(build_without_intrinsics(sch.mod, target, None, llvm)) == {"16", "7"}
    assert vectors(build_without_intrinsics(sch.mod, target, None)) == {"55"}  # what it was
    seen = []
    monkeypatch.setattr(tuner, "local_builder", lambda **kw: seen.append(kw) or local_builder(**kw))
    tune_module(matmul_module(16), get_target("llvm").target(None), lambda m, t: None,
                TuneStore(tempfile.mkdtemp()), TuneOptions(trials=0), before_build=llvm)
    assert seen == [{"before_build": llvm}]


def test_tune_hook_runs_inside_the_schedule_stage(monkeypatch, tmp_path):
    from engine.tuning import hook

    seen = []
    tune_kernels = hook.tune_kernels

    def spy(mod, ctx, options, plan=None):
        seen.append(sorted(gv.name_hint for gv, f in mod.functions_items() if isinstance(f, tvm.tirx.PrimFunc)))
        return tune_kernels(mod, ctx, options, plan)

    monkeypatch.setattr(hook, "tune_kernels", spy)
    events = []
    result = Session(str(SAMPLES / "fire_module.onnx")).compile(
        CompileOptions(tuning=TuneOptions(trials=0, db_root=str(tmp_path)), stop_after=Stage.SCHEDULE),
        progress=events.append)
    assert len(seen) == 1 and len(seen[0]) == 4
    assert [e.stage for e in events if e.status is StageStatus.DONE][-1] is Stage.SCHEDULE
    assert result.tuning.measured == 0  # no trials: the report of a tuning that measured nothing
    for k in result.kernels:  # untuned kernels keep the default schedule
        assert "T.parallel" in result.module[k.func].script()


@pytest.fixture(scope="module")
def tuned_matmul(tmp_path_factory):
    target = get_target("llvm").target(None)
    store = TuneStore(tmp_path_factory.mktemp("tune") / "mm-llvm")
    options = TuneOptions(trials=8, trials_per_kernel=8, trials_per_round=8)
    mod = matmul_module()
    first_mod, first = tune_module(mod, target, get_target("llvm").schedule_one, store, options)
    second_mod, second = tune_module(mod, target, get_target("llvm").schedule_one, store, options)
    return target, store, mod, first_mod, first, second_mod, second


@pytest.mark.slow
def test_tuned_kernel_beats_the_naive_one(tuned_matmul):
    target, store, mod, _, first, _, _ = tuned_matmul
    (record,) = first.records
    assert record.trials == 8 and record.tuned_s is not None and record.default_s is not None
    # a measured choice: since a bare matmul takes the matmul rule (cf61f93), its knob points
    # (TEMPLATE) are measured beside MetaSchedule's best and may win
    assert record.choice in (Choice.TUNED, Choice.TEMPLATE, Choice.DEFAULT)
    (w,) = _workloads(mod)
    sch = store.database().query_schedule(w.mod, target=target, workload_name="main")
    naive = time_kernel(w.mod["main"], target, repeat=3)
    tuned = time_kernel(sch.mod["main"], target, repeat=3)
    assert tuned < naive / 2, (tuned, naive)


@pytest.mark.slow
def test_second_run_reuses_the_database(tuned_matmul):
    _, _, _, first_mod, first, second_mod, second = tuned_matmul
    assert first.measured >= 8 + 1  # default + trials (+ the side-by-side re-measure)
    assert second.measured == 0 and second.reused == 1
    assert second.records == first.records
    name = "matmul"
    assert tvm_ffi.structural_equal(first_mod[name], second_mod[name])
    if first.records[0].choice is Choice.TUNED:
        assert first_mod[name].attrs["tirx.is_scheduled"]


def test_pick_measures_the_template_knob_points_and_replays_them():
    """A conv workload without a MetaSchedule result: the default and every other register
    tile of the conv rule are measured side by side, the fastest is recorded, and its
    schedule is rebuilt from the recorded knobs and computes what the default computes."""
    from engine.tuning.database import KernelRecord
    from engine.tuning.measure import CountingRunner, make_runner
    from engine.tuning.builder import local_builder
    from engine.tuning.knobs import schedule_knobs, template_points
    from engine.tuning.tuner import _pick

    target = get_target("llvm").target(None)
    mod = Session(str(SAMPLES / "fire_module.onnx")).compile(CompileOptions(stop_after=Stage.FUSE)).module
    (w,) = [w for w in _workloads(mod) if w.gvars[0].name_hint == "fused_conv2d2_add1_relu1"]
    runner = CountingRunner(make_runner())
    points = template_points(w.mod["main"], target)
    record = _pick(w, KernelRecord(w.key, "expand3x3", None), None, get_target("llvm").schedule_one,
                   target, local_builder(), runner, budget=0)
    assert runner.count == len(points)  # the default + the other tiles
    assert record.choice in (Choice.DEFAULT, Choice.TEMPLATE) and record.tuned_s <= record.default_s
    knobs = record.knobs or points[1][0]
    func = schedule_knobs(w.mod["main"], target, tuple(knobs))
    default = get_target("llvm").schedule_one(w.mod, target)["main"]
    rng = np.random.default_rng(0)
    args = [rng.standard_normal([int(s) for s in p.shape]).astype("float32")
            for p in tvm.s_tir.meta_schedule.arg_info.ArgInfo.from_prim_func(w.mod["main"])]
    outs = []
    for f in (default, func):
        ex = tvm.compile(tvm.IRModule({"main": f.with_attr("global_symbol", "main")}), target=target)
        tensors = [tvm.runtime.tensor(a) for a in args]
        ex.mod["main"](*tensors)
        outs.append(tensors[-1].numpy())
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-5)
