"""Event throughput worker → daemon → subscribed client, against bare pyzmq loops measured in the same run.

A real yagentd (forkserver, scripted test agent) streams N small events; a client follows the task with the
gap-filling EventStream. Prints:
- events/s at saturation and the ratio against a bare two-process PUSH/PULL loop (one 40-byte frame each);
- on a paced stream (one event a millisecond), p50/p95 latency worker emit → client receipt, against the same
  path with nothing of ours in it: an asyncio DEALER → ROUTER relay → PUB → SUB chain in three processes;
- where the CPU went: the daemon's and the client's CPU time per event at saturation.
Targets (issue 20): ≥ 30 % of the bare PUSH/PULL figure; paced p50 ≤ 300 µs.
Usage: python bench/event_throughput.py [N]
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgpack
import zmq
import zmq.asyncio

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.daemon_harness import DaemonProcess, script, submit  # noqa: E402
from yagent.ipc import EventStream  # noqa: E402


def _bare_sender(endpoint: str, n: int) -> None:
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    push.connect(endpoint)
    payload = b"x" * 40
    for _ in range(n):
        push.send(payload)
    push.send(b"")
    push.close(linger=-1)
    ctx.term()


def bare_baseline(n: int) -> float:
    root = Path(tempfile.mkdtemp(prefix="ygb-", dir="/tmp"))
    endpoint = f"ipc://{root}/bare.sock"
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.bind(endpoint)
    proc = multiprocessing.get_context("spawn").Process(target=_bare_sender, args=(endpoint, n))
    proc.start()
    pull.recv()
    t0 = time.perf_counter()
    count = 1
    while pull.recv():
        count += 1
    elapsed = time.perf_counter() - t0
    proc.join()
    pull.close(0)
    ctx.term()
    return count / elapsed


PACED = 2000


def _relay_sender(endpoint: str) -> None:
    async def send() -> None:
        ctx = zmq.asyncio.Context()
        dealer = ctx.socket(zmq.DEALER)
        dealer.connect(endpoint)
        for _ in range(PACED):
            dealer.send(msgpack.packb(time.time()))
            await asyncio.sleep(0.001)
        dealer.send(b"")
        dealer.close(linger=-1)
        ctx.term()

    asyncio.run(send())


def _relay(worker_end: str, client_end: str, ready: Any) -> None:
    async def relay() -> None:
        ctx = zmq.asyncio.Context()
        router = ctx.socket(zmq.ROUTER)
        router.bind(worker_end)
        pub = ctx.socket(zmq.PUB)
        pub.bind(client_end)
        ready.set()
        while True:
            _peer, frame = await router.recv_multipart()
            pub.send_multipart([b"t", frame])
            if not frame:
                break
        pub.close(linger=-1)
        router.close(0)
        ctx.term()

    asyncio.run(relay())


async def bare_relay_latency() -> list[float]:
    """Emit → receipt through a bare asyncio relay (worker DEALER → ROUTER → PUB → SUB): our path's floor."""
    root = Path(tempfile.mkdtemp(prefix="ygb-", dir="/tmp"))
    worker_end, client_end = f"ipc://{root}/w.sock", f"ipc://{root}/c.sock"
    spawn = multiprocessing.get_context("spawn")
    ready = spawn.Event()
    relay = spawn.Process(target=_relay, args=(worker_end, client_end, ready))
    relay.start()
    ready.wait(30)
    ctx = zmq.asyncio.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"t")
    sub.connect(client_end)
    await asyncio.sleep(0.3)  # the subscription must reach the relay before the first frame (slow joiner)
    sender = spawn.Process(target=_relay_sender, args=(worker_end,))
    sender.start()
    latencies = []
    while True:
        _topic, frame = await sub.recv_multipart()
        if not frame:
            break
        latencies.append(time.time() - msgpack.unpackb(frame))
    sender.join()
    relay.join()
    sub.close(0)
    ctx.term()
    return latencies


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Run:
    def __init__(self) -> None:
        self.rate = 0.0
        self.latencies: list[float] = []
        self.gaps = 0
        self.daemon_cpu = 0.0
        self.client_cpu = 0.0


async def through_daemon(daemon: DaemonProcess, project: Path, n: int, paced: bool = False) -> Run:
    steps = ({"chunks": ["x" * 16] * n, "delay": 0.001},) if paced else ({"emit": n, "size": 16},)
    run = Run()
    assert daemon.proc is not None
    async with daemon.client() as client:
        daemon_cpu, client_cpu = _cpu_seconds(daemon.proc.pid), time.process_time()
        sub = await submit(client, project, script({"mark": "go"}, *steps))
        first = last = 0.0
        count = 0
        async with EventStream(client, sub.task) as stream:
            async for ev in stream.events():
                now = time.time()
                if ev.type == "ai_chunk":
                    if count == 0:
                        first = now
                    count += 1
                    last = now
                    if paced or count % 50 == 0:
                        run.latencies.append(now - ev.ts)
                if ev.type == "turn_finished":
                    break
        run.daemon_cpu = _cpu_seconds(daemon.proc.pid) - daemon_cpu
        run.client_cpu = time.process_time() - client_cpu
        run.rate, run.gaps = count / max(last - first, 1e-9), stream.gap_fills
    return run


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    root = Path(tempfile.mkdtemp(prefix="ygb-"))
    project = root / "project"
    project.mkdir()
    daemon = DaemonProcess(root / "d", "").start()
    try:
        busy = asyncio.run(through_daemon(daemon, project, n))
        paced = asyncio.run(through_daemon(daemon, project, PACED, paced=True))
    finally:
        daemon.close()
    bare = bare_baseline(n)
    floor = asyncio.run(bare_relay_latency())
    print(f"events end to end: {n} events, {busy.rate:,.0f} events/s, gap fills {busy.gaps} "
          f"(p50 latency at saturation {statistics.median(busy.latencies) * 1000:.1f} ms: queueing, not transport)")
    print(f"  CPU per event at saturation: daemon {busy.daemon_cpu / n * 1e6:.2f} µs, "
          f"client {busy.client_cpu / n * 1e6:.2f} µs")
    print(f"bare PUSH/PULL baseline: {bare:,.0f} messages/s")
    print(f"ratio end-to-end / bare = {busy.rate / bare:.1%}  (target ≥ 30 %)")
    print(f"paced stream, worker emit → client: p50 {_pct(paced.latencies, 0.5) * 1e6:.0f} µs, "
          f"p95 {_pct(paced.latencies, 0.95) * 1e6:.0f} µs  (target p50 ≤ 300 µs)")
    print(f"bare asyncio relay DEALER → ROUTER → PUB → SUB, same pace: p50 {_pct(floor, 0.5) * 1e6:.0f} µs, "
          f"p95 {_pct(floor, 0.95) * 1e6:.0f} µs  (ratio p50 ours / bare = "
          f"{_pct(paced.latencies, 0.5) / _pct(floor, 0.5):.2f})")


if __name__ == "__main__":
    main()
