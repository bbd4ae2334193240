"""GPU schedules (engine/schedule/gpu.py) checked on the CPU (engine/runtime/emulation.py).

dlight-schedule a model for nvidia/nvidia-h100, check every kernel is thread-bound, emit
CUDA source, then run the emulated (serial, llvm) kernels and compare with onnxruntime.
No GPU needed.
"""

import numpy as np
import onnxruntime as ort
import pytest
import tvm
from tvm import relax
from tvm.script import tirx as T

from engine.runtime.emulation import EmulationError, emulate_func, emulate_on_cpu, thread_bound_loops
from engine.schedule.gpu import OP_PATTERN_OPAQUE, cuda_source, is_thread_bound, schedule_module, thread_tags
from engine.model import load_model
from engine.opgraph import build_operator_graph
from engine.pipeline import fuse_module
from engine.relax_import import import_relax

H100 = tvm.target.Target("nvidia/nvidia-h100")
LLVM = tvm.target.Target({"kind": "llvm"})


def _fused(spec):
    model = load_model(spec)
    mod = import_relax(model, build_operator_graph(model)).mod
    return model, fuse_module(mod)


def _prim_funcs(mod):
    return {gv.name_hint: f for gv, f in mod.functions_items() if isinstance(f, tvm.tirx.PrimFunc)}


def _check_against_onnxruntime(model, emulated):
    vm = relax.VirtualMachine(tvm.compile(emulated, target=LLVM), tvm.cpu())
    inputs = model.random_inputs(0)
    out = vm["main"](*[tvm.runtime.tensor(inputs[p.name]) for p in emulated["main"].params])
    outs = [out] if hasattr(out, "numpy") else list(out)
    sess = ort.InferenceSession(model.proto.SerializeToString(), providers=["CPUExecutionProvider"])
    ref = sess.run(None, inputs)
    assert len(outs) == len(ref)
    for got, want in zip(outs, ref):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4)


@pytest.fixture(scope="module")
def fire():
    model, mod = _fused("sample_models/fire_module.onnx")
    return model, mod, schedule_module(mod, H100)


def test_schedule_binds_every_kernel(fire):
    _, mod, sched = fire
    funcs = _prim_funcs(sched)
    assert funcs and set(funcs) == set(_prim_funcs(mod))
    for name, func in funcs.items():
        tags = thread_tags(func)
        assert any(t.startswith("blockIdx.") for t in tags), name
        assert any(t.startswith("threadIdx.") for t in tags), name
        assert is_thread_bound(func) and func.attrs["tirx.is_scheduled"]
        assert int(func.attrs["op_pattern"]) == OP_PATTERN_OPAQUE
    # the input module is left alone (dlight's pass would update it in place)
    assert not any(thread_tags(f) for f in _prim_funcs(mod).values())


def test_emulated_matches_onnxruntime(fire):
    model, _, sched = fire
    emulated = emulate_on_cpu(sched)
    for name, func in _prim_funcs(emulated).items():
        assert thread_bound_loops(func) == [], name
        assert 'scope="shared"' not in func.script() and 'scope="local"' not in func.script(), name
    # the GPU-scheduled module itself is untouched
    assert all(thread_bound_loops(f) for f in _prim_funcs(sched).values())
    _check_against_onnxruntime(model, emulated)


def test_cuda_source_is_emitted(fire):
    _, _, sched = fire
    ex = tvm.compile(sched, target=H100)
    src = cuda_source(ex)
    assert "__global__" in src
    # tvm.compile's own pipeline neither re-fuses nor re-schedules the kernels
    for name in _prim_funcs(sched):
        assert f" {name}_kernel(" in src, name


@T.prim_func(s_tir=True)
def _cooperative(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    S = T.sblock_alloc_buffer((64,), scope="shared")
    L = T.sblock_alloc_buffer((64,), scope="local")
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            for tx2 in T.thread_binding(64, thread="threadIdx.x"):
                with T.sblock("fetch"):
                    v = T.axis.spatial(64, tx2)
                    S[v] = A[v] * T.float32(2)
            with T.sblock("use"):
                v = T.axis.spatial(64, tx)
                L[v] = S[63 - v] + T.float32(1)
            with T.sblock("out"):
                v = T.axis.spatial(64, tx)
                B[v] = L[v]


@T.prim_func(s_tir=True)
def _exchange_hazard(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    S = T.sblock_alloc_buffer((64,), scope="shared")
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            with T.sblock("w"):
                v = T.axis.spatial(64, tx)
                S[v] = A[v] * T.float32(2)
            for tx2 in T.thread_binding(64, thread="threadIdx.x"):
                with T.sblock("r"):
                    v = T.axis.spatial(64, tx2)
                    B[v] = S[63 - v]


@T.prim_func(s_tir=True)
def _warp_shuffle(A: T.Buffer((32,), "float32"), B: T.Buffer((32,), "float32")):
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            with T.sblock("w"):
                v = T.axis.spatial(32, tx)
                B[v] = T.tvm_warp_shuffle(T.uint32(0xFFFFFFFF), A[v], 0, 32, 32)


def test_cooperative_fetch_kernel():
    """A shared tile filled by a re-bound thread loop and read across threads."""
    lib = tvm.compile(emulate_on_cpu(tvm.IRModule({"coop": _cooperative.with_attr("global_symbol", "coop")})), target=LLVM)
    a = np.arange(64, dtype="float32")
    b = tvm.runtime.tensor(np.zeros(64, "float32"))
    lib["coop"](tvm.runtime.tensor(a), b)
    np.testing.assert_allclose(b.numpy(), a[::-1] * 2 + 1)


@pytest.mark.parametrize(
    "func, message",
    [(_exchange_hazard, "re-bound to a thread tag reads S"), (_warp_shuffle, "tvm_warp_shuffle")],
)
def test_unemulatable_kernels_are_named(func, message):
    with pytest.raises(EmulationError, match=message) as err:
        emulate_func(func, "my_kernel")
    assert "my_kernel" in str(err.value)


@pytest.mark.slow
def test_inception_v1_emulated_matches_onnxruntime():
    model, mod = _fused("zoo:inception_v1")
    sched = schedule_module(mod, H100)
    assert all(is_thread_bound(f) for f in _prim_funcs(sched).values())
    _check_against_onnxruntime(model, emulate_on_cpu(sched))
