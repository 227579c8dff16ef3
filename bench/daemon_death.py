"""How long workers outlive a `kill -9` of their daemon: from the kill to the exit of the last worker (and of
the tool process each one started), p50 over several runs.

A real daemon with its forkserver and real workers: one task whose root run delegates to three children,
each heartbeating with a child process of its own in its own session (as `run_bash` starts them). Then the
daemon gets SIGKILL. Target: ≤ 1 s.

Baseline, measured in the same run: today's behaviour before the fix, reproduced by a preloaded module
(`bench/unfixed_worker_exit.py`) that makes workers keep the forkserver's liveness pipe and not watch their
own; they then linger until the channel's daemon-loss timeout (`[daemon] daemon_loss_timeout`, 10 s).
Usage: python bench/daemon_death.py [RUNS] [CHILDREN]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.daemon_harness import DaemonProcess, arun, script, submit  # noqa: E402
from yagent.ipc import EventStream  # noqa: E402
from yagent.ipc.vocabulary import EventType  # noqa: E402

UNFIXED = "bench.unfixed_worker_exit"


async def _start_runs(daemon: DaemonProcess, project: Path, children: int) -> list[int]:
    """Start the task; return the pids of every worker and of every tool process they started."""
    child = script({"spawn": "exec sleep 1000"}, {"busy": 600})
    root = script({"delegate": [{"agent": "scripted", "task": child} for _ in range(children)]})
    async with daemon.client() as c:
        sub = await submit(c, project, root)
        workers: dict[str, int] = {}
        tools: set[int] = set()
        async with EventStream(c, sub.task) as stream:
            async for ev in stream.events():
                if ev.type == EventType.RUN_STARTED:
                    workers[ev.run] = ev.data["pid"]
                elif ev.type == "spawned":
                    tools.add(ev.data["pid"])
                if len(workers) == children + 1 and len(tools) == children:
                    return [*workers.values(), *tools]
    raise AssertionError("the task's stream ended before every run started")


def exited(proc: psutil.Process) -> bool:
    """Gone, or a zombie: its parent (the forkserver, dead too) no longer reaps it, and PID 1 may take a while."""
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def one_death(root: Path, children: int, unfixed: bool) -> float:
    """Seconds from the daemon's SIGKILL to the exit of the last of its workers and their tools."""
    modules = '["tests.agents.scripted"' + (f', "{UNFIXED}"' if unfixed else "") + "]"
    config = f"[daemon]\nagent_modules = {modules}\n[agent]\nmax_parallel_delegations = {children}\n"
    daemon = DaemonProcess(root, config)
    project = root / "project"
    project.mkdir(parents=True, exist_ok=True)
    try:
        daemon.start()
        procs = [psutil.Process(pid) for pid in arun(_start_runs(daemon, project, children))]
        assert daemon.proc is not None
        killed = time.monotonic()
        daemon.proc.kill()
        alive = set(procs)
        while alive and time.monotonic() - killed < 60:
            alive = {p for p in alive if not exited(p)}
            time.sleep(0.005)
        took = time.monotonic() - killed
        daemon.proc.wait(10)
        for proc in alive:
            proc.kill()
        assert not alive, f"{len(alive)} processes outlived the daemon by a minute"
        return took
    finally:
        daemon.close()


def report(name: str, samples: list[float]) -> float:
    p50 = statistics.median(samples)
    print(f"{name:>36}: p50 {p50 * 1000:8.0f} ms   max {max(samples) * 1000:8.0f} ms   "
          f"({', '.join(f'{s:.2f}' for s in samples)} s)")
    return p50


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    children = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    with tempfile.TemporaryDirectory(prefix="yagent-bench-death-") as tmp:
        fixed = [one_death(Path(tmp) / f"fixed{i}", children, unfixed=False) for i in range(runs)]
        unfixed = [one_death(Path(tmp) / f"unfixed{i}", children, unfixed=True) for i in range(runs)]
    print(f"kill -9 of yagentd → last of {children + 1} workers and {children} tool processes gone, {runs} runs each")
    after = report("workers watch their daemon (now)", fixed)
    before = report("baseline (forkserver pipe kept)", unfixed)
    print(f"{'ratio baseline / now':>36}: {before / after:8.1f}×   target: now ≤ 1000 ms")


if __name__ == "__main__":
    main()
