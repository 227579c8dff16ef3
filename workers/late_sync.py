"""fsync behind a run's critical path: files are made durable after the work that waits for them went on.

A worker writes files others read at once (a board note, its rollout). Readers on this machine see the bytes as
soon as they are written: the page cache is shared. What an fsync adds is only that they survive a power loss, and
on a busy disk one takes from a fraction of a millisecond to several, while the parent waits for the delegation's
result behind it. So the file is written whole and put in place as before, and its descriptor is handed here: one
thread syncs the descriptors in order, and the worker waits for it only on its way out, after its result is
delivered (`wait`, in `workers/entry.py`). A power loss in that window can cost the newest note or the rollout's
last records; the readers of both already take a torn or empty file as damaged, not as an error.

The thread does not sync at once either: a file handed over on a run's way to its next message (a delegation's
note, written as the parent resumes) is synced `SYNC_DELAY` later, when that message is out and the run waits,
because the thread's wake-ups around each fsync take the interpreter from the run meanwhile. `wait` cuts the
delay short.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable

__all__ = ["LATE_SYNC", "SYNC_DELAY", "LateSync"]

SYNC_DELAY = 0.02


class LateSync:
    """Descriptors to fsync and close, in the order given, on a thread of its own (started at the first one)."""

    def __init__(self, sync: Callable[[int], None] = os.fsync, delay: float = SYNC_DELAY) -> None:
        self._sync = sync  # the disk seam
        self._delay = delay
        self._hurry = threading.Event()  # set by `wait`: sync what is there without the delay
        self._queue: queue.SimpleQueue[int] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pending = 0
        self._idle = threading.Condition(self._lock)
        self.failures = 0  # descriptors whose fsync failed (a full or vanished disk): counted, never raised

    def add(self, fd: int) -> None:
        """Take `fd` over: it is synced and closed later. Never blocks, never raises."""
        with self._lock:
            self._pending += 1
            if self._thread is None:
                # Not before: a warm worker has no thread until its run starts (Landlock confines the calling thread).
                self._thread = threading.Thread(target=self._run, name="late-sync", daemon=True)
                self._thread.start()
        self._queue.put(fd)

    def wait(self, timeout: float) -> bool:
        """Block until every descriptor added so far is synced; False if `timeout` seconds passed first."""
        with self._idle:
            if self._pending:  # cleared again once they are synced (under this lock): later files get the delay
                self._hurry.set()
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def _run(self) -> None:
        while True:
            fds = [self._queue.get()]
            self._hurry.wait(self._delay)  # once per spell: what was handed over meanwhile goes with it
            with contextlib.suppress(queue.Empty):
                while True:
                    fds.append(self._queue.get_nowait())
            for fd in fds:
                self._sync_and_close(fd)

    def _sync_and_close(self, fd: int) -> None:
        try:
            self._sync(fd)
        except OSError:
            with self._lock:
                self.failures += 1
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)
            with self._idle:
                self._pending -= 1
                if self._pending == 0:
                    self._hurry.clear()
                self._idle.notify_all()

    def _forked(self) -> None:
        # A forked child has none of the parent's threads: what it adds gets a thread of its own.
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._hurry = threading.Event()
        self._queue = queue.SimpleQueue()
        self._thread = None
        self._pending = 0


LATE_SYNC = LateSync()
os.register_at_fork(after_in_child=LATE_SYNC._forked)
