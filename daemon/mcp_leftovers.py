"""MCP server processes a dead predecessor left: found from state.db's records and killed before anything starts.

A server runs in a session and process group of its own, so it survives a `kill -9` of the daemon that started
it (the most reported MCP defect of other assistants: hundreds of orphans after crashes). Each record names the
server's pid, its start time and the marker in its environment. What is killed:
- the leader, only when its pid AND start time match (a process that reuses the pid is never touched), with
  every process of its group;
- when the leader is gone, what is left of its group: while any member lives the kernel gives no other process
  that number, so a process in group `pid` is one of the server's;
- any process carrying the server's marker (children that left the group with setsid).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

import psutil

from .process_identity import same_process, start_time
from .recovery import LEFTOVER_KILL_WAIT, kill_and_wait
from .registry import LeftoverMcpServer

__all__ = ["MARKER_ENV", "kill_leftover_servers"]

MARKER_ENV = "YAGENT_MCP_SERVER"  # set in each server's environment: the sweep finds what a daemon started

log = logging.getLogger(__name__)


def _group_members(pgid: int, skip: set[int]) -> list[int]:
    found = []
    for proc in psutil.process_iter(["pid"]):
        if proc.pid in skip:
            continue
        try:
            if os.getpgid(proc.pid) == pgid:
                found.append(proc.pid)
        except OSError:
            continue
    return found


def _marked(markers: set[str], skip: set[int]) -> list[int]:
    found = []
    for proc in psutil.process_iter(["pid"]):
        if proc.pid in skip:
            continue
        try:
            if proc.environ().get(MARKER_ENV) in markers:
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


def kill_leftover_servers(leftovers: Sequence[LeftoverMcpServer], *, wait: float = LEFTOVER_KILL_WAIT) -> list[int]:
    """Kill every process left of `leftovers` and wait until they have ended; returns the pids killed.
    Blocking (it scans processes): run it in a thread."""
    if not leftovers:
        return []
    me = psutil.Process()
    ours = {me.pid, *(p.pid for p in me.children(recursive=True))}
    doomed: dict[int, float] = {}

    def doom(pid: int) -> None:
        started = start_time(pid)
        if started and pid not in ours:
            doomed[pid] = started

    for left in leftovers:
        leader = same_process(left.pid, left.pid_started_at)
        if leader is not None:
            doom(leader.pid)
            for pid in _group_members(left.pid, ours):
                doom(pid)
        elif not psutil.pid_exists(left.pid):
            for pid in _group_members(left.pid, ours):
                doom(pid)
        else:
            log.info("MCP server %s of project %s: pid %d now names another process; leaving it alone", left.name,
                     left.project_id, left.pid)
    for pid in _marked({left.marker for left in leftovers if left.marker}, ours):
        doom(pid)
    if not doomed:
        return []
    killed, alive = kill_and_wait(doomed, wait)
    if killed:
        log.warning("killed %d leftover processes of %d MCP servers a previous yagentd left (pids %s)",
                    len(killed), len(leftovers), ", ".join(map(str, sorted(killed))))
    if alive:
        log.error("MCP server processes left by a previous yagentd are still alive %.0fs after SIGKILL (pids %s)",
                  wait, ", ".join(map(str, alive)))
    return killed
