"""Noticing at once that yagentd is gone, whatever it died of.

Every worker holds the read end of a pipe whose write end only the daemon holds: the multiprocessing
data pipe its launcher keeps open for the worker's whole life (`multiprocessing.parent_process().sentinel`).
yagentd never writes on it after the start, so the pipe becomes readable exactly when the daemon's last
descriptor closes — on `kill -9`, a crash or an exit alike. A thread blocks on it (no polling), tells the
run at once, and gives the run a bounded time to write what it must before the process gives up on it:
a worker whose event loop is stuck must not outlive its daemon either.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import select
import threading
from collections.abc import Callable

from .quick_thread import QuickThread

__all__ = ["WRAP_UP_GRACE", "DaemonWatch", "daemon_liveness_fd"]

log = logging.getLogger(__name__)

# What a run gets, once its daemon is gone, to cancel its tools and write its result and memory.
WRAP_UP_GRACE = 5.0
GONE = "yagentd exited (the run's pipe to it closed)"


def daemon_liveness_fd() -> int | None:
    """The read end of the run's liveness pipe, or None when this process was not started by a launcher."""
    parent = multiprocessing.parent_process()
    if parent is None:
        return None
    try:
        return parent.sentinel
    except ValueError:  # a parent without a sentinel: nothing to watch
        return None


class DaemonWatch:
    """A thread that calls `on_gone(why)` (from that thread) as soon as the daemon's end of `fd` closes, then
    `give_up()` if `stop()` was not called within `grace` seconds."""

    def __init__(self, fd: int, *, on_gone: Callable[[str], None], give_up: Callable[[], None] | None = None,
                 grace: float = WRAP_UP_GRACE) -> None:
        self._fd = fd
        self._on_gone = on_gone
        self._give_up = give_up
        self._grace = grace
        self._stopped = threading.Event()
        self._wake_r, self._wake_w = os.pipe()
        self.gone = threading.Event()
        self._thread = QuickThread(self._watch, name="daemon-watch")  # started on the run's way: not waited for

    def start(self) -> DaemonWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        """The run has wrapped up (or the watch is no longer needed): never give up on it."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        os.write(self._wake_w, b"x")
        self._thread.join(1.0)
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _watch(self) -> None:
        poller = select.poll()  # not select(): it refuses descriptors past 1023
        poller.register(self._fd, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        try:
            ready = dict(poller.poll())
        except OSError as exc:
            ready = {self._fd: select.POLLNVAL}
            log.warning("cannot watch yagentd's end of the run's pipe (%s)", exc)
        if self._stopped.is_set() or self._fd not in ready:
            return
        if ready[self._fd] & select.POLLNVAL:  # our end was closed under us: say so, never call that a death
            log.warning("run's pipe to yagentd is no longer open here; only missing pings will tell of its death")
            return
        self.gone.set()
        self._on_gone(GONE)
        if self._give_up is not None and not self._stopped.wait(self._grace):
            self._give_up()
