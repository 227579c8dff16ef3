"""A process the daemon starts for one job (a resume inspection, a checkpoint, a blueprint view), as the thread
that waits on it knows it.

The event loop may give up on the job at any moment — its deadline passed, the request was cancelled, the daemon is
stopping — even while the forkserver is still starting the process: whichever of the two comes second kills it.
A process that has exited is never signalled (its pid may be someone else's by then).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection, wait

from .launcher import RunHandle

__all__ = ["EXIT_GRACE", "JobProcess"]

EXIT_GRACE = 2.0  # seconds a process that replied gets to exit before it is killed


class JobProcess:
    """`started` by the thread once launched, `abandon`ed by the loop, `finish`ed by the thread when done with it.

    `group`: the process runs children in its own process group (git), which are killed with it."""

    def __init__(self, *, group: bool = False, on_started: Callable[[], None] = lambda: None) -> None:
        self._lock = threading.Lock()
        self._handle: RunHandle | None = None
        self._abandoned = False
        self._group = group
        self._on_started = on_started

    def started(self, handle: RunHandle) -> bool:
        """Keep `handle`; False (and the process killed) when the job was given up on meanwhile."""
        with self._lock:  # held while killing: the thread cannot close the handle under the kill
            self._handle = handle
            if self._abandoned:
                self._kill(handle)
                return False
        self._on_started()
        return True

    def abandon(self) -> None:
        """The loop gives up on the job: kill the process now, or as soon as it is started."""
        with self._lock:
            self._abandoned = True
            if self._handle is not None:
                self._kill(self._handle)

    def finish(self, handle: RunHandle, reader: Connection) -> None:
        """The thread is done with the process: it gets `EXIT_GRACE` to exit, is killed otherwise, and is let go."""
        if not wait([handle.sentinel], timeout=EXIT_GRACE):
            self._kill(handle)
            wait([handle.sentinel], timeout=EXIT_GRACE)
        with self._lock:
            self._handle, self._abandoned = None, True
        reader.close()
        handle.close()

    def _kill(self, handle: RunHandle) -> None:
        if wait([handle.sentinel], timeout=0):
            return  # exited: its pid may be someone else's by now
        if self._group:
            with contextlib.suppress(OSError):
                os.killpg(handle.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.kill(handle.pid, signal.SIGKILL)
