"""Event throughput worker → daemon → subscribed client, against a bare pyzmq PUSH/PULL loop.

A real yagentd (forkserver, scripted test agent) streams N small events; a client follows the task
with the gap-filling EventStream. Prints events/s, p50 latency (worker emit → client receipt) on a paced stream, and
the ratio against a bare two-process PUSH/PULL loop measured in the same run.
Targets: ≥ 50 000 events/s end to end and ≥ 15 % of the bare baseline.
Usage: python bench/event_throughput.py [N]
"""

from __future__ import annotations

import asyncio
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path

import zmq

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


async def through_daemon(daemon: DaemonProcess, project: Path, n: int,
                         paced: bool = False) -> tuple[float, float, int]:
    steps = ({"chunks": ["x" * 16] * n, "delay": 0.001},) if paced else ({"emit": n, "size": 16},)
    async with daemon.client() as client:
        sub = await submit(client, project, script({"mark": "go"}, *steps))
        latencies: list[float] = []
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
                    if count % 50 == 0:
                        latencies.append(now - ev.ts)
                if ev.type == "turn_finished":
                    break
        return count / max(last - first, 1e-9), statistics.median(latencies), stream.gap_fills


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    root = Path(tempfile.mkdtemp(prefix="ygb-"))
    project = root / "project"
    project.mkdir()
    daemon = DaemonProcess(root / "d", "").start()
    try:
        rate, p50, gaps = asyncio.run(through_daemon(daemon, project, n))
        paced_rate, paced_p50, _ = asyncio.run(through_daemon(daemon, project, 2000, paced=True))
    finally:
        daemon.close()
    bare = bare_baseline(n)
    print(f"events end to end: {n} events, {rate:,.0f} events/s, gap fills {gaps} "
          f"(p50 latency at saturation {p50 * 1000:.1f} ms: queueing, not transport)")
    print(f"paced stream (~{paced_rate:,.0f} events/s): p50 latency worker emit → client {paced_p50 * 1000:.2f} ms")
    print(f"bare PUSH/PULL baseline: {bare:,.0f} messages/s")
    print(f"ratio end-to-end / bare = {rate / bare:.1%}  (targets: ≥ 50 000 events/s and ≥ 15 %)")


if __name__ == "__main__":
    main()
