"""Verification cannot pass vacuously (engine/runtime/verify.py, the pipeline's verify stage).

Outputs that do not depend on the input or sit below atol fall back to comparing every
kernel with the unscheduled build; tolerances follow each output's scale; models with
IsInf/IsNaN/Div... are run again with inf, -inf, nan and -0.0 in their inputs.
"""

import importlib.util

import numpy as np
import onnx
import pytest
import tvm
from onnx import TensorProto, helper, numpy_helper
from tvm import relax

import engine.relax_import as relax_import
import engine.targets as targets
from engine.errors import CompileError, VerificationError
from engine.events import CompileOptions
from engine.runtime.verify import KernelComparison, check_tensor, compare_outputs, first_unmatched
from engine.session import Session

OPTIONS = CompileOptions(runs=2, timing=False)
RTOL, ATOL = 1e-3, 1e-4


def _save(tmp_path, name, nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    path = tmp_path / f"{name}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return str(path)


def _tensor(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _ignores_input(tmp_path, scale=1.0):
    """y = softmax(relu(x @ W)) * 0 + b * scale: two kernels, the output is b * scale."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), "W"),
             numpy_helper.from_array(np.zeros(1, np.float32), "zero"),
             numpy_helper.from_array((rng.standard_normal(16) * scale).astype(np.float32), "b")]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Softmax", ["r"], ["s"], axis=-1), helper.make_node("Mul", ["s", "zero"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["y"])]
    return _save(tmp_path, "ignores_input", nodes, [_tensor("x", [4, 16])], [_tensor("y", [4, 16])], inits)


# --- (a) an output that ignores its input --------------------------------------------------

def test_output_ignoring_the_input_falls_back_to_kernels(tmp_path):
    result = Session(_ignores_input(tmp_path)).compile(OPTIONS)
    v = result.verification
    assert v.passed and v.outputs[0].depends_on_input is False and v.outputs[0].spread == 0.0
    assert v.kernels_compared == v.kernels_total == result.launches == 2
    note = ("output 'y' does not depend on the input (a second input moves it by 0.00e+00 at scale "
            f"{v.outputs[0].scale:.2e}): compared all 2 kernels against the unscheduled build instead")
    assert note in result.notes and note in v.summary()


def _break_kernel(monkeypatch, tmp_path, prefix):
    """Schedule as usual, then double the first `T.max(` (the relu) of kernel `prefix`."""
    spec = targets.TARGETS["llvm"]
    original = type(spec).schedule

    def broken(self, mod, target):
        mod = original(spec, mod, target)
        victim = next(gv for gv, f in mod.functions_items() if gv.name_hint.startswith(prefix))
        script = mod[victim].script()
        changed = script.replace("T.max(", "T.float32(2) * T.max(", 1)
        assert changed != script
        path = tmp_path / "broken_kernel.py"
        path.write_text("from tvm.script import tirx as T\n" + changed)
        loader = importlib.util.spec_from_file_location("broken_kernel", path)
        module = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(module)
        mod[victim] = module.main.with_attr("global_symbol", victim.name_hint)
        return mod

    monkeypatch.setattr(type(spec), "schedule", broken)


def test_kernel_fallback_catches_a_wrong_kernel_the_output_hides(monkeypatch, tmp_path):
    """The broken relu only feeds `* 0`: the output still matches onnxruntime, the kernel
    comparison does not."""
    path = _ignores_input(tmp_path)
    _break_kernel(monkeypatch, tmp_path, "fused_matmul_relu")
    with pytest.raises(VerificationError, match=r"DIFFERS from onnxruntime.*first kernel whose output differs: "
                                           r"fused_matmul_relu(_prepacked)? \(call 0; ops .*does not depend on the input"):
        Session(path).compile(OPTIONS)


def test_output_below_atol_falls_back_to_kernels(tmp_path):
    result = Session(_ignores_input(tmp_path, scale=1e-9)).compile(OPTIONS)
    v = result.verification
    assert v.passed and v.outputs[0].below_atol and v.kernels_compared == 2
    assert any("is all below atol" in n and "compared all 2 kernels" in n for n in result.notes)


def test_first_unmatched_pairs_by_shape_and_names_the_first_bad_call():
    a, b = np.ones((2, 3), np.float32), np.full((4,), 2.0, np.float32)
    ref = [a, b, a * 3]
    assert first_unmatched([("k0", [a]), ("k1", [b]), ("k2", [a * 3])], ref, RTOL, ATOL) == KernelComparison(3, 3, None)
    # fused kernels write several outputs, out of the reference's order
    assert first_unmatched([("h", [a * 3, a]), ("k1", [b])], ref, RTOL, ATOL) == KernelComparison(2, 2, None)
    got = [("k0", [a]), ("k1", [b * 1.01]), ("k2", [a * 3])]
    assert first_unmatched(got, ref, RTOL, ATOL) == KernelComparison(1, 3, "k1")
    # a changed layout (no same-shaped reference output) is not compared, not failed
    assert first_unmatched([("k0", [a]), ("packed", [np.ones(7, np.float32)])], ref, RTOL, ATOL) == \
        KernelComparison(1, 2, None)


# --- (b) outputs far below atol are compared relatively ------------------------------------

def test_tiny_output_is_compared_relatively():
    rng = np.random.default_rng(0)
    expected = (rng.standard_normal((8, 8)) * 1e-9).astype(np.float32)
    other = (rng.standard_normal((8, 8)) * 1e-9).astype(np.float32)
    wrong = expected * np.float32(1.5)  # every element off by 50%: all within atol=1e-4
    assert np.allclose(wrong, expected, rtol=RTOL, atol=ATOL)  # the old check passed this
    v = compare_outputs(["y"], [expected], [wrong], RTOL, ATOL, other=[other])
    assert not v.passed and not v.values_match and v.outputs[0].atol_used < 1e-11
    close = expected * np.float32(1 + 1e-6)
    ok = compare_outputs(["y"], [expected], [close], RTOL, ATOL, other=[other])
    assert ok.values_match and ok.outputs[0].below_atol
    assert not ok.passed and ok.summary().startswith("NOT VERIFIED")  # below atol: proves nothing alone
    assert "is all below atol" in ok.summary()


def test_figures_say_what_they_are():
    expected = np.array([1e-5, -2e-5, 3.0, -4.0], np.float32)
    actual = expected + np.float32(1e-6)
    text = compare_outputs(["y"], [expected], [actual], RTOL, ATOL).summary()
    assert "of output scale 4.00e+00 (atol used 1.00e-04)" in text
    assert "max rel err" in text and "where rtol governs (2 of 4 elements)" in text
    # nothing where rtol governs: no "max rel err 0.00e+00"
    small = np.array([1e-5, -2e-5], np.float32)
    text = compare_outputs(["y"], [small], [small], RTOL, ATOL).summary()
    assert "max rel err" not in text and "none compared relatively" in text


# --- (c) huge outputs ----------------------------------------------------------------------

def test_large_output_with_a_large_error_fails():
    rng = np.random.default_rng(0)
    expected = (rng.standard_normal(1000) * 1e12).astype(np.float32)
    other = (rng.standard_normal(1000) * 1e12).astype(np.float32)
    k = int(np.argmin(np.abs(np.abs(expected) - 1e9)))  # an element near 1e9, at scale ~3e12
    wrong = expected.copy()
    wrong[k] += np.float32(4.7e6)
    v = compare_outputs(["logits"], [expected], [wrong], RTOL, ATOL, other=[other])
    assert not v.passed and v.outputs[0].mismatches == 1
    rounded = expected * np.float32(1 + 2e-7)  # float32 rounding at that scale: passes
    assert compare_outputs(["logits"], [expected], [rounded], RTOL, ATOL, other=[other]).passed


def test_large_offset_output_is_not_verified_by_its_values():
    """~3.8e12 everywhere, the input moving it by ~1e6: an error of 4.7e6 is within rtol
    of each element, but larger than everything the input changes."""
    rng = np.random.default_rng(0)
    expected = (3.8e12 + rng.standard_normal(1000) * 1e6).astype(np.float32)
    other = (3.8e12 + rng.standard_normal(1000) * 1e6).astype(np.float32)
    wrong = expected + np.float32(4.7e6)
    assert np.allclose(wrong, expected, rtol=RTOL, atol=ATOL)  # the old check passed this
    v = compare_outputs(["logits"], [expected], [wrong], RTOL, ATOL, other=[other])
    assert not v.passed and v.outputs[0].depends_on_input is False
    assert "does not depend on the input" in v.summary()


def test_error_large_against_the_spread_fails():
    rng = np.random.default_rng(0)
    base = rng.standard_normal(1000)
    expected = (1e12 + base * 1e10).astype(np.float32)
    other = (1e12 + rng.standard_normal(1000) * 1e10).astype(np.float32)
    wrong = (1e12 + base[::-1] * 1e10).astype(np.float32)  # the input-dependent part scrambled
    check = check_tensor("y", expected, wrong, RTOL, ATOL, other)
    assert check.depends_on_input and np.allclose(wrong, expected, rtol=0.1)  # within 10% of each element
    assert not check.passed


# --- (d) special values: IsInf / IsNaN node tests ------------------------------------------

@pytest.fixture(scope="module")
def node_cases():
    from onnx.backend.test.case.node import collect_testcases

    with np.errstate(all="ignore"):
        cases = [c for c in collect_testcases(None) if c.name.startswith(("test_isinf", "test_isnan"))]
    assert {"test_isinf", "test_isinf_negative", "test_isinf_positive", "test_isnan"} <= {c.name for c in cases}
    return cases


def _run(result, inputs):
    vm = relax.VirtualMachine(result.executable, tvm.cpu())
    out = vm["main"](*[tvm.runtime.tensor(x) for x in inputs])
    return [out.numpy()] if hasattr(out, "numpy") else [o.numpy() for o in out]


def test_isinf_isnan_node_tests_pass(node_cases, tmp_path):
    for case in node_cases:
        path = tmp_path / f"{case.name}.onnx"
        onnx.save(case.model, path)
        result = Session(str(path)).compile(OPTIONS)
        v = result.verification
        assert v.passed and v.special_ops and v.special_values, case.name
        for inputs, expected in case.data_sets:
            for got, want in zip(_run(result, inputs), expected):
                np.testing.assert_array_equal(got, want, err_msg=case.name)


def test_isinf_with_nothing_to_detect(tmp_path):
    node = helper.make_node("IsInf", ["x"], ["y"], detect_positive=0, detect_negative=0)
    path = _save(tmp_path, "isinf_none", [node], [_tensor("x", [6])],
                 [helper.make_tensor_value_info("y", TensorProto.BOOL, [6])])
    result = Session(path).compile(OPTIONS)
    assert result.verification.passed
    x = np.array([-1.0, np.nan, np.inf, 2.0, -np.inf, np.inf], np.float32)
    assert not _run(result, [x])[0].any()


@pytest.mark.parametrize("name", ["test_isinf_negative", "test_isinf_positive"])
def test_special_values_catch_tvms_isinf(node_cases, tmp_path, monkeypatch, name):
    """Without our converter (TVM's ignores detect_positive/detect_negative) random inputs
    pass, and the run with special values fails."""
    monkeypatch.setattr(relax_import, "_CONVERTER_FIXES", {})
    case = next(c for c in node_cases if c.name == name)
    path = tmp_path / f"{name}.onnx"
    onnx.save(case.model, path)
    with pytest.raises(CompileError) as err:
        Session(str(path)).compile(OPTIONS)
    text = str(err.value)
    assert text.startswith("DIFFERS from onnxruntime")
    assert "compared exactly: 0 of 6 elements differ" in text  # the random inputs: no difference
    assert "inputs with inf, -inf, nan and -0.0 mixed in (the model has IsInf): outputs DIFFER on y" in text


def test_special_value_comparison_rules():
    e = np.array([np.nan, np.inf, -np.inf, -0.0, 1.0], np.float32)
    assert check_tensor("y", e, e.copy(), RTOL, ATOL).passed  # nan == nan, infinities equal
    assert check_tensor("y", e, np.array([np.nan, np.inf, -np.inf, 0.0, 1.0], np.float32), RTOL, ATOL).passed
    flipped = np.array([np.nan, -np.inf, -np.inf, -0.0, 1.0], np.float32)
    assert not check_tensor("y", e, flipped, RTOL, ATOL).passed  # inf sign differs
    lost = np.array([0.0, np.inf, -np.inf, -0.0, 1.0], np.float32)
    assert not check_tensor("y", e, lost, RTOL, ATOL).passed  # nan turned into a number
    made = np.array([np.nan, np.inf, -np.inf, np.nan, 1.0], np.float32)
    assert not check_tensor("y", e, made, RTOL, ATOL).passed  # a number turned into nan


def test_samples_depend_on_their_input():
    result = Session("fire_module").compile(OPTIONS)
    v = result.verification
    assert v.passed and v.kernels_compared == 0 and not v.special_values
    assert v.outputs[0].depends_on_input and "a second input moves it by" in v.summary()


def test_rtol_0_allows_rounding_noise_against_the_spread_too():
    """With rtol 0 the error allowed against how far a second input moves the output was 0:
    an error within the noise floor (8 ulps at the output's scale) failed as DIFFERS."""
    expected = np.linspace(-0.5, 0.6, 64).astype(np.float32)
    actual = expected + np.float32(1e-7)
    check = check_tensor("y", expected, actual, rtol=0.0, atol=0.0, other=expected[::-1].copy())
    assert check.passed and check.max_abs <= check.atol_used
