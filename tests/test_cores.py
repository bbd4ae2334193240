"""The llvm target's core count and TVM's runtime thread pool agree (engine.cores)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

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


PINNING = """
import os, glob
import numpy as np, tvm
from tvm.script import tirx as T
from engine.targets import get_target

@T.prim_func
def double(a: T.Buffer((64,), "float32"), b: T.Buffer((64,), "float32")):
    for i in T.parallel(64):
        b[i] = a[i] * 2.0

lib = tvm.compile(tvm.IRModule({"main": double}), target=get_target("llvm").target(None))
a = tvm.runtime.tensor(np.ones(64, "float32"))
b = tvm.runtime.tensor(np.zeros(64, "float32"))
lib["main"](a, b)  # the pool starts here
masks = set()
for status in glob.glob("/proc/self/task/*/status"):
    line = [ln for ln in open(status) if ln.startswith("Cpus_allowed_list")][0]
    masks.add(line.split(":")[1].strip())
print(len(masks), sorted(masks))
"""


def _masks(script, **env) -> int:
    """How many different CPU masks the threads of a process that ran a parallel kernel have."""
    clean = {k: v for k, v in os.environ.items() if k != "TVM_BIND_THREADS"}
    root = str(Path(__file__).resolve().parent.parent)
    out = subprocess.run([sys.executable, str(script)], env={**clean, "PYTHONPATH": root, **env},
                         capture_output=True, text=True, check=True, timeout=120).stdout.split()
    return int(out[0])


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2 or physical_cores() < 2, reason="needs two cores")
def test_pool_threads_are_not_pinned_unless_the_user_asks(tmp_path):
    """Pinned pool threads wait for their CPU when another process runs there (squeezenet
    2.2 -> 156 ms with one busy CPU of 2): the engine leaves them unpinned."""
    script = tmp_path / "pinning.py"  # TVMScript reads its source: a file, not -c
    script.write_text(PINNING)
    assert _masks(script) == 1  # every thread may run on every CPU of the process
    assert _masks(script, TVM_BIND_THREADS="1") > 1  # the user's setting wins: pinned threads
