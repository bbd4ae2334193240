"""The permuted GPU emulator (engine/runtime/permuted.py, poison.py) FAILS kernels a GPU
could get wrong, where the serial emulator passes them: a missing barrier between a
producer and a consumer thread loop, a block reading what another block wrote (a too-loose
block map), a block reading another block's shared memory, an output element never
written. Correct dlight kernels still verify against onnxruntime.
"""

import numpy as np
import onnxruntime as ort
import pytest
import tvm
from tvm import relax
from tvm.script import tirx as T

from engine.model import load_model
from engine.opgraph import build_operator_graph
from engine.pipeline import fuse_module
from engine.relax_import import import_relax
from engine.runtime.emulation import emulate_func, emulate_on_cpu, thread_bound_loops
from engine.runtime.permuted import affine_order
from engine.schedule.gpu import schedule_module

H100 = tvm.target.Target("nvidia/nvidia-h100")
LLVM = tvm.target.Target({"kind": "llvm"})


def _run(func, inputs, outs, permuted, seed=1, call_site=True):
    """Emulate ``func`` (params: ``inputs``, then the outputs) and return the outputs.

    ``call_site``: tell the emulator which params are outputs, as a call_tir does
    (emulate_on_cpu reads it from the Relax caller); else it poisons written-only params.
    """
    n_inputs = len(inputs) if call_site else None
    emulated = emulate_func(func.with_attr("global_symbol", "k"), "k", permuted, seed, n_inputs)
    lib = tvm.compile(tvm.IRModule({"k": emulated}), target=LLVM)
    out = [tvm.runtime.tensor(o.copy()) for o in outs]
    lib["k"](*[tvm.runtime.tensor(x) for x in inputs], *out)
    return [o.numpy() for o in out] if len(out) > 1 else out[0].numpy()


# --- a fused producer/consumer block: barrier or not -------------------------------------

@T.prim_func(s_tir=True)
def _mirror_synced(A: T.Buffer((512,), "float32"), C: T.Buffer((512,), "float32")):
    B = T.sblock_alloc_buffer((512,))
    for blk in T.thread_binding(4, thread="blockIdx.x"):
        for t in T.thread_binding(128, thread="threadIdx.x"):
            with T.sblock("produce"):
                vb, vt = T.axis.remap("SS", [blk, t])
                B[vb * 128 + vt] = A[vb * 128 + vt] * T.float32(2)
        T.evaluate(T.tvm_storage_sync("shared"))
        for t in T.thread_binding(64, thread="threadIdx.x"):  # half the threads: two each
            with T.sblock("consume"):
                vb, vt = T.axis.remap("SS", [blk, t])
                C[vb * 128 + vt] = B[vb * 128 + 127 - vt] + T.float32(1)
                C[vb * 128 + 127 - vt] = B[vb * 128 + vt] + T.float32(1)


@T.prim_func(s_tir=True)
def _mirror_unsynced(A: T.Buffer((512,), "float32"), C: T.Buffer((512,), "float32")):
    B = T.sblock_alloc_buffer((512,))
    for blk in T.thread_binding(4, thread="blockIdx.x"):
        for t in T.thread_binding(128, thread="threadIdx.x"):
            with T.sblock("produce"):
                vb, vt = T.axis.remap("SS", [blk, t])
                B[vb * 128 + vt] = A[vb * 128 + vt] * T.float32(2)
        for t in T.thread_binding(64, thread="threadIdx.x"):  # half the threads: two each
            with T.sblock("consume"):
                vb, vt = T.axis.remap("SS", [blk, t])
                C[vb * 128 + vt] = B[vb * 128 + 127 - vt] + T.float32(1)
                C[vb * 128 + 127 - vt] = B[vb * 128 + vt] + T.float32(1)


# thread t reads what thread t-1 wrote: serial threads (t-1 first) get it right even when
# the two loops run as one, so only a permuted thread order shows the missing barrier
@T.prim_func(s_tir=True)
def _neighbour_synced(A: T.Buffer((512,), "float32"), C: T.Buffer((512,), "float32")):
    B = T.sblock_alloc_buffer((512,))
    for blk in T.thread_binding(4, thread="blockIdx.x"):
        for t in T.thread_binding(128, thread="threadIdx.x"):
            with T.sblock("produce"):
                vb, vt = T.axis.remap("SS", [blk, t])
                B[vb * 128 + vt] = A[vb * 128 + vt] * T.float32(2)
        T.evaluate(T.tvm_storage_sync("shared"))
        for t in T.thread_binding(128, thread="threadIdx.x"):
            with T.sblock("consume"):
                vb, vt = T.axis.remap("SS", [blk, t])
                C[vb * 128 + vt] = B[vb * 128 + T.max(vt - 1, 0)] + T.float32(1)


