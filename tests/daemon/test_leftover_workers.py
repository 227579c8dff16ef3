"""A starting daemon kills what a dead predecessor left running — by pid AND process start time, so a
process that merely reuses a recorded pid is never touched — before it admits anything."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.daemon_harness import DaemonProcess, arun, script, submit
from yagent.daemon.launcher import RUN_ENV, run_processes
from yagent.daemon.recovery import kill_leftover_workers
from yagent.daemon.registry import LeftoverRun
from yagent.ipc import EventStream
from yagent.ipc.messages import ListTasks, TaskList
from yagent.ipc.vocabulary import EventType


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE  # ended; its parent has yet to reap it
    except psutil.NoSuchProcess:
        return True


@pytest.fixture
def orphans() -> Iterator[list[int]]:
    """Start processes that are nobody's child here, as a dead daemon's workers are; kill what is left."""
    started: list[int] = []
    yield started
    for pid in started:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _orphan(started: list[int], command: str, env: dict[str, str] | None = None) -> psutil.Process:
    out = subprocess.run(["sh", "-c", f"{command} >/dev/null 2>&1 & echo $!"], capture_output=True, text=True,
                         env={**os.environ, **(env or {})}, check=True)
    pid = int(out.stdout)
    started.append(pid)
    return psutil.Process(pid)


def test_a_leftover_whose_pid_and_start_time_match_is_killed_with_its_children(orphans: list[int]) -> None:
    worker = _orphan(orphans, "sh -c 'sleep 600 & sleep 600 & wait'")
    children = []
    for _ in range(500):  # the shell starts its two sleeps right away
        children = worker.children()
        if len(children) == 2:
            break
        os.sched_yield()
    assert len(children) == 2
    orphans.extend(c.pid for c in children)
    killed = kill_leftover_workers([LeftoverRun("r1", worker.pid, worker.create_time())])
    assert sorted(killed) == sorted([worker.pid, *(c.pid for c in children)])
    assert all(_gone(pid) for pid in killed)  # waited for: gone when the call returns


def test_a_process_that_reuses_a_recorded_pid_is_never_killed(orphans: list[int]) -> None:
    other = _orphan(orphans, "sleep 600")  # holds the pid number the registry recorded for a worker
    recorded = other.create_time() - 5.0  # the worker that had this pid started earlier, and is gone
    assert kill_leftover_workers([LeftoverRun("r1", other.pid, recorded)]) == []
    assert kill_leftover_workers([LeftoverRun("r2", other.pid, 0.0)]) == []  # no start time: proves nothing
    assert other.is_running() and other.status() != psutil.STATUS_ZOMBIE


def test_a_tool_process_carrying_the_run_id_is_killed_though_its_worker_is_gone(orphans: list[int]) -> None:
    tool = _orphan(orphans, "sleep 600", env={RUN_ENV: "rtool0000001"})
    bystander = _orphan(orphans, "sleep 600", env={RUN_ENV: "rsomeoneelse"})
    dead_pid = 2 ** 22 + 1  # above any pid_max: no process has it
    assert kill_leftover_workers([LeftoverRun("rtool0000001", dead_pid, 1.0)]) == [tool.pid]
    assert _gone(tool.pid)
    assert bystander.is_running() and bystander.status() != psutil.STATUS_ZOMBIE


def test_a_run_id_is_matched_whole_wherever_it_stands_in_the_environment() -> None:
    run_id = "rwhole000001"
    envs = {
        "first": {RUN_ENV: run_id},  # the very first entry of the block: no NUL before it
        "later": {"A_BEFORE": "x", RUN_ENV: run_id, "Z_AFTER": "y"},
        "longer id": {"A_BEFORE": "x", RUN_ENV: run_id + "2"},
        "other variable": {"A_BEFORE": "x", "X" + RUN_ENV: run_id},
        "in a value": {"A_BEFORE": f"{RUN_ENV}={run_id}"},
    }
    sleepers = {name: subprocess.Popen(["sleep", "600"], env=env) for name, env in envs.items()}
    try:
        found = {proc.pid for proc in run_processes(run_id, None)}
        assert found == {sleepers["first"].pid, sleepers["later"].pid}
    finally:
        for proc in sleepers.values():
            proc.kill()
            proc.wait()


@pytest.mark.e2e
def test_a_restarted_daemon_kills_its_predecessors_stopped_worker_before_it_reports_ready(
        make_daemon, project: Path) -> None:
    daemon: DaemonProcess = make_daemon()

    async def start():
        async with daemon.client() as c:
            sub = await submit(c, project, script({"hang": 600}))
            async with EventStream(c, sub.task) as stream:
                async for ev in stream.events():
                    if ev.type == EventType.RUN_STARTED:
                        return sub, ev.data["pid"]
            raise AssertionError("stream ended")

    sub, pid = arun(start())
    worker = psutil.Process(pid)
    forkserver = worker.parent()
    assert forkserver is not None
    try:
        # Nothing of the old generation can act on the daemon's death: not the worker (its liveness checks),
        # not its parent (a parent-death signal); only the new daemon's sweep can end it.
        worker.send_signal(signal.SIGSTOP)
        forkserver.send_signal(signal.SIGSTOP)
        daemon.proc.send_signal(signal.SIGKILL)
        daemon.proc.wait(10)
        assert worker.status() == psutil.STATUS_STOPPED
        again = make_daemon(root=daemon.root, start=False)
        again.home, again.runtime = daemon.home, daemon.runtime
        again.start()  # returns on READY=1
        assert _gone(pid), f"the old worker {pid} is still {worker.status()} after the new daemon reported ready"
        assert f"killed 1 leftover processes of 1 unfinished runs a previous yagentd left (pids {pid})" in \
            again.log_path.read_text()

        async def listing():
            async with again.client() as c:
                return await c.request(ListTasks(id=0), TaskList)

        task = next(t for t in arun(listing()).tasks if t.task == sub.task)
        assert task.state == "interrupted"
    finally:
        for proc in (forkserver, worker):
            with contextlib.suppress(psutil.Error):
                proc.kill()
