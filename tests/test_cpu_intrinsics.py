"""Intrinsics the llvm codegen cannot vectorise (engine/schedule/cpu/intrinsics.py).

Our CPU schedule vectorises elementwise loops; for sinh, cosh and fmod TVM 0.27's llvm
backend has no vector lowering ("unknown intrinsic tirx.cosh"), so those loops stay scalar.
"""

import numpy as np
import onnx
import pytest
import tvm
from onnx import TensorProto, helper
from tvm import relax, s_tir, te, tirx

from engine.events import CompileOptions
from engine.schedule.cpu.intrinsics import NO_VECTOR_LOWERING, unvectorizable_calls
from engine.schedule.cpu.rules import schedule_func
from engine.session import Session
from engine.targets import get_target

TARGET = tvm.target.Target({"kind": "llvm", "num-cores": 2})
OPTIONS = CompileOptions(runs=2, timing=False)


def _vectorised(op, dtype="float32", n=64):
    """C[i] = op(A[i] (, B[i])) with its loop split by 8 and vectorised."""
    a, b = te.placeholder((n,), dtype, "A"), te.placeholder((n,), dtype, "B")
    binary = op in (tirx.fmod, tirx.pow, tirx.atan2)
    c = te.compute((n,), lambda i: op(a[i], b[i]) if binary else op(a[i]), "C")
    sch = s_tir.Schedule(te.create_prim_func([a, b, c]))
    _, inner = sch.split(sch.get_loops(sch.get_sblock("C"))[0], [None, 8])
    sch.vectorize(inner)
    return sch.mod


@pytest.mark.parametrize("name", sorted(NO_VECTOR_LOWERING))
def test_the_listed_intrinsics_have_no_vector_lowering(name):
    """Keeps the list honest: drop an entry once TVM learns to vectorise it."""
    with pytest.raises(Exception, match=f"unknown intrinsic.*{name}"):
        tvm.compile(_vectorised(getattr(tirx, name.split(".")[1])), target=TARGET)


@pytest.mark.parametrize("op", [tirx.exp, tirx.tanh, tirx.sin, tirx.log1p, tirx.pow])
def test_other_intrinsics_vectorise(op):
    tvm.compile(_vectorised(op), target=TARGET)


def _loops(func):
    kinds = []
    import tvm_ffi

    tvm_ffi.structural_walk(func, (tirx.For, lambda f: kinds.append(f.kind)), order="pre")
    return kinds


@pytest.mark.parametrize("op", ["cosh", "sinh", "exp"])
def test_schedule_keeps_only_unvectorizable_loops_scalar(op):
    a = te.placeholder((4, 256), "float32", "A")
    c = te.compute((4, 256), lambda i, j: getattr(tirx, op)(a[i, j]), "C")
    func = schedule_func(te.create_prim_func([a, c]), TARGET)
    vectorised = tirx.ForKind.VECTORIZED in _loops(func)
    assert vectorised == (op == "exp")
    assert bool(unvectorizable_calls(func)) == (op != "exp")
    lib = tvm.compile(tvm.IRModule({"main": func}), target=TARGET)
    x = np.random.default_rng(0).uniform(-3, 3, (4, 256)).astype(np.float32)
    out = tvm.runtime.tensor(np.zeros_like(x))
    lib["main"](tvm.runtime.tensor(x), out)
    np.testing.assert_allclose(out.numpy(), getattr(np, op)(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["Cosh", "Sinh"])
def test_cosh_sinh_models_compile_and_verify(op, tmp_path):
    """The ONNX node tests test_cosh / test_sinh: 3x4x5, our schedule vectorises the row."""
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"])], op.lower(),
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4, 5])])
    path = tmp_path / f"{op}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    result = Session(str(path)).compile(OPTIONS)
    assert result.verification.passed
    x = np.random.default_rng(1).standard_normal((3, 4, 5)).astype(np.float32)
    vm = relax.VirtualMachine(result.executable, tvm.cpu())
    got = vm["main"](tvm.runtime.tensor(x)).numpy()
    np.testing.assert_allclose(got, getattr(np, op.lower())(x), rtol=1e-5, atol=1e-6)


def _power_kernel(exponent):
    """C[i, j] = pow(A[i, j], exponent), scheduled by the CPU rules, built for this host."""
    a = te.placeholder((4, 256), "float32", "A")
    c = te.compute((4, 256), lambda i, j: tirx.pow(a[i, j], tirx.const(exponent, "float32")), "C")
    func = schedule_func(te.create_prim_func([a, c]), TARGET)
    lib = tvm.compile(tvm.IRModule({"main": func.with_attr("global_symbol", "main")}), target=TARGET)
    return func, lib


