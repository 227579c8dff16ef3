"""SIGTERM for a run's event loop, set up before the run and armed at its start.

A run's SIGTERM is the daemon's stop escalation (cancel the run once more) or, with the daemon gone, the
parent-death signal. asyncio's `loop.add_signal_handler` would do, but it first checks the signal against
`signal.valid_signals()`, which builds an enum member for every signal there is: 0.15-0.2 ms of a fresh worker's
way to its first model request, and as much again to remove it. This does what it does without that check:
Python's C-level handler writes the signal's number to a wakeup socket of our own (on whichever thread the kernel
delivered it), the loop reads that socket and calls the run's handler. The socket, the wakeup and the reader are
made while a warm worker waits for its run; arming installs the Python-level handler alone (a few µs).

One wakeup descriptor per process: nothing else in a worker may call `signal.set_wakeup_fd` or
`loop.add_signal_handler` (which sets its own) once this is installed, or SIGTERM would wake nobody.
"""

from __future__ import annotations

import asyncio
import signal
import socket
from collections.abc import Callable
from types import FrameType

__all__ = ["TermSignal"]


def _noted(signum: int, frame: FrameType | None) -> None:
    """The Python-level handler: its C side has written the signal to the wakeup socket; the loop does the rest."""


class TermSignal:
    """SIGTERM delivered to the loop as a call of the armed handler; until armed (and once disarmed), SIGTERM ends
    the process as it would without any of this."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)
        self._on_term: Callable[[], object] | None = None
        # The previous wakeup is none in a worker (asyncio sets one only with add_signal_handler); a full buffer
        # drops a signal's byte, and the loop reads the socket empty at every wake-up, so one SIGTERM always fits.
        self._previous = signal.set_wakeup_fd(self._writer.fileno(), warn_on_full_buffer=False)
        loop.add_reader(self._reader.fileno(), self._read)

    def arm(self, on_term: Callable[[], object]) -> None:
        """From now on a SIGTERM calls `on_term` on the loop (main thread only, as `signal.signal`)."""
        self._on_term = on_term
        signal.signal(signal.SIGTERM, _noted)
        signal.siginterrupt(signal.SIGTERM, False)  # as asyncio does: system calls restart rather than fail

    def disarm(self) -> None:
        """SIGTERM ends the process again."""
        self._on_term = None
        signal.signal(signal.SIGTERM, signal.SIG_DFL)

    def _read(self) -> None:
        termed = False
        while True:
            try:
                data = self._reader.recv(4096)
            except (BlockingIOError, InterruptedError):
                break
            if not data:
                break
            termed = termed or signal.SIGTERM in data
        if termed and self._on_term is not None:
            self._on_term()

    def close(self) -> None:
        """Take the wakeup and the reader off (the loop must still be open); SIGTERM ends the process again."""
        self.disarm()
        signal.set_wakeup_fd(self._previous)
        self._loop.remove_reader(self._reader.fileno())
        self._reader.close()
        self._writer.close()
