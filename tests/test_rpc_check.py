"""`--rpc` fails fast with one line: an unreachable tracker, or one with no device under the key."""

import json
import socket
import struct
import threading
import time

import pytest

from engine.errors import BlockwiseError
from engine.tuning.measure import check_tracker
from engine.tuning.options import RpcEndpoint

MAGIC = 193137  # tvm.rpc.base.RPC_TRACKER_MAGIC


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def fake_tracker():
    """A tracker speaking TVM's protocol, with one device under key 'cpu'."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.settimeout(10)

    def serve():
        try:
            conn, _ = server.accept()
        except OSError:
            return
        with conn:
            conn.recv(4)
            conn.sendall(struct.pack("<i", MAGIC))
            size = struct.unpack("<i", conn.recv(4))[0]
            conn.recv(size)
            reply = json.dumps([0, {"queue_info": {"cpu": {"free": 1, "pending": 0}}, "server_info": []}])
            conn.sendall(struct.pack("<i", len(reply)) + reply.encode())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    server.close()
    thread.join(5)


def test_unreachable_tracker_fails_in_seconds():
    start = time.perf_counter()
    with pytest.raises(BlockwiseError, match="unreachable"):
        check_tracker(RpcEndpoint("127.0.0.1", _free_port(), "cpu"), timeout_s=2)
    assert time.perf_counter() - start < 5


def test_tracker_without_the_key_names_the_keys_it_has(fake_tracker):
    with pytest.raises(BlockwiseError, match=r"no device under key 'gpu' \(keys: cpu\)"):
        check_tracker(RpcEndpoint("127.0.0.1", fake_tracker, "gpu"))


def test_tracker_with_the_key_passes(fake_tracker):
    assert check_tracker(RpcEndpoint("127.0.0.1", fake_tracker, "cpu")) == 1