@pytest.mark.parametrize("exponent", [0.75, 0.25, 0.5, 1.5, 2.0, -0.75, -0.5])
def test_a_power_in_quarters_is_square_roots_and_vectorises(exponent):
    """LRN's x / pow(k + alpha * sum, 0.75): LLVM lowered the vector pow to a powf call per
    lane (inception_v1's two LRNs 1.27 ms of 8.2); as square roots 0.09 ms, within 2 ulp."""
    func, lib = _power_kernel(exponent)
    assert "tirx.pow" not in func.script()
    assert "powf" not in lib.mod.inspect_source("asm")
    x = np.concatenate([np.geomspace(1e-6, 1e6, 1020), [0.0, np.inf, -1.0, 2.5]]).astype("float32").reshape(4, 256)
    out = tvm.runtime.tensor(np.zeros_like(x))
    lib["main"](tvm.runtime.tensor(x), out)
    with np.errstate(all="ignore"):
        want = np.power(x.astype("float64"), exponent).astype("float32")
    got = out.numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))  # x < 0, fractional c: NaN
    finite = np.isfinite(want) & (want != 0)
    np.testing.assert_allclose(got[finite], want[finite], rtol=4e-7)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])


@pytest.mark.parametrize("exponent", [0.3, 2.5, 0.0, float("nan"), float("inf")])
def test_other_powers_stay_pow(exponent):
    func, _ = _power_kernel(exponent)
    assert "T.pow" in func.script()


def _legalize(build, shape, dtype):
    """main(x) = build(x), a `dtype` tensor of `shape`, through the llvm target's legalization."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType(shape, dtype))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(build(x))
        bb.emit_func_output(out)
    return relax.transform.LegalizeOps(customize_legalize_map=get_target("llvm").legalize())(bb.get())


def _legalized(build, shape=(8, 128)):
    """main(x) = build(x) on float32, legalized for llvm and scheduled by the CPU rules, built."""
    mod = _legalize(build, shape, "float32")
    mod = relax.transform.FuseTIR()(relax.transform.FuseOps()(relax.transform.AnnotateTIROpPattern()(mod)))
    from engine.schedule.cpu.rules import schedule_module

    sched = schedule_module(mod, TARGET)
    scripts = "".join(f.script() for _, f in sched.functions_items() if isinstance(f, tirx.PrimFunc))
    vm = relax.VirtualMachine(tvm.compile(sched, target=TARGET), tvm.cpu())
    return scripts, lambda a: vm["main"](tvm.runtime.tensor(a)).numpy()


def test_softmax_exp_sigmoid_and_tanh_run_on_vector_approximations():
    """llvm has no vector exp: as libm calls per element mha_block's softmax was 26% of its
    kernel time (0.017 ms; 0.006 on topi.fast_exp), bert_encoder's 0.338 -> 0.063 ms."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((8, 128)) * 8).astype("float32")
    x[1, ::3] = -np.inf  # masked attention scores
    x[2] = np.linspace(-100, 100, 128)
    x64 = x.astype("float64")
    for build, want in [
        (lambda v: relax.op.nn.softmax(v, axis=-1),
         np.exp(x64 - x64.max(-1, keepdims=True)) / np.exp(x64 - x64.max(-1, keepdims=True)).sum(-1, keepdims=True)),
        (relax.op.sigmoid, 1 / (1 + np.exp(-x64))),
        (relax.op.tanh, np.tanh(x64)),
        (lambda v: relax.op.exp(relax.op.clip(v, -80, 80)), np.exp(np.clip(x64, -80, 80))),
    ]:
        scripts, run = _legalized(build)
        assert not [t for t in ("T.exp(", "T.sigmoid(", "T.tanh(") if t in scripts]  # no libm call per element
        np.testing.assert_allclose(run(x), want, rtol=1e-5, atol=1e-30)  # fast_exp: a few ulp


def test_float64_exp_keeps_tvms_own_legalization():
    """topi.fast_exp is float32 only."""
    text = _legalize(lambda v: relax.op.nn.softmax(relax.op.exp(v)), (4, 8), "float64").script()
    assert "fast_exp" not in text and "T.exp(" in text
