"""Kernels whose output shapes are known only at run time (engine/kernels.py).

Range, Compress, NonMaxSuppression, and Slice/Tile/Expand/Squeeze/Unsqueeze with tensor
bounds or axes give Relax symbolic dimensions (`range_len_0`). Our stages must compile them
as stock TVM does. The models are ONNX's node tests for these operators (the same single
node, its bounds and axes as graph inputs), checked against onnx's reference evaluator; the
verify stage's random inputs are not valid axes or repeats, so we stop after build and run
the cases' own data.
"""

import numpy as np
import onnx
import pytest
import tvm
from onnx import helper
from onnx.reference import ReferenceEvaluator
from tvm import relax

from engine.events import CompileOptions, Stage
from engine.kernels import is_static, list_kernels, shape_dims
from engine.pipeline import fuse_module
from engine.session import Session

BUILD_ONLY = CompileOptions(timing=False, stop_after=Stage.BUILD)


def _i64(*values):
    return np.array(values, np.int64)


def _x(*shape):
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


# name: (op, inputs in order, attributes), after onnx.backend.test.case.node.<op>
CASES = {
    "range_int32_negative_delta": ("Range", {"start": np.array(10, np.int32), "limit": np.array(6, np.int32),
                                             "delta": np.array(-3, np.int32)}, {}),
    "range_float_positive_delta": ("Range", {"start": np.array(1, np.float32), "limit": np.array(5, np.float32),
                                             "delta": np.array(0.5, np.float32)}, {}),
    "compress_0": ("Compress", {"input": _x(3, 2), "condition": np.array([0, 1, 1], bool)}, {"axis": 0}),
    "slice": ("Slice", {"x": _x(20, 10, 5), "starts": _i64(0, 0), "ends": _i64(3, 10), "axes": _i64(0, 1),
                        "steps": _i64(1, 1)}, {}),
    "slice_neg_steps": ("Slice", {"x": _x(20, 10, 5), "starts": _i64(20, 10, 4), "ends": _i64(0, 0, 1),
                                  "axes": _i64(0, 1, 2), "steps": _i64(-1, -3, -2)}, {}),
    "tile": ("Tile", {"x": _x(2, 3, 4, 5), "repeats": _i64(7, 6, 5, 4)}, {}),
    "expand_dim_unchanged": ("Expand", {"data": _x(3, 1), "new_shape": _i64(3, 4)}, {}),
    "squeeze": ("Squeeze", {"x": _x(1, 3, 4, 5), "axes": _i64(0)}, {}),
    "unsqueeze_unsorted_axes": ("Unsqueeze", {"x": _x(3, 4, 5), "axes": _i64(5, 4, 2)}, {}),
}


def _single_node(tmp_path, name, op, inputs, attrs):
    """A one-node model whose inputs all are graph inputs, as ONNX's node tests build them,
    and its expected output (onnx's reference evaluator)."""
    def info(n, a):
        return helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)

    def model(out):
        graph = helper.make_graph([helper.make_node(op, list(inputs), ["y"], **attrs)], name,
                                  [info(n, a) for n, a in inputs.items()], [out])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)

    (want,) = ReferenceEvaluator(model(helper.make_empty_tensor_value_info("y"))).run(None, inputs)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model(info("y", want)), path)
    return str(path), want


def _run(executable, inputs):
    out = relax.VirtualMachine(executable, tvm.cpu())["main"](*[tvm.runtime.tensor(a) for a in inputs.values()])
    return out.numpy()


def test_symbolic_dimensions_are_recorded_by_name():
    n = tvm.tirx.Var("n", "int64")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((n, 4), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.nn.relu(relax.op.exp(x)))
        bb.emit_func_output(out)
    kernels = list_kernels(fuse_module(bb.get()), [])
    assert [k.out_shape for k in kernels] == [("n", 4)]
    assert not kernels[0].static and is_static((2, 4)) and shape_dims(relax.TensorType((3,), "int32")) == (3,)


@pytest.mark.parametrize("name", list(CASES))
def test_node_case_with_symbolic_shapes_compiles(name, tmp_path):
    op, inputs, attrs = CASES[name]
    path, want = _single_node(tmp_path, name, op, inputs, attrs)
    result = Session(path).compile(BUILD_ONLY)
    assert any(not k.static for k in result.kernels), "the case no longer has a symbolic shape"
    np.testing.assert_allclose(_run(result.executable, inputs), want, rtol=1e-5, atol=1e-6)


def test_analyses_of_symbolic_kernels_degrade_instead_of_failing(tmp_path):
    """Block dependencies need static shapes: a kernel with symbolic ones maps its edges
    all-to-all with the reason, and proposals still come back."""
    path, _ = _single_node(tmp_path, "slice", *CASES["slice"])
    session = Session(path)
    deps = session.block_deps("llvm")
    assert any("symbolic shape of T_strided_slice_dynamic" in note for e in deps.edges for note in e.notes)
    session.propose("llvm")


def test_nonmaxsuppression_builds_and_runs_as_stock_tvm(tmp_path):
    """NMS's kernel wraps extern calls (argsort) in opaque blocks that read T_gather; our
    schedule inlined T_gather away ("Buffer T_gather is used before its definition").
    Its limits as initializers (how detection models export them): ONNX's answer. Given
    as runtime inputs, TVM's converter silently used 0 boxes: refused with one line."""
    from tvm.relax.frontend.onnx import from_onnx

    from engine.errors import UnsupportedOpError

    boxes = np.array([[0.0, 0.0, 1.0, 1.0], [0.0, 0.1, 1.0, 1.1], [0.0, -0.1, 1.0, 0.9],
                      [0.0, 10.0, 1.0, 11.0], [0.0, 10.1, 1.0, 11.1], [0.0, 100.0, 1.0, 101.0]], np.float32)
    inputs = {"boxes": np.stack([boxes, boxes]),
              "scores": np.array([[[0.9, 0.75, 0.6, 0.95, 0.5, 0.3]]] * 2, np.float32),
              "max_output_boxes_per_class": _i64(2), "iou_threshold": np.array([0.5], np.float32),
              "score_threshold": np.array([0.0], np.float32)}
    path, want = _single_node(tmp_path, "nms", "NonMaxSuppression", inputs, {})
    with pytest.raises(UnsupportedOpError, match="needs max_output_boxes_per_class, iou_threshold, "
                                                 "score_threshold as constants"):
        Session(path).compile(BUILD_ONLY)
    model = onnx.load(path)
    limits = [n for n in inputs if n not in ("boxes", "scores")]
    model.graph.initializer.extend(onnx.numpy_helper.from_array(inputs[n], n) for n in limits)
    kept = [vi for vi in model.graph.input if vi.name not in limits]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    onnx.save(model, path)
    data = {n: inputs[n] for n in ("boxes", "scores")}
    ours = Session(str(path)).compile(BUILD_ONLY).executable
    stock = tvm.compile(from_onnx(onnx.load(path), keep_params_in_input=False), target=tvm.target.Target({"kind": "llvm"}))
    np.testing.assert_array_equal(_run(ours, data), want)
    np.testing.assert_array_equal(_run(stock, data), want)
