"""LSTM, GRU and RNN (engine/converters/rnn.py): ONNX's own node test cases, onnxruntime on
random inputs for what those cases leave out (bidirectional with states, layout 1, shorter
sequence_lens, clip, peepholes, activations, linear_before_reset, input_forget), the
binding -> operator link, the hoisted gate projections proposed as one parallel group, and
the recurrent and torch-export samples compiled and verified by `workbench compile`."""

from __future__ import annotations

import importlib
from collections import Counter

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import tvm
from onnx import TensorProto, helper, numpy_helper
from tvm import relax

from engine.events import CompileOptions, Stage
from engine.parallel.plan import DecisionKind, DecisionStatus
from engine.relax_import import import_relax
from engine.runtime.verify import output_arrays
from engine.session import Session

BUILD_ONLY = CompileOptions(timing=False, stop_after=Stage.BUILD)
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def _node_cases(op: str) -> list:
    """onnx's node test cases of one operator (onnx.backend.test.case.node.<op>), made the way
    collect_testcases makes them: importing the module runs its exports into the shared list,
    for the op type named in `_TargetOpType`."""
    import onnx.backend.test.case.node as node_tests

    def mine():
        return [c for c in node_tests._NodeTestCases if c.model.graph.node[0].op_type == op]

    saved = node_tests._TargetOpType
    node_tests._TargetOpType = op
    try:
        module = importlib.import_module(f"onnx.backend.test.case.node.{op.lower()}")
        if not mine():  # imported before under another op type's filter: export again
            exporter = getattr(module, op)
            for name in dir(exporter):
                if name.startswith("export"):
                    getattr(exporter, name)()
    finally:
        node_tests._TargetOpType = saved
    return mine()


NODE_CASES = {c.name: c for op in GATES for c in _node_cases(op)}


def _run(result, feeds: dict) -> list[np.ndarray]:
    vm = relax.VirtualMachine(result.executable, tvm.cpu())
    return output_arrays(vm["main"](*[tvm.runtime.tensor(np.asarray(a)) for a in feeds.values()]))


def test_every_recurrent_node_case_of_onnx_is_collected():
    assert len(NODE_CASES) == 18  # 6 LSTM, 6 GRU, 6 RNN (test_lstm_*, test_gru_*, test_rnn_*, test_simple_rnn_*)


@pytest.mark.parametrize("name", sorted(NODE_CASES))
def test_onnx_node_case(name, tmp_path):
    case = NODE_CASES[name]
    path = tmp_path / f"{name}.onnx"
    onnx.save(case.model, path)
    inputs, expected = case.data_sets[0]
    feeds = {vi.name: a for vi, a in zip(case.model.graph.input, inputs)}
    got = _run(Session(str(path)).compile(BUILD_ONLY), feeds)
    assert [g.shape for g in got] == [np.asarray(e).shape for e in expected]
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def _model(op: str, layout: int, direction: str = "forward", steps: int = 4, batch: int = 3, size: int = 5,
           hidden: int = 6, states: bool = True, lens=None, lens_input: bool = False, peepholes: bool = False,
           weights_input: bool = False, **attrs) -> tuple[onnx.ModelProto, dict]:
    """One recurrent node named 'cell' with every output; weights and sequence_lens are
    initializers (graph inputs with weights_input, lens_input), X and the initial states graph
    inputs. Arrays are drawn for layout 0 and transposed for layout 1, so both layouts of one
    seed compute the same."""
    rng = np.random.default_rng(0)
    dirs, gates = (2 if direction == "bidirectional" else 1), GATES[op]
    x = rng.standard_normal((steps, batch, size)).astype(np.float32)
    h0, c0 = (rng.standard_normal((dirs, batch, hidden)).astype(np.float32) for _ in range(2))
    weights = [("W", (dirs, gates * hidden, size)), ("R", (dirs, gates * hidden, hidden)),
               ("B", (dirs, 2 * gates * hidden))]
    drawn = {n: (rng.standard_normal(s) * 0.5).astype(np.float32) for n, s in weights}
    inits = [] if weights_input else [numpy_helper.from_array(a, n) for n, a in drawn.items()]
    feeds = {"X": x.transpose(1, 0, 2) if layout else x, **(drawn if weights_input else {})}
    names = ["X", "W", "R", "B", ""]
    if lens is not None:
        names[4] = "sequence_lens"
        if lens_input:
            feeds["sequence_lens"] = np.asarray(lens, np.int32)
        else:
            inits.append(numpy_helper.from_array(np.asarray(lens, np.int32), "sequence_lens"))
    for name, state in (("initial_h", h0), ("initial_c", c0))[:2 if op == "LSTM" else 1]:
        names.append(name if states else "")
        if states:
            feeds[name] = state.transpose(1, 0, 2) if layout else state
    if peepholes:
        names.append("P")
        inits.append(numpy_helper.from_array((rng.standard_normal((dirs, 3 * hidden)) * 0.5).astype(np.float32), "P"))
    while not names[-1]:
        names.pop()
    outs = ["Y", "Y_h", "Y_c"][:3 if op == "LSTM" else 2]
    node = helper.make_node(op, names, outs, name="cell", hidden_size=hidden, direction=direction, layout=layout,
                            **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype),
                                                                          a.shape) for n, a in feeds.items()],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
    return onnx.shape_inference.infer_shapes(model), feeds


