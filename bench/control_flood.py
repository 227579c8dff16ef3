"""Control-socket round trip while a hostile peer floods, against the same daemon without the flood.

A real yagentd; a polite client measures `status` round trips (p50/p99) first alone (the baseline), then
while another process floods control.sock: a DEALER with a receive high-water mark of 1 that sends
status requests as fast as it can and never reads ("status"), or one that sends garbage frames as fast
as it can ("garbage"), or that asks for a long task's whole history, replies of megabytes, and never
reads them ("replay"). Prints the figures, the ratio to the baseline, the daemon's CPU and RSS during
the flood, and what the flooder got through.
Target: p99 < 50 ms under the flood.
Usage: python bench/control_flood.py [SECONDS] [status|garbage|replay]
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.daemon_harness import DaemonProcess, collect_turn, script, submit  # noqa: E402
from yagent.ipc import RequestTimeout  # noqa: E402
from yagent.ipc.messages import DaemonStatus, StatusRequest  # noqa: E402


async def round_trips(daemon: DaemonProcess, n: int, duration: float | None = None) -> tuple[list[float], int]:
    """Status round trips (seconds): `n` of them, or as many as fit in `duration`; also the count timed out."""
    samples: list[float] = []
    timeouts = 0
    async with daemon.client(timeout=5, connect_timeout=30) as client:
        end = time.monotonic() + duration if duration else None
        while (end is None and len(samples) < n) or (end is not None and time.monotonic() < end):
            t0 = time.perf_counter()
            try:
                await client.request(StatusRequest(id=0), DaemonStatus)
            except RequestTimeout:
                timeouts += 1
                continue
            samples.append(time.perf_counter() - t0)
            await asyncio.sleep(0.005)
    return samples, timeouts


def pct(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))] if ordered else float("nan")


def describe(name: str, samples: list[float], timeouts: int) -> str:
    return (f"{name}: {len(samples)} round trips, p50 {pct(samples, 0.5) * 1000:.2f} ms, "
            f"p99 {pct(samples, 0.99) * 1000:.2f} ms, max {max(samples, default=float('nan')) * 1000:.1f} ms, "
            f"{timeouts} timed out (5 s)")


async def long_task(daemon: DaemonProcess, root: Path) -> str:
    """A finished task with ~20 MB of history: 2000 events of 10 KB."""
    project = root / "project"
    project.mkdir(exist_ok=True)
    async with daemon.client(timeout=60) as client:
        sub = await submit(client, project, script({"emit": 2000, "size": 10_000}))
        await collect_turn(client, sub.task)
        return sub.task


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 15.0
    kind = sys.argv[2] if len(sys.argv) > 2 else "status"
    root = Path(tempfile.mkdtemp(prefix="ygb-"))
    daemon = DaemonProcess(root / "d", "").start()
    try:
        proc = psutil.Process(daemon.proc.pid)
        if kind == "replay":
            kind = f"replay:{asyncio.run(long_task(daemon, root))}"
        asyncio.run(round_trips(daemon, 100))  # warm-up
        base, base_timeouts = asyncio.run(round_trips(daemon, 500))
        rss_idle = proc.memory_info().rss
        # The hostile peer of the tests (tests/daemon/hostile_peer.py), in its own process.
        flooder = subprocess.Popen([sys.executable, "-m", "tests.daemon.hostile_peer",
                                    f"ipc://{daemon.runtime / 'control.sock'}", kind, str(seconds)],
                                   cwd=REPO, stdout=subprocess.PIPE, text=True)
        assert flooder.stdout is not None and flooder.stdout.readline().strip() == "flooding"
        cpu0 = proc.cpu_times()
        t0 = time.monotonic()
        flooded, flooded_timeouts = asyncio.run(round_trips(daemon, 0, duration=max(1.0, seconds - 2)))
        cpu1 = proc.cpu_times()
        elapsed = time.monotonic() - t0
        rss_flood = proc.memory_info().rss
        sent = flooder.communicate(timeout=seconds + 30)[0].strip()
        after, after_timeouts = asyncio.run(round_trips(daemon, 200))
        rss_after = proc.memory_info().rss
        time.sleep(3)
        rss_later = proc.memory_info().rss
        alive = proc.is_running() and daemon.proc.poll() is None
    finally:
        daemon.close()
    busy = (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / elapsed
    print(describe("baseline (no flood)", base, base_timeouts))
    print(describe(f"during a {kind} flood", flooded, flooded_timeouts))
    print(describe("after the flood", after, after_timeouts))
    if base and flooded:
        print(f"ratio p50 flood/baseline = {pct(flooded, 0.5) / pct(base, 0.5):.2f}, "
              f"p99 flood/baseline = {pct(flooded, 0.99) / pct(base, 0.99):.2f}  (target: p99 < 50 ms)")
    print(f"flooder {sent} frames in {seconds:.0f} s; daemon CPU during the flood {busy:.0%} of a core")
    print(f"daemon RSS idle {rss_idle / 2**20:.1f} MiB, during the flood {rss_flood / 2**20:.1f} MiB, "
          f"after {rss_after / 2**20:.1f} MiB, 3 s later {rss_later / 2**20:.1f} MiB; daemon alive: {alive}")


if __name__ == "__main__":
    main()
