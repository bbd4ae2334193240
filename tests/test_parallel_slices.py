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
                                       "fuse_slices": lambda funcs, names, concat, link, target:
                                       fuse_into_slices(funcs, names, concat, link)})
    monkeypatch.setitem(targets.TARGETS, "llvm", llvm.__class__(**{**llvm.__dict__, "fusion": codegen}))
    session = Session("inception_block")
    plan = session.propose("llvm").plan
    (d,) = _slices(plan)
    assert len(d.members) == 5  # four branches' last kernels and the concat
    result = session.compile(CompileOptions(plan=plan.with_approval(d.id), timing=False))
    assert result.verification.passed
    assert [o.result for o in result.fusion.decisions if o.id == d.id] == [DecisionResult.APPLIED]


def _two_convs(tmp_path, extra_reader: bool, relu: bool = False, bias: bool = True):
    """x -> conv a, x -> conv b, concat(a, b) on channels (then a relu, which FuseOps puts in
    the concat's kernel, with `relu`); with `extra_reader`, a is also an output of the model
    (a second reader)."""
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((4, 3, 1, 1)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((6, 3, 3, 3)).astype(np.float32), "w2")
    b1 = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b1")
    b2 = numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "b2")
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"][:3 if bias else 2], ["a"], name="conv_a"),
             helper.make_node("Conv", ["x", "w2", "b2"][:3 if bias else 2], ["b"], name="conv_b", pads=[1, 1, 1, 1]),
             helper.make_node("Concat", ["a", "b"], ["c" if relu else "y"], name="cat", axis=1)]
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["y"], name="relu"))
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10, 8, 8])]
    if extra_reader:
        nodes.append(helper.make_node("Relu", ["a"], ["r"], name="relu_a"))
        outputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, 4, 8, 8]))
    graph = helper.make_graph(nodes, "two_convs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              outputs, [w1, w2, b1, b2] if bias else [w1, w2])
    path = tmp_path / f"two_convs_{int(extra_reader)}{int(relu)}{int(bias)}.onnx"
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


def test_the_concat_epilogue_is_applied_as_the_producers_write(tmp_path):
    session = Session(_two_convs(tmp_path, False, relu=True))
    plan = session.propose("llvm").plan
    (d,) = _slices(plan)
    assert d.status is DecisionStatus.PROPOSED and "T.max(x" in d.evidence.slices.epilogue
    result = session.compile(CompileOptions(plan=plan.with_approval(d.id), timing=False))
    assert result.verification.passed and result.launches == 1  # the relu's negatives were there to clip


def test_an_epilogue_is_not_applied_to_a_producer_that_reads_its_output_back(tmp_path):
    # without a bias, the 3x3 conv's schedule accumulates in its output buffer: a relu applied
    # on every store would clip partial sums
    (d,) = _slices(Session(_two_convs(tmp_path, False, relu=True, bias=False)).propose("llvm").plan)
    assert d.status is DecisionStatus.REJECTED and "reads its output back" in d.reason


def _select(reverse: bool):
    from tvm.script import tirx as T

    @T.prim_func(private=True, s_tir=True)
    def select(a: T.Buffer((4,), "float32"), b: T.Buffer((4,), "float32"), out: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.sblock("T_concat"):
                vi = T.axis.spatial(8, i)
                out[vi] = T.if_then_else(4 <= vi, b[vi - 4], a[vi])

    @T.prim_func(private=True, s_tir=True)
    def reversed_select(a: T.Buffer((4,), "float32"), b: T.Buffer((4,), "float32"),
                        out: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.sblock("T_concat"):
                vi = T.axis.spatial(8, i)
                out[vi] = T.if_then_else(4 <= vi, b[7 - vi], a[vi])

    return reversed_select if reverse else select


def test_only_a_true_concatenation_is_a_concat_kernel():
    from engine.parallel.slices import concat_epilogue

    assert concat_epilogue(_select(reverse=False)).identity
    assert concat_epilogue(_select(reverse=True)) is None  # right shapes, but b is read reversed


def test_cuda_producers_share_one_launch_and_verify_in_emulation():
    session = Session("fire_module")
    plan = session.propose("cuda").plan
    (d,) = _slices(plan)
    assert d.status is DecisionStatus.PROPOSED and d.gain.threads_per_block > 0  # the fused launch's facts
    result = session.compile(CompileOptions(target="cuda", plan=plan.with_approval(d.id), timing=False))
    assert result.verification.passed and result.ran_on == "host emulation"
    assert (result.fusion.launches_before, result.fusion.launches_after) == (4, 2)


def _shuffled(tmp_path):
    """conv -> channel shuffle (reshape, transpose, reshape: groups of 2) -> conv."""
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.standard_normal((8, 8, 1, 1)).astype(np.float32), "w1"),
             numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b1"),
             numpy_helper.from_array(rng.standard_normal((8, 8, 1, 1)).astype(np.float32), "w2"),
             numpy_helper.from_array(np.array([1, 2, 4, 6, 6], np.int64), "s5"),
             numpy_helper.from_array(np.array([1, 8, 6, 6], np.int64), "s4")]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["a"], name="conv_a"),
             helper.make_node("Reshape", ["a", "s5"], ["r"], name="view"),
             helper.make_node("Transpose", ["r"], ["t"], name="shuffle", perm=[0, 2, 1, 3, 4]),
             helper.make_node("Reshape", ["t", "s4"], ["s"], name="view_back"),
             helper.make_node("Conv", ["s", "w2"], ["y"], name="conv_b")]
    graph = helper.make_graph(nodes, "shuffle", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 6, 6])], inits)
    path = tmp_path / "shuffle.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return str(path)


def test_a_channel_shuffle_is_written_in_shuffled_order(tmp_path):
    session = Session(_shuffled(tmp_path))
    plan = session.propose("llvm").plan
    (d,) = _slices(plan)
    assert d.status is DecisionStatus.PROPOSED and len(d.members) == 2
    link = d.evidence.slices
    assert link.axis == 1 and link.permutation == "j % 4 * 2 + j // 4"  # channel j of conv_a goes there
    result = session.compile(CompileOptions(plan=plan.with_approval(d.id), timing=False))
    assert result.verification.passed
    assert (result.fusion.launches_before, result.fusion.launches_after) == (3, 2)
    assert not any("transpose" in k.func for k in result.kernels)


def test_a_transpose_of_several_axes_is_not_a_permuting_copy():
    assert not _slices(Session("mha_block").propose("llvm").plan)  # its heads' reshape-transposes