def _onnxruntime(op: str, **kw) -> list[np.ndarray]:
    """onnxruntime's outputs, for layout 1 from the layout-0 twin (onnxruntime's CPU kernels
    reject layout 1; onnx's reference implementation ignores sequence_lens)."""
    layout = kw.pop("layout", 0)
    model, feeds = _model(op, 0, **kw)
    outs = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    if layout:
        outs = [outs[0].transpose(2, 0, 1, 3)] + [s.transpose(1, 0, 2) for s in outs[1:]]
    return outs


ORT_CASES = {
    "lstm bidirectional layout 1": ("LSTM", dict(layout=1, direction="bidirectional")),
    "gru bidirectional layout 1": ("GRU", dict(layout=1, direction="bidirectional")),
    "rnn reverse layout 1, shorter lengths": ("RNN", dict(layout=1, direction="reverse", lens=[3, 4, 1])),
    "lstm bidirectional, peepholes, clip": ("LSTM", dict(direction="bidirectional", peepholes=True, clip=0.7)),
    "lstm bidirectional, shorter constant lengths": ("LSTM", dict(direction="bidirectional", lens=[4, 2, 3])),
    "lstm reverse, shorter lengths, no states": ("LSTM", dict(direction="reverse", lens=[3, 4, 1], states=False,
                                                               peepholes=True)),
    "gru bidirectional, lengths as an input": ("GRU", dict(direction="bidirectional", lens=[1, 4, 2], lens_input=True)),
    "gru bidirectional, linear_before_reset": ("GRU", dict(direction="bidirectional", linear_before_reset=1)),
    "gru reverse, linear_before_reset, no states": ("GRU", dict(direction="reverse", linear_before_reset=1,
                                                                 states=False)),
    "lstm activations with alpha and beta": ("LSTM", dict(direction="bidirectional", activations=[
        "HardSigmoid", "LeakyRelu", "Relu", "Sigmoid", "Tanh", "Tanh"], activation_alpha=[0.3, 0.05],
        activation_beta=[0.4])),
    "gru Affine and ScaledTanh": ("GRU", dict(direction="bidirectional", activations=[
        "Sigmoid", "Affine", "HardSigmoid", "ScaledTanh"], activation_alpha=[0.5, 0.3, 0.8],
        activation_beta=[0.1, 0.6, 1.3])),
    "rnn default alphas": ("RNN", dict(direction="bidirectional", activations=["LeakyRelu", "ThresholdedRelu"])),
    "gru default HardSigmoid": ("GRU", dict(activations=["HardSigmoid", "Softsign"])),
    "rnn Elu": ("RNN", dict(activations=["Elu"], activation_alpha=[0.7], states=False)),
    "lstm input_forget, shorter lengths": ("LSTM", dict(input_forget=1, lens=[2, 4, 3], states=False)),
}


