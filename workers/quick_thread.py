"""A thread whose start does not wait for the thread to run.

`threading.Thread.start` blocks until the new thread has taken the GIL and said it runs: in a freshly forked
worker, whose other threads (libzmq's, the daemon watch) want the CPU too, that handshake took 0.2-0.5 ms, and a
run started two such threads on its way to its first model request. A `QuickThread` is started with
`_thread.start_new_thread` (40-80 µs) and offers what the worker's own threads use of `threading.Thread`: whether it
still runs, and a bounded join. It is not in `threading.enumerate()`, and the interpreter's exit does not wait for
it (the worker leaves with `os._exit`; these threads were daemons anyway).
"""

from __future__ import annotations

import _thread
import logging
import threading
from collections.abc import Callable

__all__ = ["QuickThread"]

log = logging.getLogger(__name__)


class QuickThread:
    def __init__(self, target: Callable[[], object], *, name: str) -> None:
        self.name = name
        self._target = target
        self._started = False
        self._ended = threading.Event()

    def start(self) -> None:
        if self._started:
            raise RuntimeError(f"thread {self.name} started twice")
        _thread.start_new_thread(self._main, ())  # raises when no thread can be made: then it was never started
        self._started = True

    def is_alive(self) -> bool:
        """Started and not ended yet (True from `start` on, even before the thread has run)."""
        return self._started and not self._ended.is_set()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread's end (at most `timeout` seconds); True when it has ended. A thread never started
        has nothing to wait for."""
        return not self._started or self._ended.wait(timeout)

    def _main(self) -> None:
        threading.current_thread().name = self.name  # what log records of this thread name it by
        try:
            self._target()
        except BaseException:  # nothing above this frame would say it: `_thread` reports to stderr only
            log.exception("thread %s failed", self.name)
        finally:
            self._ended.set()
