"""Distributed measurement: tuning through a TVM RPC tracker and a CPU server on 127.0.0.1."""

import socket
import subprocess
import sys
import time

import pytest

from engine.targets import get_target
from engine.tuning import RpcEndpoint, TuneOptions, TuneStore, tune_module
from tests.test_tuning import matmul_module


def _free_port_range(width: int) -> int:
    """A base port such that base..base+width are free now."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + width >= 65535:
            continue
        try:
            for p in range(base, base + width + 1):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
    raise RuntimeError("no free port range")


@pytest.fixture
def rpc_cluster():
    tracker_port = _free_port_range(1)
    server_port = _free_port_range(10)
    procs = [subprocess.Popen([sys.executable, "-m", "tvm.exec.rpc_tracker", "--host", "127.0.0.1",
                               "--port", str(tracker_port), "--port-end", str(tracker_port + 1)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        _wait_for_listen(tracker_port)
        procs.append(subprocess.Popen([sys.executable, "-m", "tvm.exec.rpc_server", "--host", "127.0.0.1",
                                       "--port", str(server_port), "--port-end", str(server_port + 10),
                                       "--tracker", f"127.0.0.1:{tracker_port}", "--key", "cpu"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _wait_for_device(tracker_port, "cpu")
        yield RpcEndpoint("127.0.0.1", tracker_port, "cpu")
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


def _wait_for_listen(port: int, timeout: float = 60) -> None:
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError("the RPC tracker did not start")


def _wait_for_device(port: int, key: str, timeout: float = 60) -> None:
    from tvm import rpc

    end = time.time() + timeout
    while time.time() < end:
        try:
            if key in rpc.connect_tracker("127.0.0.1", port).summary().get("queue_info", {}):
                return
        except Exception:  # pylint: disable=broad-except
            pass
        time.sleep(1)
    raise RuntimeError("the RPC server did not register with the tracker")


@pytest.mark.slow
def test_tuning_measures_through_the_rpc_tracker(rpc_cluster, tmp_path):
    target = get_target("llvm").target(None)
    store = TuneStore(tmp_path / "mm-llvm")
    options = TuneOptions(trials=4, rpc=rpc_cluster, trials_per_kernel=4, trials_per_round=4)
    _, report = tune_module(matmul_module(128), target, get_target("llvm").schedule_one, store, options)
    (record,) = report.records
    assert report.measured >= 4
    assert record.default_s is not None and record.tuned_s is not None  # timed on the RPC device


def test_rpc_endpoint_parses():
    assert RpcEndpoint.parse("127.0.0.1:9190:cpu") == RpcEndpoint("127.0.0.1", 9190, "cpu")
    with pytest.raises(Exception, match="HOST:PORT:KEY"):
        RpcEndpoint.parse("localhost:cpu")
