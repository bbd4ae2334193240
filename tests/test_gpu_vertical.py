"""CUDA block-level vertical fusion (engine.parallel.codegen.gpu_vertical), kernel by kernel:
the fused pair and its two members, each run in the permuted emulator on the same random
inputs, give the same outputs; thread counts are unified without padding to an independent
member's threads."""

import numpy as np
import pytest
import tvm

from engine.parallel.codegen import GPU_CODEGEN
from engine.parallel.codegen.gpu import gpu_member
from engine.parallel.plan import DecisionKind
from engine.runtime.emulation import emulate_func
from engine.schedule.gpu import thread_tags
from engine.session import Session
from engine.targets import get_target

LLVM = tvm.target.Target({"kind": "llvm"})


def _run(func, inputs, n_out_shapes):
    """Emulate `func` permuted; inputs then zero outputs of the given (shape, dtype)."""
    emulated = emulate_func(func.with_attr("global_symbol", "k"), "k", True, 3, len(inputs))
    lib = tvm.compile(tvm.IRModule({"k": emulated}), target=LLVM)
    outs = [tvm.runtime.tensor(np.zeros(s, d)) for s, d in n_out_shapes]
    lib["k"](*[tvm.runtime.tensor(x) for x in inputs], *outs)
    return [o.numpy() for o in outs]


def _spec(var):
    return tuple(int(d) for d in var.ty.shape), str(var.dtype)


def _check_pair(model: str, labels: tuple[str, str]):
    session = Session(model)
    plan = session.propose("cuda").plan
    (d,) = [d for d in plan.decisions if d.kind is DecisionKind.VERTICAL_BLOCK
            and (d.members[0].labels[0], d.members[1].labels[0]) == labels]
    mod = session.scheduled("cuda").module
    p, c = (mod[m.func] for m in d.members)
    link = d.evidence.link
    fused = GPU_CODEGEN.vertical(p, c, [m.func for m in d.members], link, get_target("cuda").target())
    rng = np.random.default_rng(0)
    p_in = [rng.standard_normal(_spec(v)[0]).astype(_spec(v)[1]) for v in p.params[:-1]]
    (mid,) = _run(p, p_in, [_spec(p.params[-1])])
    c_in = [rng.standard_normal(_spec(v)[0]).astype(_spec(v)[1]) for v in c.params[:-1]]
    c_in[link.consumer_param] = mid.reshape(_spec(c.params[link.consumer_param])[0])
    (want,) = _run(c, c_in, [_spec(c.params[-1])])
    others = [x for i, x in enumerate(c_in) if i != link.consumer_param]
    got_mid, got = _run(fused, p_in + others, [_spec(p.params[-1]), _spec(c.params[-1])])
    np.testing.assert_allclose(got_mid, mid, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    return d, fused


def test_matmul_then_softmax_fuses_with_the_reductions_threads():
    """mha_block: qk matmul (128 threads, shared tiles) -> softmax (256 threads, cross-thread
    reduction): the pair gets 256 threads, the matmul's 128 predicated."""
    d, fused = _check_pair("mha_block", ("attn/qk_matmul", "attn/softmax"))
    assert d.gain.threads_per_block == 256 and 0 < d.gain.idle_threads < 0.5
    assert len(gpu_member(fused, "fused").stages) == 1 and "threadIdx.x" in thread_tags(fused)


def test_one_to_one_conv_pair_with_several_consumer_blocks_per_producer_block():
    d, _ = _check_pair("fire_module", ("squeeze1x1/conv", "expand1x1/conv"))
    assert d.gain.idle_threads == 0.0


@pytest.mark.slow
def test_softmax_then_elementwise_coarsens_the_independent_member():
    """squeezenet's softmax: reduction (256 threads) -> elementwise (1024 threads, each alone):
    the fused kernel keeps 256 threads, each doing 4 of the elementwise threads' work."""
    d, _ = _check_pair("zoo:squeezenet", ("conv10/softmax", "conv10/softmax"))
    assert d.gain.threads_per_block == 256 and d.gain.idle_threads == 0.0
