"""Process groups started by a run's tools, so the run can take every one of them down at exit."""

from __future__ import annotations

import os
import signal
import threading
import time

import psutil


class ProcessRegistry:
    """Tracks the process groups `run_bash` starts (each command leads its own session and group).

    The run calls `kill_all()` when it ends, normally or not: background jobs and any grandchildren they
    forked die with it, because signals go to the whole group rather than to one pid.
    """

    def __init__(self) -> None:
        self._groups: dict[int, str] = {}
        self._lock = threading.Lock()

    def add(self, pgid: int, label: str) -> None:
        with self._lock:
            self._groups[pgid] = label

    def discard(self, pgid: int) -> None:
        with self._lock:
            self._groups.pop(pgid, None)

    def groups(self) -> dict[int, str]:
        """Live registrations: process group id -> what started it."""
        with self._lock:
            return dict(self._groups)

    def kill_all(self, grace: float = 1.0) -> list[int]:
        """SIGTERM every group, SIGKILL whatever is left after `grace` seconds; returns the groups signalled."""
        with self._lock:
            groups = list(self._groups)
            self._groups.clear()
        for pgid in groups:
            terminate_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while any(group_alive(g) for g in groups) and time.monotonic() < deadline:
            time.sleep(0.02)  # bounded exit-path grace; the members are not ours to await
        for pgid in groups:
            terminate_group(pgid, signal.SIGKILL)
        return groups


def terminate_group(pgid: int, sig: signal.Signals) -> None:
    """Send `sig` to a whole process group, ignoring a group that is already gone."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_alive(pgid: int) -> bool:
    """True while any member of the group is still running (zombies waiting to be reaped do not count)."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                return True
        except (ProcessLookupError, psutil.Error):
            continue
    return False


def kill_descendants() -> int:
    """SIGKILL every live descendant of this process; returns how many were signalled.

    For a worker whose daemon is gone: nobody else is left to sweep what its tools started.
    """
    try:
        found = psutil.Process().children(recursive=True)
    except psutil.Error:
        return 0
    for proc in found:
        try:
            proc.kill()
        except psutil.Error:
            pass
    return len(found)
