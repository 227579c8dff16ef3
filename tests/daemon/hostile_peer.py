"""A control.sock client that floods and never reads its replies (receive high-water mark 1), in its own process.

    python -m tests.daemon.hostile_peer ENDPOINT status|garbage|replay:TASK SECONDS

`status` sends well-formed status requests, `garbage` random bytes, `replay:TASK` requests for the
task's whole history (replies of megabytes), each as fast as the daemon takes them. It prints `flooding`
once connected (its hello carrying the client token, as a misbehaving client of the user's own would) and
its first frame is sent, floods for SECONDS (a bound, so a test whose daemon stopped
reading fails instead of hanging), then prints how many frames it sent.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import zmq

from yagent.ipc.client_token import read_client_token
from yagent.ipc.messages import PROTOCOL_VERSION, Hello, Replay, StatusRequest
from yagent.ipc.records import encode
from yagent.ipc.runtime_dir import runtime_paths
from yagent.ipc.sockets import random_identity

__all__ = ["flood"]


def flood(endpoint: str, kind: str, seconds: float) -> int:
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.RCVHWM, 1)
    sock.setsockopt(zmq.SNDHWM, 1000)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.IDENTITY, random_identity())
    sock.connect(endpoint)
    token = read_client_token(runtime_paths(Path(endpoint.removeprefix("ipc://")).parent).token)
    # Not waited for (the daemon may share the test's loop): it is read first, so what follows is authenticated.
    sock.send(encode(Hello(id=0, version=PROTOCOL_VERSION, pid=os.getpid(), token=token)))
    if kind == "status":
        frames = [encode(StatusRequest(id=i + 1)) for i in range(1000)]
    elif kind.startswith("replay:"):
        frames = [encode(Replay(id=i + 1, task=kind.removeprefix("replay:"), limit=5000)) for i in range(1000)]
    else:
        frames = [os.urandom(16 + i % 300) for i in range(1000)]
    sock.send(frames[0])
    print("flooding", flush=True)
    sent = 1
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            sock.send(frames[sent % 1000], flags=zmq.NOBLOCK)
            sent += 1
        except zmq.Again:  # our own send queue is full: the daemon takes them slower than we make them
            time.sleep(0.0005)
    sock.close(0)
    ctx.term()
    return sent


if __name__ == "__main__":
    print(f"sent {flood(sys.argv[1], sys.argv[2], float(sys.argv[3]))}", flush=True)
