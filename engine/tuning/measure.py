"""Measuring candidate kernels with MetaSchedule's builder and runner (local or RPC).

Every candidate sent to a runner is counted (`CountingRunner`), so callers can show
that a compile which reuses the database measures nothing.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import tvm
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms

from engine.errors import BlockwiseError
from engine.tuning.options import RpcEndpoint  # noqa: F401 (re-exported)

# Same evaluator for tuning and for the default-vs-tuned comparison, so both are comparable.
EVALUATOR = dict(number=5, repeat=3, min_repeat_ms=50, enable_cpu_cache_flush=False)


def make_runner(rpc: RpcEndpoint | None = None, session_timeout_sec: int = 60):
    """A LocalRunner, or an RPCRunner sending measurements to devices behind a tracker."""
    config = ms.runner.EvaluatorConfig(**EVALUATOR)
    if rpc is None:
        return ms.runner.LocalRunner(timeout_sec=60, evaluator_config=config)
    rpc_config = ms.runner.RPCConfig(tracker_host=rpc.host, tracker_port=rpc.port, tracker_key=rpc.key,
                                     session_timeout_sec=session_timeout_sec)
    return ms.runner.RPCRunner(rpc_config=rpc_config, evaluator_config=config)


@derived_object
class CountingRunner(ms.runner.PyRunner):
    """Delegates to `inner` and counts the candidates it was asked to measure."""

    def __init__(self, inner) -> None:
        super().__init__()
        self.inner = inner
        self.count = 0

    def run(self, runner_inputs):
        self.count += len(runner_inputs)
        return self.inner.run(runner_inputs)


def device_type(target) -> str:
    """The runtime device name of a target kind ("llvm" runs on "cpu")."""
    kind = str(target.kind.name)
    return "cpu" if kind in ("llvm", "c") else kind


def measure_modules(mods: list[tvm.IRModule], target, builder, runner) -> list[float | None]:
    """Median seconds of each scheduled single-kernel module (`main`), None if it failed.

    Weight-repack blocks marked as layout-rewrite preprocessing are left out of the timing
    (the builder removes them; the runner feeds arrays of the packed shape), as they run
    once at compile time in a real build."""
    results = builder.build([ms.builder.BuilderInput(m, target) for m in mods])
    inputs, slots = [], []
    for i, (m, res) in enumerate(zip(mods, results)):
        if res.error_msg is None:
            args = ms.arg_info.ArgInfo.from_entry_func(m, remove_preproc=True)
            inputs.append(ms.runner.RunnerInput(res.artifact_path, device_type(target), args))
            slots.append(i)
    times: list[float | None] = [None] * len(mods)
    for i, future in zip(slots, runner.run(inputs) if inputs else []):
        out = future.result()
        if out.error_msg is None and out.run_secs:
            times[i] = statistics.median(float(s) for s in out.run_secs)
    return times


def check_tracker(rpc: RpcEndpoint, timeout_s: float = 5.0) -> int:
    """Fail fast, with one line, when the tracker is unreachable or has no device under the
    key; returns the number of free devices under it. (TVM's own
    client retries for a minute per connection and falls back silently.)"""
    import socket
    import struct

    from tvm.rpc import base

    where = f"RPC tracker {rpc.host}:{rpc.port}"
    try:
        with socket.create_connection((rpc.host, rpc.port), timeout=timeout_s) as sock:
            sock.settimeout(timeout_s)
            sock.sendall(struct.pack("<i", base.RPC_TRACKER_MAGIC))
            if struct.unpack("<i", base.recvall(sock, 4))[0] != base.RPC_TRACKER_MAGIC:
                raise BlockwiseError(f"{where} is not a TVM RPC tracker")
            base.sendjson(sock, [base.TrackerCode.SUMMARY])
            code, summary = base.recvjson(sock)
    except (OSError, ValueError, struct.error) as err:
        raise BlockwiseError(f"{where} is unreachable: {str(err) or type(err).__name__}") from None
    if code != base.TrackerCode.SUCCESS or not isinstance(summary, dict):
        raise BlockwiseError(f"{where} did not answer its summary request")
    queue = summary.get("queue_info", {}).get(rpc.key) or {}
    if not (queue.get("free", 0) > 0 or _registered(summary, rpc.key)):
        known = ", ".join(sorted(summary.get("queue_info", {}))) or "none"
        raise BlockwiseError(f"{where} has no device under key '{rpc.key}' (keys: {known})")
    return int(queue.get("free", 0))


def _registered(summary: dict, key: str) -> bool:
    return any(key in str(server.get("key", "")) for server in summary.get("server_info", []))
