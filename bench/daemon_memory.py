"""Daemon RSS idle and with 50 live workers, and the unique memory (USS) of each worker.

Baseline in the same run: a bare `python -c "import zmq, msgpack, httpx"` process, i.e. what one
worker would cost if it were started from scratch instead of forked from the preloaded forkserver.
Usage: python bench/daemon_memory.py [WORKERS]
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.daemon_harness import DaemonProcess, script, submit  # noqa: E402
from yagent.ipc import EventStream  # noqa: E402


def mib(n: float) -> str:
    return f"{n / 1024 / 1024:.1f} MiB"


async def start_workers(daemon: DaemonProcess, root: Path, n: int) -> list[int]:
    pids: list[int] = []
    async with daemon.client(timeout=60) as client:
        tasks = []
        for i in range(n):
            project = root / f"p{i}"
            project.mkdir(exist_ok=True)
            tasks.append((await submit(client, project, script({"mark": "up"}, {"busy": 600}))).task)
        for task in tasks:
            async with EventStream(client, task) as stream:
                async for ev in stream.events():
                    if ev.type == "run_started":
                        pids.append(ev.data["pid"])
                        break
    return pids


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    root = Path(tempfile.mkdtemp(prefix="ygb-"))
    daemon = DaemonProcess(root / "d", "[daemon]\nmax_workers = 64\n").start()
    try:
        proc = psutil.Process(daemon.proc.pid)
        idle = proc.memory_info().rss
        pids = asyncio.run(start_workers(daemon, root, n))
        busy = proc.memory_info().rss
        uss = [psutil.Process(p).memory_full_info().uss for p in pids]
        rss = [psutil.Process(p).memory_info().rss for p in pids]
    finally:
        daemon.close()
    bare = subprocess.Popen(
        [sys.executable, "-c", "import zmq, msgpack, httpx, sys; print('ready', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert bare.stdout is not None and bare.stdout.readline().strip() == b"ready"
        bare_uss = psutil.Process(bare.pid).memory_full_info().uss
    finally:
        bare.communicate(b"")
    print(f"daemon RSS idle: {mib(idle)}; with {len(pids)} live workers: {mib(busy)}")
    print(f"worker USS median {mib(statistics.median(uss))} (max {mib(max(uss))}); "
          f"worker RSS median {mib(statistics.median(rss))}")
    print(f"baseline: a from-scratch interpreter with the same imports has USS {mib(bare_uss)}; "
          f"ratio forked/bare = {statistics.median(uss) / bare_uss:.2f}")


if __name__ == "__main__":
    main()
