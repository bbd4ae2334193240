"""LRN as one injective kernel (engine/converters/lrn.py) and ragged vector rows split at
build time (engine/schedule/cpu/ragged.py): onnx's reference values, one kernel, and the
build's loops."""

import numpy as np
import onnx
import pytest
import tvm
import tvm_ffi
from onnx import helper
from tvm import tirx

from engine.errors import UnsupportedOpError
from engine.events import CompileOptions
from engine.schedule.cpu.common import vector_lanes
from engine.schedule.cpu.ragged import RAGGED_ROW, split_ragged_rows
from engine.session import Session
from engine.targets import get_target
from tests.test_converters_variadic import BUILD_ONLY, RNG, _save
from tests.test_symbolic_shapes import _run


def _reference(x, size, alpha=2e-3, beta=0.75, bias=1.5):
    """The operator's definition: channels max(0, c - floor((size-1)/2)) ..
    min(C-1, c + ceil((size-1)/2)). (onnx's ReferenceEvaluator disagrees with it and with
    onnxruntime, which agrees with this to 2e-6.)"""
    squares, total = x.astype(np.float64) ** 2, np.zeros(x.shape)
    for c in range(x.shape[1]):
        total[:, c] = squares[:, max(0, c - (size - 1) // 2):c + size // 2 + 1].sum(axis=1)
    return (x / (bias + alpha / size * total) ** beta).astype(np.float32)


def _lrn(tmp_path, shape, size):
    x = {"x": (RNG.standard_normal(shape) * 3).astype(np.float32)}
    node = helper.make_node("LRN", ["x"], ["y"], size=size, alpha=2e-3, beta=0.75, bias=1.5)
    path, _ = _save(tmp_path, [node], x)
    return path, _reference(x["x"], size), x


@pytest.mark.parametrize("size", [1, 3, 5])
def test_lrn_is_one_kernel_with_onnx_values(size, tmp_path):
    """TVM's converter makes three kernels (square, a channel average pool, the divide)."""
    path, want, x = _lrn(tmp_path, (1, 24, 9, 7), size)
    result = Session(path).compile(BUILD_ONLY)
    assert len(result.kernels) == 1
    np.testing.assert_allclose(_run(result.executable, x), want, rtol=1e-5, atol=1e-6)


def test_an_even_lrn_window_is_onnx_s_asymmetric_one(tmp_path):
    """size 4 sums channels c-1..c+2; TVM's symmetric padding gave one channel too many."""
    path, want, x = _lrn(tmp_path, (2, 6, 5, 4), 4)
    result = Session(path).compile(BUILD_ONLY)
    np.testing.assert_allclose(_run(result.executable, x), want, rtol=1e-5, atol=1e-6)


def _vector_extents(func) -> list[int]:
    found = []
    tvm_ffi.structural_walk(func.body, (tirx.For, lambda f: found.append(int(f.extent))
                                        if f.kind == tirx.ForKind.VECTORIZED else None), order="pre")
    return found


def test_a_ragged_row_is_built_as_register_vectors_and_a_tail(tmp_path):
    """55 floats: the schedule keeps one vector of the row (what the analyses read), marked;
    the build splits it into vectors of the register width and a tail vector."""
    path, want, x = _lrn(tmp_path, (1, 8, 3, 55), 5)
    session = Session(path)
    target = get_target("llvm").target(None)
    lanes = vector_lanes(target)
    (func,) = [f for _, f in session.scheduled("llvm").module.functions_items() if isinstance(f, tirx.PrimFunc)]
    assert _vector_extents(func) == [55]
    split = split_ragged_rows(tvm.IRModule({"main": func}))["main"]
    assert sorted(_vector_extents(split)) == sorted([lanes, 55 % lanes])
    assert RAGGED_ROW not in str(split)
    result = session.compile(CompileOptions(timing=False))
    assert result.verification.passed
    np.testing.assert_allclose(_run(result.executable, x), want, rtol=1e-5, atol=1e-6)


def test_a_row_of_whole_vectors_is_not_marked(tmp_path):
    path, _, _ = _lrn(tmp_path, (1, 4, 3, 64), 3)
    (func,) = [f for _, f in Session(path).scheduled("llvm").module.functions_items()
               if isinstance(f, tirx.PrimFunc)]
    assert RAGGED_ROW not in str(func)


def test_a_window_of_no_channels_is_a_one_line_error(tmp_path):
    info = lambda name: helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, [1, 4, 3, 3])
    graph = helper.make_graph([helper.make_node("LRN", ["x"], ["y"], size=0)], "g", [info("x")], [info("y")])
    path = tmp_path / "lrn0.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    with pytest.raises(UnsupportedOpError, match="LRN: size must be at least 1, got 0"):
        Session(str(path)).compile(BUILD_ONLY)
