"""Which process a recorded pid names: the pid together with the process's start time.

A pid alone is a number the kernel hands out again once its process is gone, so a daemon that finds a pid
in the registry after a restart must not signal it on that evidence: the start time recorded with it
(psutil's `create_time`) has to match the running process's too. Linux keeps a process's start in clock
ticks since boot (1/100 s), so the same process always gives the same value, and a later process reusing
the pid would have to have started in the same tick as the one recorded.
"""

from __future__ import annotations

import psutil

__all__ = ["SAME_START", "same_process", "start_time"]

# How close two start times must be to name one process: two clock ticks, for float rounding.
SAME_START = 0.02


def start_time(pid: int) -> float:
    """The process's start time (seconds since the epoch), or 0.0 if there is no such process."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return 0.0


def same_process(pid: int, started_at: float) -> psutil.Process | None:
    """The process with this pid if it is the one that started at `started_at`, else None.

    A start time of 0 (not recorded) never matches: without it the pid proves nothing.
    """
    if pid <= 0 or started_at <= 0:
        return None
    try:
        proc = psutil.Process(pid)
        if abs(proc.create_time() - started_at) <= SAME_START:
            return proc
    except psutil.Error:
        pass
    return None
