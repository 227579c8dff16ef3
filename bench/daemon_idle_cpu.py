"""Daemon CPU while idle: % of one core over a window with no tasks, every thread of yagentd counted.

A real yagentd with no runs; CPU time comes from /proc/PID/task/*/schedstat (nanoseconds, every thread:
the asyncio loop and libzmq's I/O threads), not from clock ticks, whose 10 ms grain is coarser than the
target. The forkserver (a child waiting for launches) is shown apart. Baseline in the same run: a bare
interpreter idling in an asyncio loop with one 1 s timer, what "nothing to do" costs at least.
Target: ≤ 0.05 % of a core.
Usage: python bench/daemon_idle_cpu.py [SECONDS]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.daemon_harness import DaemonProcess  # noqa: E402

_BARE = """
import asyncio, sys
async def main():
    loop = asyncio.get_running_loop()
    def tick():
        loop.call_later(1.0, tick)
    tick()
    print("ready", flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""


def cpu_ns(pid: int) -> int:
    """CPU time of every thread of `pid` so far, in nanoseconds."""
    total = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total += int(stat.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
    return total


def wakeups(pid: int) -> int:
    """Voluntary context switches of every thread: how often they slept and woke."""
    total = 0
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        try:
            for line in status.read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total


def measure(pids: list[int], seconds: float) -> list[tuple[float, float]]:
    """(% of one core, wake-ups per second) of each pid over `seconds`."""
    before = [(cpu_ns(p), wakeups(p)) for p in pids]
    t0 = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - t0
    return [((cpu_ns(p) - c) / 1e9 / elapsed * 100, (wakeups(p) - w) / elapsed)
            for p, (c, w) in zip(pids, before, strict=True)]


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
    root = Path(tempfile.mkdtemp(prefix="ygb-"))
    daemon = DaemonProcess(root / "d", "").start()
    bare = subprocess.Popen([sys.executable, "-c", _BARE], stdout=subprocess.PIPE, text=True)
    try:
        assert bare.stdout is not None and bare.stdout.readline().strip() == "ready"
        children = psutil.Process(daemon.proc.pid).children()
        time.sleep(3)  # past start-up work (recovery, the first log prune)
        pids = [daemon.proc.pid, bare.pid, *(c.pid for c in children)]
        figures = measure(pids, seconds)
    finally:
        bare.kill()
        bare.wait()
        daemon.close()
    (cpu, wake), (bare_cpu, bare_wake) = figures[0], figures[1]
    print(f"yagentd idle over {seconds:.0f} s: {cpu:.4f} % of a core, {wake:.1f} wake-ups/s (all threads)")
    for child, (child_cpu, child_wake) in zip(children, figures[2:], strict=True):
        print(f"  its child {child.name()} (pid {child.pid}): {child_cpu:.4f} % of a core, {child_wake:.1f} wake-ups/s")
    print(f"baseline, a bare asyncio loop with one 1 s timer: {bare_cpu:.4f} % of a core, {bare_wake:.1f} wake-ups/s")
    print(f"ratio daemon/baseline = {cpu / bare_cpu:.1f}  (target: daemon ≤ 0.05 % of a core)" if bare_cpu else
          "baseline too small to measure")


if __name__ == "__main__":
    main()
