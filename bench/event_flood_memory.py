"""Daemon RSS after a flood of large events: idle, while the flooding task still runs, and once it ended.

A real yagentd; one scripted run emits N events of K bytes each (default 5000 × 100 KiB ≈ 500 MB), then
stays alive; a client follows the task the whole time (as `yagent run` does). The baseline, measured in the
same run, is the daemon's RSS idle after one small task (so every code path a flood uses is loaded).
Target: once the task ended, RSS back within 20 % of idle.
Usage: python bench/event_flood_memory.py [N] [K] [follow|nofollow]
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.daemon_harness import DaemonProcess, collect_turn, script, submit  # noqa: E402
from yagent.ipc import EventStream  # noqa: E402
from yagent.ipc.messages import Ack, TaskControl  # noqa: E402
from yagent.ipc.vocabulary import ControlAction, EventType  # noqa: E402


def mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


async def flood(daemon: DaemonProcess, project: Path, n: int, size: int, follow: bool,
                proc: psutil.Process) -> tuple[int, int, int, float]:
    """RSS while the task runs right after its flood and 2 s later, the peak seen, and the flood's seconds;
    returns once the task was cancelled and its turn ended."""
    async with daemon.client(timeout=60) as client:
        sub = await submit(client, project, script({"emit": n, "size": size}, {"mark": "flooded"}, {"busy": 600}))
        peak = 0
        t0 = time.monotonic()
        # Not following, the client asks only for what comes after the flood (a replay it then waits on).
        async with EventStream(client, sub.task, after_seq=0 if follow else n) as stream:
            async for ev in stream.events():
                if ev.seq % 200 == 0:
                    peak = max(peak, proc.memory_info().rss)
                if ev.type == "mark" and ev.data.get("name") == "flooded":
                    break
            elapsed = time.monotonic() - t0
            running = proc.memory_info().rss
            await asyncio.sleep(2)
            settled = proc.memory_info().rss
            await client.request(TaskControl(id=0, task=sub.task, action=ControlAction.CANCEL), Ack)
            async for ev in stream.events():
                if ev.type == EventType.TURN_FINISHED:
                    break
        return running, settled, max(peak, running), elapsed


async def small_task(daemon: DaemonProcess, project: Path) -> None:
    async with daemon.client() as client:
        sub = await submit(client, project, script({"emit": 50, "size": 1000}))
        await collect_turn(client, sub.task)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 100 * 1024
    follow = (sys.argv[3] if len(sys.argv) > 3 else "follow") == "follow"
    root = Path(tempfile.mkdtemp(prefix="ygb-"))
    project = root / "project"
    project.mkdir()
    daemon = DaemonProcess(root / "d", "").start()
    try:
        proc = psutil.Process(daemon.proc.pid)
        fresh = proc.memory_info().rss
        asyncio.run(small_task(daemon, project))
        idle = proc.memory_info().rss
        running, settled, peak, elapsed = asyncio.run(flood(daemon, project, n, size, follow, proc))
        after = proc.memory_info().rss
        time.sleep(2)
        later = proc.memory_info().rss
    finally:
        daemon.close()
    print(f"flood: {n} events × {size} bytes = {n * size / 1e6:.0f} MB in {elapsed:.1f} s "
          f"({'a client following' if follow else 'no client reading'})")
    print(f"daemon RSS fresh {mib(fresh)}, idle (after one small task) {mib(idle)}")
    print(f"while the task runs: right after its flood {mib(running)}, 2 s later {mib(settled)} "
          f"(peak seen {mib(peak)})")
    print(f"once it ended {mib(after)}, 2 s later {mib(later)}")
    print(f"ratio ended/idle = {after / idle:.2f}  (target ≤ 1.20)")


if __name__ == "__main__":
    main()