@T.prim_func(s_tir=True)
def _neighbour_unsynced(A: T.Buffer((512,), "float32"), C: T.Buffer((512,), "float32")):
    B = T.sblock_alloc_buffer((512,))
    for blk in T.thread_binding(4, thread="blockIdx.x"):
        for t in T.thread_binding(128, thread="threadIdx.x"):
            with T.sblock("produce"):
                vb, vt = T.axis.remap("SS", [blk, t])
                B[vb * 128 + vt] = A[vb * 128 + vt] * T.float32(2)
        for t in T.thread_binding(128, thread="threadIdx.x"):
            with T.sblock("consume"):
                vb, vt = T.axis.remap("SS", [blk, t])
                C[vb * 128 + vt] = B[vb * 128 + T.max(vt - 1, 0)] + T.float32(1)


def _mirror_want(a):
    return (a.reshape(4, 128)[:, ::-1] * 2 + 1).reshape(-1)


def _neighbour_want(a):
    b = a.reshape(4, 128) * 2
    return (np.concatenate([b[:, :1], b[:, :127]], axis=1) + 1).reshape(-1)


@pytest.mark.parametrize("synced, unsynced, want", [
    (_mirror_synced, _mirror_unsynced, _mirror_want),
    (_neighbour_synced, _neighbour_unsynced, _neighbour_want),
], ids=["mirror", "neighbour"])
def test_missing_barrier_fails_only_when_permuted(synced, unsynced, want):
    a = np.random.default_rng(0).random(512, dtype="float32")
    zeros = np.zeros(512, "float32")
    np.testing.assert_allclose(_run(synced, [a], [zeros], permuted=True), want(a), rtol=1e-6)
    # today's serial emulator passes the racy kernel: loop after loop, as if synced
    np.testing.assert_allclose(_run(unsynced, [a], [zeros], permuted=False), want(a), rtol=1e-6)
    got = _run(unsynced, [a], [zeros], permuted=True)
    assert np.isnan(got).any(), "consumers ran before their producers: they must read poison"


# --- a block reading the block before it (a block map wrongly one-to-one) ----------------

@T.prim_func(s_tir=True)
def _reads_previous_block(A: T.Buffer((256,), "float32"), B: T.Buffer((256,), "float32"),
                          C: T.Buffer((256,), "float32")):
    # B: an intermediate output in global memory, as a block-level vertical fusion keeps it
    for blk in T.thread_binding(8, thread="blockIdx.x"):
        for t in T.thread_binding(32, thread="threadIdx.x"):
            with T.sblock("produce"):
                vb, vt = T.axis.remap("SS", [blk, t])
                B[vb * 32 + vt] = A[vb * 32 + vt] * T.float32(2)
        T.evaluate(T.tvm_storage_sync("shared"))
        for t in T.thread_binding(32, thread="threadIdx.x"):
            with T.sblock("consume"):
                vb, vt = T.axis.remap("SS", [blk, t])
                C[vb * 32 + vt] = B[vb * 32 + vt] + T.if_then_else(
                    vb > 0, B[T.max(vb - 1, 0) * 32 + vt], T.float32(0))


def _previous_block_want(a):
    b = a.reshape(8, 32) * 2
    return (b + np.concatenate([np.zeros((1, 32), "float32"), b[:-1]])).reshape(-1)


@pytest.mark.parametrize("seed", [1, 2, 7])
def test_block_reading_another_block_fails_only_when_permuted(seed):
    a = np.random.default_rng(1).random(256, dtype="float32")
    zeros = np.zeros(256, "float32")
    _, c = _run(_reads_previous_block, [a], [zeros, zeros], permuted=False)
    np.testing.assert_allclose(c, _previous_block_want(a), rtol=1e-6)
    b, c = _run(_reads_previous_block, [a], [zeros, zeros], permuted=True, seed=seed)
    np.testing.assert_allclose(b, a * 2, rtol=1e-6)
    assert np.isnan(c).any(), f"seed {seed}: some block ran before the block it reads"


# --- shared memory is private to a block ------------------------------------------------

@T.prim_func(s_tir=True)
def _reads_other_block_shared(A: T.Buffer((256,), "float32"), P: T.Buffer((8,), "int32"),
                              C: T.Buffer((256,), "float32")):
    # block b also reads the shared tile of block P[b]; the index comes from an input, so
    # that the llvm build cannot shrink S to one block's part (serial blocks then share it)
    S = T.sblock_alloc_buffer((256,), scope="shared")
    for blk in T.thread_binding(8, thread="blockIdx.x"):
        for t in T.thread_binding(32, thread="threadIdx.x"):
            with T.sblock("stage"):
                vb, vt = T.axis.remap("SS", [blk, t])
                S[vb * 32 + vt] = A[vb * 32 + vt] * T.float32(2)
        T.evaluate(T.tvm_storage_sync("shared"))
        for t in T.thread_binding(32, thread="threadIdx.x"):
            with T.sblock("consume"):
                vb, vt = T.axis.remap("SS", [blk, t])
                C[vb * 32 + vt] = S[vb * 32 + vt] + T.if_then_else(vb > 0, S[P[vb] * 32 + vt], T.float32(0))


