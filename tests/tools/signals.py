"""Test signals with deadlines: a FIFO a shell command writes to, and process-exit notification (pidfd)."""

from __future__ import annotations

import os
import select
import time
from pathlib import Path


class FifoLine:
    """A named pipe a command can `echo ... > path` into; `read_line` waits for it with a deadline.

    We hold a write end ourselves so the pipe never reports end-of-file before the command writes.
    """

    def __init__(self, path: Path):
        self.path = path
        os.mkfifo(path)
        self._r = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self._w = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        self._buffer = b""

    def read_line(self, timeout: float = 10.0) -> str:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"nothing was written to {self.path} within {timeout} s")
            ready, _, _ = select.select([self._r], [], [], remaining)
            if ready:
                self._buffer += os.read(self._r, 4096)
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    def close(self) -> None:
        os.close(self._r)
        os.close(self._w)


def wait_terminated(pids: list[int], timeout: float = 10.0) -> list[int]:
    """Wait until every pid has terminated (zombies count: pid 1 may never reap them); returns the survivors."""
    fds: dict[int, int] = {}
    for pid in pids:
        try:
            fds[pid] = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
    alive = set(fds)
    deadline = time.monotonic() + timeout
    try:
        while alive:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            ready, _, _ = select.select([fds[p] for p in alive], [], [], remaining)
            alive -= {p for p in alive if fds[p] in ready}
    finally:
        for fd in fds.values():
            os.close(fd)
    return sorted(alive)
