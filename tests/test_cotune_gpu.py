"""Co-tuning of fused CUDA groups (engine.tuning.cotune_gpu) ranked by the launch estimator
(engine.tuning.gpu_estimate): the search finds a known optimum, the estimator sees the tail,
and a compile with --cotune-trials on cuda records estimated figures and verifies."""

import itertools
from dataclasses import dataclass

import pytest

from engine.gpu_devices import device_for_arch
from engine.parallel.codegen.gpu_horizontal import GpuLayout
from engine.tuning.cotune_gpu import cotune_gpu
from engine.tuning.gpu_estimate import MemberLoad, Rates, launch_us

H100 = device_for_arch("sm_90")
RATES = Rates(flops_per_us_per_sm=50_000.0, bytes_per_us=3.35e6, launch_us=3.0)


def _load(name, blocks, flops, threads=128):
    return MemberLoad(name, flops, 0.0, blocks, threads, threads, 0)


def test_long_blocks_first_shortens_the_tail():
    """Two waves' worth of short blocks and a few long ones: issued last, the long blocks
    start when the short ones end and the launch lasts their whole length longer."""
    long = _load("long", 132, 132 * 4e6)
    short = _load("short", 132 * 16 * 2, 132 * 16 * 2 * 1e5)
    assert launch_us([long, short], H100, RATES) < launch_us([short, long], H100, RATES)


@dataclass(frozen=True)
class SyntheticGroup:
    """Members whose estimate depends on the thread count (block count = work / threads) and
    on the order; `cotune_gpu` needs only names, thread_choices and estimate_us."""

    names: tuple = ("a", "b", "c")
    work: tuple = (132 * 64 * 1e6, 132 * 3 * 2e7, 132 * 40 * 1e6)  # flops
    threads_of_a_block: tuple = (4096 * 64, 396 * 128, 5280 * 128)  # thread-blocks x threads (fixed)

    def thread_choices(self, only=None):
        return [64, 128, 256, 512, 1024]

    def loads(self, layout):
        t = layout.threads
        members = [_load(n, max(1, total // t), w, t) for n, w, total in zip(self.names, self.work,
                                                                              self.threads_of_a_block)]
        order = layout.order if layout.order is not None else range(len(members))
        return [members[i] for i in order]

    def estimate_us(self, layout, only=None):
        return launch_us(self.loads(layout), H100, RATES)


def test_search_finds_the_estimators_optimum():
    group = SyntheticGroup()
    space = [GpuLayout(t, o) for t in group.thread_choices() for o in itertools.permutations(range(3))]
    best = min(space, key=group.estimate_us)
    worst = max(space, key=group.estimate_us)
    assert group.estimate_us(worst) > 1.2 * group.estimate_us(best)  # the knobs matter here
    found = cotune_gpu(group, trials=32)
    assert found.estimated_us == pytest.approx(group.estimate_us(best), rel=1e-9)
    assert found.points == len(space) + len(group.thread_choices())  # every order, plus "member order"


@pytest.fixture(scope="module")
def inception_block_cuda():
    from engine.events import CompileOptions
    from engine.session import Session
    from engine.tuning.options import TuneOptions

    session = Session("inception_block")
    proposed = session.propose("cuda").plan
    # the co-tuned groups: the two branch stages (a slice decision would take the second)
    plan = proposed.with_approval(",".join(d.id for d in proposed.decisions if not d.kind.vertical))
    return session.compile(CompileOptions(target="cuda", plan=plan, runs=3,
                                          tuning=TuneOptions(trials=0, cotune_trials=16)))


def test_cuda_compile_cotunes_every_group_estimated(inception_block_cuda):
    result = inception_block_cuda
    assert result.verification.passed
    assert {r.decision for r in result.cotuned} == {"d0", "d1"}
    for rec in result.cotuned:
        assert rec.basis == "estimated" and "estimated" in rec.note()
        assert rec.cotuned_us <= rec.separate_us  # the joint search includes the baseline's point
        assert rec.to_json()["basis"] == "estimated"


def test_fused_groups_share_one_thread_count_and_overlay_shared_memory(inception_block_cuda):
    """ptxas: each fused kernel has 128 threads (the maxpool regrouped from 1024-thread
    blocks, nothing padded) and the shared memory of one member, not the sum."""
    result = inception_block_cuda
    res = {k.kernel: k for k in result.kernel_resources}
    if not res:
        pytest.skip("nvcc not installed: no ptxas facts")
    for name in ("hfused_d0_kernel", "hfused_d1_kernel"):
        assert res[name].threads_per_block == 128
    fused = [res["hfused_d0_kernel"], res["hfused_d1_kernel"]]
    assert all(f.shared_bytes <= 6912 for f in fused)  # one 1x1 conv's tile; the sum is 3x
