"""A control.sock client that floods and never reads its replies (receive high-water mark 1), in its own process.

    python -m tests.daemon.hostile_peer ENDPOINT status|garbage|replay:TASK SECONDS

`status` sends well-formed status requests, `garbage` random bytes, `replay:TASK` requests for the
task's whole history (replies of megabytes), each as fast as the daemon takes them. It prints `flooding`
once connected and its first frame is sent, floods for SECONDS (a bound, so a test whose daemon stopped
reading fails instead of hanging), then prints how many frames it sent.
"""

from __future__ import annotations

import os
import sys
import time

import zmq

from yagent.ipc.messages import Replay, StatusRequest
from yagent.ipc.records import encode

__all__ = ["flood"]


def flood(endpoint: str, kind: str, seconds: float) -> int:
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.RCVHWM, 1)
    sock.setsockopt(zmq.SNDHWM, 1000)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(endpoint)
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
