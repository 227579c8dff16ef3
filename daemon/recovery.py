"""Turns and runs a daemon left in flight: their leftover processes killed, marked interrupted in the
registry, and their followers told.

At start this covers a predecessor that crashed or was killed; at shutdown, whatever did not end in time.
A starting daemon first kills what such a predecessor left running (`kill_leftover_workers`) — before it
admits a request or grants a lease, so a leftover worker can neither hold a model slot nor race a new
run. A worker counts as a leftover only when its pid and its process start time both match what was
recorded when its run started: a process that merely reuses the pid is never touched. Its descendants and
any process carrying the run id in its environment go with it. Then a client following such a task gets
the `run_finished` / `turn_finished` events it waits for, so it never waits forever.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import time
from collections.abc import Callable, Sequence

import psutil

from yagent.ipc.daemon_events import RunFinished, TurnFinished
from yagent.ipc.vocabulary import EventType, RunStatus, StopReason, TaskState

from .event_hub import EventHub
from .launcher import run_processes
from .process_identity import SAME_START, same_process, start_time
from .registry import Interrupted, LeftoverRun, Registry

__all__ = ["LEFTOVER_KILL_WAIT", "kill_and_wait", "kill_leftover_workers", "mark_and_report_interrupted"]

# How long a start waits for killed leftovers to end (a process in uninterruptible sleep may take longer).
LEFTOVER_KILL_WAIT = 5.0

log = logging.getLogger(__name__)


def kill_leftover_workers(runs: Sequence[LeftoverRun], *, wait: float = LEFTOVER_KILL_WAIT) -> list[int]:
    """Kill every process left of `runs` (unfinished runs a dead predecessor recorded) and wait until they
    have ended; returns the pids killed. Blocking: run it in a thread."""
    me = psutil.Process()
    ours = {me.pid, *(p.pid for p in me.children(recursive=True))}  # this daemon's forkserver is no leftover
    doomed: dict[int, float] = {}  # pid -> the start time that identifies it
    for run in runs:
        worker = same_process(run.pid, run.worker_started_at)
        if worker is None and psutil.pid_exists(run.pid):
            log.info("run %s's worker pid %d now names another process (or its start time was not recorded); "
                     "leaving it alone", run.id, run.pid)
        for proc in run_processes(run.id, worker.pid if worker is not None else None):
            if proc.pid not in ours:
                started = run.worker_started_at if worker is not None and proc.pid == worker.pid else \
                    start_time(proc.pid)
                if started:
                    doomed[proc.pid] = started
    if not doomed:
        return []
    killed, alive = kill_and_wait(doomed, wait)
    if killed:
        log.warning("killed %d leftover processes of %d unfinished runs a previous yagentd left (pids %s)",
                    len(killed), len(runs), ", ".join(map(str, sorted(killed))))
    if alive:
        log.error("processes left by a previous yagentd are still alive %.0fs after SIGKILL (pids %s; "
                  "uninterruptible sleep?); check them with `ps -o pid,stat,wchan -p %s`", wait,
                  ", ".join(map(str, alive)), ",".join(map(str, alive)))
    return killed


def kill_and_wait(doomed: dict[int, float], wait: float) -> tuple[list[int], list[int]]:
    """SIGKILL each pid that still names the process started at its time; wait for them to end."""
    killed: list[int] = []
    ending: dict[int, int] = {}  # pidfd -> pid
    for pid, started in doomed.items():
        try:
            fd = os.pidfd_open(pid)  # pins the process: the pid cannot be handed to another one under us
        except ProcessLookupError:
            continue
        except OSError:  # no pidfds (a kernel before 5.3): psutil checks the start time before signalling
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                if abs(proc.create_time() - started) <= SAME_START:
                    proc.kill()
                    killed.append(pid)
                    with contextlib.suppress(psutil.TimeoutExpired):
                        proc.wait(wait)
            continue
        if abs(start_time(pid) - started) > SAME_START:  # reused between the scan and now
            os.close(fd)
            continue
        try:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        except ProcessLookupError:
            os.close(fd)
            continue
        killed.append(pid)
        ending[fd] = pid
    # A pidfd turns readable when its process has ended (a zombie runs nothing and holds nothing).
    poller = select.poll()
    for fd in ending:
        poller.register(fd, select.POLLIN)
    pending = set(ending)
    deadline = time.monotonic() + wait
    while pending and (left := deadline - time.monotonic()) > 0:
        for fd, _ in poller.poll(left * 1000):
            poller.unregister(fd)
            pending.discard(fd)
    for fd in ending:
        os.close(fd)
    return killed, sorted(ending[fd] for fd in pending)


def mark_and_report_interrupted(registry: Registry, hub: EventHub, why: str, *,
                                is_live: Callable[[str], bool]) -> Interrupted:
    """Mark what the registry still has in flight as interrupted and publish its end; `is_live` tells the
    tasks this daemon still holds in memory (their event logs stay open)."""
    interrupted = registry.mark_interrupted()
    touched: set[str] = set()
    for r in interrupted.runs:
        touched.add(r.task_id)
        data = RunFinished(status=RunStatus.INTERRUPTED, stop_reason=StopReason.INTERRUPTED, error=why,
                           parent=r.parent_run, call_id=r.call_id)
        hub.publish(r.task_id, r.id, r.agent, EventType.RUN_FINISHED.value, data.to_wire())
    for t in interrupted.turns:
        touched.add(t.task_id)
        data = TurnFinished(turn=t.turn, state=TaskState.INTERRUPTED, status=RunStatus.INTERRUPTED,
                            stop_reason=StopReason.INTERRUPTED, error=why, run=t.root_run)
        hub.publish(t.task_id, t.root_run, "", EventType.TURN_FINISHED.value, data.to_wire())
    for task_id in touched:
        if not is_live(task_id):
            registry.set_task_last_seq(task_id, hub.last_seq(task_id))
            hub.close_task(task_id)
    return interrupted