@pytest.mark.parametrize("name", sorted(ORT_CASES))
def test_matches_onnxruntime(name, tmp_path):
    op, kw = ORT_CASES[name]
    model, feeds = _model(op, **{"layout": 0, **kw})
    onnx.save(model, tmp_path / "m.onnx")
    got = _run(Session(str(tmp_path / "m.onnx")).compile(BUILD_ONLY), feeds)
    expected = _onnxruntime(op, **dict(kw))
    assert [g.shape for g in got] == [e.shape for e in expected]
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)
    if kw.get("lens"):  # past a sequence's end Y is zero
        y = got[0] if not kw.get("layout") else got[0].transpose(1, 2, 0, 3)
        for b, n in enumerate(kw["lens"]):
            assert not y[n:, :, b].any() and y[:n, :, b].all()


def test_an_unsupported_activation_is_one_clear_line(cli, tmp_path):
    model, _ = _model("GRU", 0, activations=["Sigmoid", "Gelu"])
    onnx.save(model, tmp_path / "gelu.onnx")
    r = cli("compile", str(tmp_path / "gelu.onnx"), "--no-export")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    # besides the progress lines ("[    import] fail ..."), one line: no TVM warning after it
    assert [line for line in r.stderr.splitlines() if not line.startswith("[ ")] == [
        "workbench: error: GRU node 'cell': activation Gelu is not supported"]


@pytest.mark.parametrize("op, kw", [
    ("LSTM", dict(weights_input=True, input_forget=1, peepholes=True, lens=[2, 4, 3], lens_input=True)),
    ("GRU", dict(weights_input=True, layout=1, direction="bidirectional", lens=[4, 1, 3])),
    ("RNN", dict(weights_input=True, states=False, clip=0.5)),
], ids=["lstm", "gru", "rnn"])
def test_every_binding_belongs_to_the_node_even_with_weights_as_inputs(op, kw, tmp_path):
    """No dead binding reads a graph input (it would belong to no operator), such as the
    forget gate's weights and peephole under input_forget."""
    model, _ = _model(op, **{"layout": 0, **kw})
    onnx.save(model, tmp_path / "m.onnx")
    session = Session(str(tmp_path / "m.onnx"))
    imported = import_relax(session.model, session.graph)
    bindings = [b.var for blk in imported.mod["main"].body.blocks for b in blk.bindings]
    assert {imported.owner.get(v) for v in bindings} == {session.graph.nodes[0].id}


def test_every_binding_of_the_cell_belongs_to_the_cell():
    """The binding -> operator link: all of the unrolled LSTM's bindings are the LSTM's; the
    other operators keep one binding each."""
    session = Session("lstm_block")
    imported = import_relax(session.model, session.graph)
    owners = Counter(imported.owner.get(b.var) for blk in imported.mod["main"].body.blocks for b in blk.bindings)
    assert owners.pop("lstm/LSTM") > 16 * 5
    assert owners == {op: 1 for op in ("lstm/Transpose", "lstm/Squeeze", "lstm/Transpose_1", "head/matmul",
                                       "head/add")}


@pytest.mark.parametrize("sample, cell, members", [("lstm_block", "lstm", 4), ("bigru_block", "gru", 6)])
def test_gate_projections_are_proposed_as_one_parallel_group(sample, cell, members):
    """The input projections hoisted out of the recurrence, one matmul per gate (and
    direction), read the model input: one horizontal decision over all of them."""
    proposal = Session(sample).propose("llvm")
    (group,) = proposal.groups
    assert group.fork == "input" and len(group.branches) == members
    (decision,) = [d for d in proposal.plan.decisions if d.kind is DecisionKind.HORIZONTAL]
    assert decision.status is DecisionStatus.PROPOSED and decision.stage == 0
    assert len(decision.members) == members and {m.ops for m in decision.members} == {(f"{cell}/{cell.upper()}",)}
    assert group.stages[0].same_input and group.stages[0].legality.legal


@pytest.mark.parametrize("sample", ["lstm_block", "bigru_block", "shufflenet_unit"])
def test_workbench_compile_verifies_the_sample(cli, sample):
    r = cli("compile", f"sample_models/{sample}.onnx", "--no-export", "--runs", "2")
    assert r.returncode == 0, r.stderr
    assert "verify       OK" in r.stdout


@pytest.mark.slow
def test_the_fused_gate_projections_still_verify(cli):
    """With the gate-projection group applied (apply plan takes ~14 s on 2 cores)."""
    r = cli("compile", "lstm_block", "--approve", "all", "--no-export", "--runs", "2")
    assert r.returncode == 0, r.stderr
    assert "verify       OK" in r.stdout and "48 launches" in r.stdout
