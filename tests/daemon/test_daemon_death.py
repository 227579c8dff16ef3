"""Workers do not outlive a `kill -9` of their daemon: each watches its own pipe to yagentd and lets go of the
forkserver's, so both the run's wrap-up and the parent-death signal come within moments, not after the
channel's 10 s daemon-loss timeout (`bench/daemon_death.py` prints the figure)."""

from __future__ import annotations

from pathlib import Path

import psutil

from tests.daemon_harness import arun, script, submit, wait_until
from yagent.ipc import EventStream
from yagent.ipc.vocabulary import EventType

# Whatever the machine's load: today's behaviour takes the 10 s loss timeout, the fixed one well under a second.
GONE_WITHIN = 5.0


def _exited(proc: psutil.Process) -> bool:
    # A zombie counts: its parent, the forkserver, died with the daemon, and PID 1 reaps when it gets to it.
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def _started(daemon, project: Path, root: str, runs: int, tools: int = 0,
                   marks: int = 0) -> tuple[dict[str, int], set[int]]:
    """Submit `root`; wait until `runs` runs started, `tools` tool processes were spawned and `marks` marks seen."""
    async with daemon.client() as c:
        sub = await submit(c, project, root)
        pids: dict[str, int] = {}
        spawned: set[int] = set()
        seen = 0
        async with EventStream(c, sub.task) as stream:
            async for ev in stream.events():
                if ev.type == EventType.RUN_STARTED:
                    pids[ev.run] = ev.data["pid"]
                elif ev.type == "spawned":
                    spawned.add(ev.data["pid"])
                elif ev.type == "mark":
                    seen += 1
                if len(pids) == runs and len(spawned) == tools and seen == marks:
                    return pids, spawned
    raise AssertionError("the task's stream ended early")


def test_workers_their_tools_and_the_forkserver_are_gone_within_seconds_of_a_kill_9(
        make_daemon, project: Path, tmp_path: Path) -> None:
    # The default loss timeout (10 s): only the pipe to the daemon can end the workers this early.
    daemon = make_daemon("[agent]\nmax_parallel_delegations = 3\n")
    notes = [tmp_path / f"wrapped-{i}" for i in range(2)]
    children = [script({"spawn": "exec sleep 1000"}, {"busy": 600}),
                *(script({"wrap_up": {"seconds": 0.5, "file": str(note)}}) for note in notes)]
    root = script({"delegate": [{"agent": "scripted", "task": child} for child in children]})
    pids, tools = arun(_started(daemon, project, root, runs=4, tools=1, marks=2))
    workers = [psutil.Process(pid) for pid in pids.values()]
    forkservers = {w.ppid() for w in workers}
    assert len(forkservers) == 1 and daemon.proc is not None and forkservers != {daemon.proc.pid}
    everything = [*workers, *(psutil.Process(pid) for pid in tools), psutil.Process(forkservers.pop())]

    daemon.proc.kill()
    wait_until(lambda: all(_exited(p) for p in everything), GONE_WITHIN,
               "every worker, its tool process and the forkserver to exit after the daemon's kill -9")
    # The parent-death SIGTERM that arrives with the loss did not cancel the wrap-up a second time.
    assert [note.read_text() for note in notes] == ["written on the way out"] * 2


def _in_a_blocking_sleep(pid: int) -> bool:
    """The process's main thread sits in the kernel's sleep call (a `time.sleep` on the event loop's thread)."""
    try:
        return "nanosleep" in Path(f"/proc/{pid}/task/{pid}/wchan").read_text()
    except OSError:
        return False


def test_a_worker_whose_event_loop_is_stuck_still_leaves_after_its_wrap_up_grace(
        make_daemon, project: Path) -> None:
    daemon = make_daemon()
    stuck = script({"spawn": "exec sleep 1000"}, {"hang": 600})
    pids, tools = arun(_started(daemon, project, script({"delegate": [{"agent": "scripted", "task": stuck}]}),
                                runs=2, tools=1))
    _root, stuck_run = pids
    worker = psutil.Process(pids[stuck_run])
    wait_until(lambda: _in_a_blocking_sleep(worker.pid), 10.0, "the worker's event loop to block")
    forkserver = psutil.Process(worker.ppid())
    tool = psutil.Process(tools.pop())
    assert daemon.proc is not None
    daemon.proc.kill()
    # The forkserver no longer waits for the last worker to let go of its pipe.
    wait_until(lambda: _exited(forkserver), 3.0, "the forkserver to exit while a worker still lives")
    assert not _exited(worker)
    # The stuck loop can neither wrap up nor heed SIGTERM: the watch thread gives up on it after its grace.
    wait_until(lambda: _exited(worker) and _exited(tool), 15.0,
               "the stuck worker and its tool process to exit after the wrap-up grace")
