"""What live accounting costs the daemon: its CPU while `yagent top` asks every second, against idle.

Starts a daemon with N busy runs (scripted agent, heartbeating), then measures the daemon process's CPU
time over a window three ways in the same run: idle (no runs), with the runs and nobody asking, and with
the runs while a client sends `list_tasks` once a second (what `yagent top` does: every live run's process
tree is sampled with psutil). Also prints the list_tasks round trip.
Usage: python bench/accounting_cost.py [RUNS] [SECONDS]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.daemon_harness import DaemonProcess, script, submit  # noqa: E402
from yagent.ipc import EventStream  # noqa: E402
from yagent.ipc.messages import ListTasks, TaskList  # noqa: E402
from yagent.ipc.vocabulary import EventType  # noqa: E402


def cpu(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system


async def start_runs(daemon: DaemonProcess, root: Path, n: int) -> None:
    async with daemon.client(timeout=60) as client:
        tasks = []
        for i in range(n):
            project = root / f"p{i}"
            project.mkdir(exist_ok=True)
            tasks.append((await submit(client, project, script({"mark": "up"}, {"busy": 3600}))).task)
        for task in tasks:
            async with EventStream(client, task) as stream:
                async for ev in stream.events():
                    if ev.type == EventType.RUN_STARTED:
                        break


async def poll(daemon: DaemonProcess, seconds: float) -> list[float]:
    trips: list[float] = []
    async with daemon.client(timeout=30) as client:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            started = time.perf_counter()
            await client.request(ListTasks(id=0, limit=200), TaskList)
            trips.append(time.perf_counter() - started)
            await asyncio.sleep(1.0)
    return trips


def share(proc: psutil.Process, seconds: float, during: object = None) -> float:
    before, started = cpu(proc), time.monotonic()
    if during is None:
        time.sleep(seconds)
    else:
        asyncio.run(during)  # type: ignore[arg-type]
    return (cpu(proc) - before) / (time.monotonic() - started) * 100


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 20.0
    root = Path(tempfile.mkdtemp(prefix="ygb-"))
    daemon = DaemonProcess(root / "d", "[daemon]\nmax_workers = 64\n").start()
    try:
        proc = psutil.Process(daemon.proc.pid)
        idle = share(proc, seconds)
        asyncio.run(start_runs(daemon, root, n))
        quiet = share(proc, seconds)
        trips: list[float] = []

        async def asking() -> None:
            trips.extend(await poll(daemon, seconds))

        asked = share(proc, seconds, asking())
    finally:
        daemon.close()
    print(f"daemon CPU, % of one core over {seconds:.0f}s: idle {idle:.3f}; {n} busy runs, nobody asking "
          f"{quiet:.3f}; the same while `top` asks once a second {asked:.3f}")
    print(f"accounting costs {asked - quiet:+.3f} points of a core with {n} runs "
          f"(ratio asked/quiet = {asked / quiet:.2f})")
    print(f"list_tasks round trip with {n} live runs sampled: p50 {statistics.median(trips) * 1000:.1f} ms, "
          f"max {max(trips) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
