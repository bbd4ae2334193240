"""Property: the planner never groups dependent kernels, and every plan it proposes compiles
to the model's outputs.

Small random DAG models (seeded; forks, joins by Add and Concat, multi-output Split,
Reshape views, Transpose, elementwise ops, small MatMuls and 1x1 Convs on [1, C, H, W]
tensors with H*W = 16) are planned for llvm. For each, no horizontal decision may hold an
ancestor/descendant pair, neither in the kernel DAG nor between the members' operators in
the ONNX operator graph; and compiling with every decision approved must verify against
onnxruntime (the pipeline's verify stage raises otherwise) with no decision rolled back.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import networkx as nx
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine.events import CompileOptions
from engine.parallel.outcome import DecisionResult
from engine.parallel.plan import DecisionKind, DecisionStatus
from engine.session import Session

SEEDS = range(16)
_SPATIAL = ((4, 4), (2, 8), (8, 2))  # every value is [1, C, H, W] with H * W = 16


def random_dag_model(seed: int) -> onnx.ModelProto:
    """A random DAG of 8-14 operators reading one input [1, 8, 4, 4]; every value nothing
    reads is a graph output. Deterministic for a seed."""
    rng = np.random.default_rng(seed)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    values: list[tuple[str, int, tuple[int, int]]] = [("input", 8, (4, 4))]  # name, C, (H, W)
    read: set[str] = set()

    def const(array: np.ndarray) -> str:
        name = f"c{len(inits)}"
        inits.append(numpy_helper.from_array(array, name))
        return name

    def emit(op: str, ins: list[str], shapes: list[tuple[int, tuple[int, int]]], **attrs) -> None:
        name = f"{op.lower()}{len(nodes)}"
        outs = [f"{name}_{i}" for i in range(len(shapes))] if len(shapes) > 1 else [name]
        nodes.append(helper.make_node(op, ins, outs, name=f"g/{name}", **attrs))
        read.update(ins)
        values.extend((o, c, hw) for o, (c, hw) in zip(outs, shapes))

    def pick():
        """Mostly a value nothing reads yet (chains), sometimes any value (forks)."""
        fresh = [v for v in values if v[0] not in read]
        pool = fresh if fresh and rng.random() < 0.6 else values
        return pool[rng.integers(len(pool))]

    for _ in range(int(rng.integers(8, 15))):
        x, c, (h, w) = pick()
        kind = rng.choice(["unary", "scale", "conv", "matmul", "reshape", "transpose",
                           "add", "concat", "split"],
                          p=[.12, .08, .14, .12, .1, .06, .14, .12, .12])
        partners = [v for v in values if v[0] != x and v[1:] == (c, (h, w))]
        joinable = [v for v in values if v[0] != x and v[2] == (h, w) and v[1] + c <= 16]
        if kind == "unary":
            emit(str(rng.choice(["Relu", "Sigmoid", "Tanh"])), [x], [(c, (h, w))])
        elif kind == "scale":
            emit("Mul", [x, const(np.array([rng.uniform(0.5, 1.5)], np.float32))], [(c, (h, w))])
        elif kind == "conv":
            co = int(rng.choice([4, 8]))
            wt = (rng.standard_normal((co, c, 1, 1)) / np.sqrt(c)).astype(np.float32)
            bias = (0.1 * rng.standard_normal(co)).astype(np.float32)
            emit("Conv", [x, const(wt), const(bias)], [(co, (h, w))], kernel_shape=[1, 1])
        elif kind == "matmul":
            wt = (rng.standard_normal((w, w)) / np.sqrt(w)).astype(np.float32)
            emit("MatMul", [x, const(wt)], [(c, (h, w))])
        elif kind == "reshape":
            nh, nw = _SPATIAL[rng.integers(len(_SPATIAL))]
            emit("Reshape", [x, const(np.array([1, c, nh, nw], np.int64))], [(c, (nh, nw))])
        elif kind == "transpose":
            emit("Transpose", [x], [(c, (w, h))], perm=[0, 1, 3, 2])
        elif kind == "add" and partners:
            emit("Add", [x, partners[rng.integers(len(partners))][0]], [(c, (h, w))])
        elif kind == "concat" and joinable:
            y, cy, _ = joinable[rng.integers(len(joinable))]
            emit("Concat", [x, y], [(c + cy, (h, w))], axis=1)
        elif kind == "split" and c >= 4:
            parts = int(rng.integers(2, min(4, c // 2) + 1))
            sizes = [c // parts] * (parts - 1) + [c - (c // parts) * (parts - 1)]
            emit("Split", [x, const(np.array(sizes, np.int64))], [(s, (h, w)) for s in sizes], axis=1)
        else:  # a join with nothing to join, or too few channels to split
            emit("Relu", [x], [(c, (h, w))])

    outputs = [helper.make_tensor_value_info(v, TensorProto.FLOAT, [1, c, h, w])
               for v, c, (h, w) in values[1:] if v not in read]
    graph = helper.make_graph(nodes, f"random_dag_{seed}",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 8, 4, 4])],
                              outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(model, full_check=True)
    return model


def _dependent_pairs(decision, kg, graph: nx.DiGraph) -> list[tuple[int, int]]:
    """Member pairs joined by a path in the kernel DAG or between their operators (ending
    at an operator only that member computes: one split over several kernels is no end)."""
    listed = Counter(o for k in kg.kernels for o in set(k.ops))

    def op_path(a, b):
        return any(x != y and listed[y] == 1 and nx.has_path(graph, x, y) for x in a.ops for y in b.ops)

    ms = decision.members
    return [(a.kernel, b.kernel) for i, a in enumerate(ms) for b in ms[i + 1:]
            if nx.has_path(kg.dag, a.kernel, b.kernel) or nx.has_path(kg.dag, b.kernel, a.kernel)
            or op_path(a, b) or op_path(b, a)]


@pytest.fixture(scope="module")
def proposed_counts():
    return []


@pytest.mark.parametrize("seed", SEEDS)
def test_random_dag_plans_are_antichains_and_verify(seed, tmp_path, proposed_counts):
    path = tmp_path / f"random_dag_{seed}.onnx"
    onnx.save(random_dag_model(seed), str(path))
    session = Session(str(path))
    proposal = session.propose("llvm")
    horizontal = [d for d in proposal.plan.decisions if not d.kind.vertical]
    for d in horizontal:
        assert not _dependent_pairs(d, proposal.graph, session.graph.dag), (seed, d.id, d.members)
        assert d.status is not DecisionStatus.PROPOSED or d.evidence.no_path
    for d in proposal.plan.decisions:  # a concat's producers writing into its slices: parallel too
        if d.kind is DecisionKind.VERTICAL_SLICES and d.status is DecisionStatus.PROPOSED:
            producers = replace(d, members=d.members[:-1])
            assert not _dependent_pairs(producers, proposal.graph, session.graph.dag), (seed, d.id)
    proposed_counts.append(sum(d.status is DecisionStatus.PROPOSED for d in horizontal))

    result = session.compile(CompileOptions(plan=proposal.plan.with_approval("all"), runs=1,
                                            timing=False))
    assert result.verification is not None and result.verification.passed
    rolled_back = [d for d in result.fusion.decisions if d.result is DecisionResult.ROLLED_BACK]
    assert not rolled_back, rolled_back


def test_random_dags_have_parallel_structure(proposed_counts):
    """The models are not trivially sequential: the planner found groups in several."""
    if len(proposed_counts) < len(SEEDS):
        pytest.skip("runs after the per-model checks")
    assert sum(1 for n in proposed_counts if n) >= len(SEEDS) // 3
