"""How many CPU cores the llvm kernels are scheduled for, and TVM's runtime told so.

Without TVM_NUM_THREADS, TVM's runtime sizes its thread pool as hardware_concurrency / 2
on x86 (it assumes two hyper-threads per core). On a machine whose logical CPUs are all
separate cores, e.g. a 2-vCPU VM, every parallel kernel then ran on one thread: measured
here, a 512x512x512 matmul took 1.39 ms with the default pool and 0.66 ms with 2 threads.
So the engine counts physical cores itself and sets TVM_NUM_THREADS (unless the user set
it) before the first kernel runs; measuring subprocesses inherit it.

TVM also pins each pool thread to one CPU by default. With any other busy process on one of
those CPUs, every parallel kernel then waits for the pinned thread's time slice: squeezenet
ran 2.2 -> 156 ms with a spinning process on CPU 1 of 2 (onnxruntime 1.65 -> 7.0 ms), and
2.2 -> 4.2 ms unpinned; alone, pinned and unpinned time the same (squeezenet, resnet50,
mobilenet_block, three alternating runs, 2-core EPYC). So the engine sets TVM_BIND_THREADS=0
unless the user set it.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "TVM_NUM_THREADS"


def physical_cores() -> int:
    """Distinct (package, core) pairs among the CPUs this process may run on."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
    cores = set()
    for cpu in cpus:
        topo = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            cores.add((topo.joinpath("physical_package_id").read_text().strip(),
                       topo.joinpath("core_id").read_text().strip()))
        except OSError:  # no topology (not Linux, or hidden): count the CPU itself
            cores.add(("cpu", str(cpu)))
    return max(1, len(cores))


def cpu_threads() -> int:
    """Threads for CPU kernels: TVM_NUM_THREADS when the user set it, else physical cores."""
    try:
        return max(1, int(os.environ[ENV]))
    except (KeyError, ValueError):
        return physical_cores()


BIND_ENV = "TVM_BIND_THREADS"


def configure_runtime() -> int:
    """Set TVM_NUM_THREADS to `cpu_threads()` and TVM_BIND_THREADS to 0 (unpinned), each
    unless set; returns the thread count. TVM reads them when a thread first launches a
    parallel kernel (its pool is per thread)."""
    n = cpu_threads()
    os.environ.setdefault(ENV, str(n))
    os.environ.setdefault(BIND_ENV, "0")
    return n
