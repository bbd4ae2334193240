"""Slice decisions: a concat's producers write straight into its output's slices."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine import targets
from engine.parallel.apply import DecisionResult
from engine.parallel.plan import DecisionKind, DecisionStatus
from engine.parallel.slices import concat_axis, fuse_into_slices
from engine.pipeline import CompileOptions
from engine.session import Session


def _slices(plan):
    return [d for d in plan.decisions if d.kind is DecisionKind.VERTICAL_SLICES]


def test_concat_axis():
    assert concat_axis([(1, 64, 55, 55), (1, 64, 55, 55)], (1, 128, 55, 55)) == 1
    assert concat_axis([(1, 8, 4), (1, 8, 12)], (1, 8, 16)) == 2
    assert concat_axis([(1, 64, 5, 5), (1, 32, 5, 5)], (1, 128, 5, 5)) is None


def test_fire_module_expands_write_into_the_concat():
    session = Session("fire_module")
    plan = session.propose("llvm").plan
    (d,) = _slices(plan)
    assert d.status is DecisionStatus.PROPOSED
    assert [m.labels[0] for m in d.members][-1].endswith("concat")
    link = d.evidence.slices
    assert (link.axis, link.offsets, link.extents) == (1, (0, 64), (64, 64))
    assert d.gain.kept_bytes == 4 * 128 * 28 * 28 and d.gain.launches_saved == 2
    result = session.compile(CompileOptions(plan=plan.with_approval(d.id), timing=False))
    assert result.verification.passed
    assert [o.result for o in result.fusion.decisions if o.id == d.id] == [DecisionResult.APPLIED]
    funcs = [k.func for k in result.kernels]
    assert not any(f.startswith("concatenate") for f in funcs)  # no copy is launched
    assert (result.fusion.launches_before, result.fusion.launches_after) == (4, 2)
    fused = next(k for k in result.kernels if k.func.startswith("sfused"))
    assert tuple(fused.out_shape) == (1, 128, 28, 28)


def test_producers_run_one_after_the_other_when_not_fused_horizontally(monkeypatch):
    """The fallback: each producer's own loops in turn, each writing its slice."""
    llvm = targets.get_target("llvm")
    codegen = llvm.fusion.__class__(**{**llvm.fusion.__dict__,
                                       "fuse_slices": lambda funcs, names, link, target:
                                       fuse_into_slices(funcs, names, link)})
    monkeypatch.setitem(targets.TARGETS, "llvm", llvm.__class__(**{**llvm.__dict__, "fusion": codegen}))
    session = Session("inception_block")
    plan = session.propose("llvm").plan
    (d,) = _slices(plan)
    assert len(d.members) == 5  # four branches' last kernels and the concat
    result = session.compile(CompileOptions(plan=plan.with_approval(d.id), timing=False))
    assert result.verification.passed
    assert [o.result for o in result.fusion.decisions if o.id == d.id] == [DecisionResult.APPLIED]


def _two_convs(tmp_path, extra_reader: bool):
    """x -> conv a, x -> conv b, concat(a, b) on channels; with `extra_reader`, a is also
    an output of the model (a second reader)."""
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((4, 3, 1, 1)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((6, 3, 3, 3)).astype(np.float32), "w2")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="conv_a"),
             helper.make_node("Conv", ["x", "w2"], ["b"], name="conv_b", pads=[1, 1, 1, 1]),
             helper.make_node("Concat", ["a", "b"], ["y"], name="cat", axis=1)]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10, 8, 8])]
    if extra_reader:
        nodes.append(helper.make_node("Relu", ["a"], ["r"], name="relu_a"))
        outputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, 4, 8, 8]))
    graph = helper.make_graph(nodes, "two_convs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              outputs, [w1, w2])
    path = tmp_path / f"two_convs_{int(extra_reader)}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return str(path)


@pytest.mark.parametrize("extra_reader", [False, True])
def test_a_producer_read_elsewhere_keeps_the_copy(tmp_path, extra_reader):
    session = Session(_two_convs(tmp_path, extra_reader))
    (d,) = _slices(session.propose("llvm").plan)
    if extra_reader:
        assert d.status is DecisionStatus.REJECTED and "read by more than the concat" in d.reason
    else:
        assert d.status is DecisionStatus.PROPOSED
        result = session.compile(CompileOptions(plan=session.propose("llvm").plan.with_approval(d.id),
                                                timing=False))
        assert result.verification.passed and result.launches == 1
