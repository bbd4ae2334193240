"""The llvm target's core count and TVM's runtime thread pool agree (engine.cores)."""

import os
import subprocess
import sys

from engine.cores import physical_cores

PROBE = ("from engine.targets import get_target; import tvm; "
         "t = get_target('llvm').target(None); "
         "print(int(t.attrs['num-cores']), tvm.get_global_func('runtime.NumThreads')())")


def _probe(**env) -> tuple[int, int]:
    clean = {k: v for k, v in os.environ.items() if k not in ("TVM_NUM_THREADS", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True,
                         text=True, check=True, timeout=120).stdout.split()
    return int(out[0]), int(out[1])


def test_runtime_uses_every_physical_core():
    # TVM alone would take hardware_concurrency / 2 threads on x86
    assert _probe() == (physical_cores(), physical_cores())


def test_a_user_thread_count_wins():
    assert _probe(TVM_NUM_THREADS="1") == (1, 1)


def test_physical_cores_within_the_affinity_mask():
    assert 1 <= physical_cores() <= len(os.sched_getaffinity(0))
