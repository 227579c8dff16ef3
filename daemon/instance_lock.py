"""One daemon per runtime directory, and one per state home.

The lock must be held before binding: a second `bind` to the same ipc:// path silently steals the
socket from the first daemon. flock(2) is released by the kernel when its holder dies, so a lock file
left by a dead daemon is simply taken over; the pid written inside only serves the error message.

The home lock (`$YAGENT_HOME/yagentd.lock`) covers the other way two daemons can meet: the same home
with different runtime directories. Both would write one state.db, and the second would mark every run
of the first as interrupted at its start.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

__all__ = ["AlreadyRunning", "InstanceLock"]


class AlreadyRunning(Exception):
    def __init__(self, pid: int | None, path: Path, note: str = "") -> None:
        who = f"pid {pid}" if pid else "another process"
        where = f" (its runtime dir: {note})" if note else ""
        super().__init__(f"yagentd is already running ({who} holds {path}{where}); "
                         "stop it with `yagent daemon stop`")
        self.pid = pid
        self.note = note


class InstanceLock:
    def __init__(self, path: Path, note: str = "") -> None:
        self.path = path
        self.note = note  # written after the pid; names where the holder serves, for the error message
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 4096, 0).decode(errors="replace").splitlines()
            try:
                holder = int(text[0].strip() or 0) if text else None
            except ValueError:
                holder = None
            os.close(fd)
            raise AlreadyRunning(holder or None, self.path, text[1].strip() if len(text) > 1 else "") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n{self.note}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
