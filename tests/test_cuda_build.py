"""CUDA builds of what the engine generates: names nvcc accepts, fused kernels the build
does not merge again."""

import shutil

import onnx
from onnx import TensorProto, helper

from engine.events import CompileOptions
from engine.parallel.codegen import GPU_CODEGEN
from engine.parallel.plan import DecisionKind
from engine.parallel.tir_util import OP_PATTERN_OPAQUE
from engine.session import Session
from engine.targets import get_target


def test_input_names_that_are_not_c_identifiers_build(tmp_path):
    """resnet50's input is `gpu_0/data_0`: TVM prints it into the CUDA source as it is."""
    x = helper.make_tensor_value_info("gpu_0/data_0", TensorProto.FLOAT, [1, 8, 4, 4])
    y = helper.make_tensor_value_info("out.1", TensorProto.FLOAT, [1, 8, 4, 4])
    graph = helper.make_graph([helper.make_node("Relu", ["gpu_0/data_0"], ["out.1"], name="relu")], "g", [x], [y])
    path = tmp_path / "names.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    result = Session(str(path)).compile(CompileOptions(target="cuda"))
    assert result.verification.passed
    if shutil.which("nvcc"):
        assert any(n.startswith("nvcc compiled") for n in result.notes)


def test_fused_kernels_are_opaque_to_the_builds_own_fusion():
    """cuda's tvm.compile re-runs FuseOps: a fused kernel it could merge with a neighbour
    would allocate the intermediate inside the launch (resnet50: "Cannot allocate global
    memory when targeting CUDA")."""
    session = Session("fire_module")
    plan = session.propose("cuda").plan
    mod = session.scheduled("cuda").module
    target = get_target("cuda").target()
    for d in plan.decisions:
        funcs = [mod[m.func] for m in d.members]
        names = [m.func for m in d.members]
        fused = (GPU_CODEGEN.vertical(*funcs, names, d.evidence.link, target)
                 if d.kind is DecisionKind.VERTICAL_BLOCK else GPU_CODEGEN.fuse(funcs, names, target, None))
        assert int(fused.attrs["op_pattern"]) == OP_PATTERN_OPAQUE, d.id