def test_shared_memory_of_another_block_reads_poison():
    a = np.random.default_rng(2).random(256, dtype="float32")
    prev = np.array([0, 0, 1, 2, 3, 4, 5, 6], "int32")  # block b reads block b-1's tile
    zeros = np.zeros(256, "float32")
    np.testing.assert_allclose(_run(_reads_other_block_shared, [a, prev], [zeros], permuted=False),
                               _previous_block_want(a), rtol=1e-6)
    got = _run(_reads_other_block_shared, [a, prev], [zeros], permuted=True).reshape(8, 32)
    np.testing.assert_allclose(got[0], a[:32] * 2, rtol=1e-6)  # block 0 reads only its own tile
    assert np.isnan(got[1:]).all(), "every other block read the shared tile of another block"


# --- outputs hold poison until written ---------------------------------------------------

@T.prim_func(s_tir=True)
def _short_grid(A: T.Buffer((256,), "float32"), C: T.Buffer((256,), "float32")):
    for blk in T.thread_binding(7, thread="blockIdx.x"):  # one block short: C[224:] unwritten
        for t in T.thread_binding(32, thread="threadIdx.x"):
            with T.sblock("copy"):
                vb, vt = T.axis.remap("SS", [blk, t])
                C[vb * 32 + vt] = A[vb * 32 + vt]


@pytest.mark.parametrize("call_site", [True, False])
def test_unwritten_output_reads_poison_not_leftovers(call_site):
    a = np.random.default_rng(3).random(256, dtype="float32")
    leftovers = a.copy()  # the buffer still holds a previous run's (right) answer
    np.testing.assert_array_equal(_run(_short_grid, [a], [leftovers], permuted=False), a)
    got = _run(_short_grid, [a], [leftovers], permuted=True, call_site=call_site)
    np.testing.assert_array_equal(got[:224], a[:224])
    assert np.isnan(got[224:]).all()


# --- the orders themselves ---------------------------------------------------------------

@pytest.mark.parametrize("extent", [3, 8, 25, 128, 1000])
def test_affine_order_is_a_non_identity_bijection(extent):
    orders = set()
    for seed in range(1, 6):
        a, c = affine_order(extent, f"{seed}:k:1")
        assert a != 1 and np.gcd(a, extent) == 1
        order = tuple((a * i + c) % extent for i in range(extent))
        assert sorted(order) == list(range(extent))
        assert affine_order(extent, f"{seed}:k:1") == (a, c)  # deterministic
        orders.add(order)
        assert affine_order(extent, f"{seed}:k:1", fix_zero=True)[1] == 0
    assert len(orders) > 1  # seeds give different orders


# --- correct dlight kernels still verify -------------------------------------------------

def _check_permuted_against_onnxruntime(spec, seeds=(1, 2)):
    model = load_model(spec)
    sched = schedule_module(fuse_module(import_relax(model, build_operator_graph(model)).mod), H100)
    inputs = model.random_inputs(0)
    sess = ort.InferenceSession(model.proto.SerializeToString(), providers=["CPUExecutionProvider"])
    ref = sess.run(None, inputs)
    for seed in seeds:
        emulated = emulate_on_cpu(sched, permuted=True, seed=seed)
        for gv, f in emulated.functions_items():
            if isinstance(f, tvm.tirx.PrimFunc):
                assert thread_bound_loops(f) == [], gv.name_hint
                assert "block_i" in f.script(), gv.name_hint  # blocks run in a permuted loop
        vm = relax.VirtualMachine(tvm.compile(emulated, target=LLVM), tvm.cpu())
        out = vm["main"](*[tvm.runtime.tensor(inputs[p.name]) for p in emulated["main"].params])
        outs = [out] if hasattr(out, "numpy") else list(out)
        assert len(outs) == len(ref)
        for got, want in zip(outs, ref):
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4)


def test_dlight_fire_module_verifies_permuted():
    _check_permuted_against_onnxruntime("sample_models/fire_module.onnx")


def test_dlight_cross_thread_reductions_verify_permuted():
    """mha_block: softmax is two cross-thread reductions (max, sum of exp) over threadIdx.x;
    permuted threads only change the rounding. Their init must still run first (thread 0
    keeps its place), or a late init would wipe the threads that ran before it."""
    _check_permuted_against_onnxruntime("sample_models/mha_block.onnx")
