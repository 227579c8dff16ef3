"""One daemon per runtime directory.

The lock must be held before binding: a second `bind` to the same ipc:// path silently steals the
socket from the first daemon. flock(2) is released by the kernel when its holder dies, so a lock file
left by a dead daemon is simply taken over; the pid written inside only serves the error message.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

__all__ = ["AlreadyRunning", "InstanceLock"]


class AlreadyRunning(Exception):
    def __init__(self, pid: int | None, path: Path) -> None:
        who = f"pid {pid}" if pid else "another process"
        super().__init__(f"yagentd is already running ({who} holds {path}); stop it with `yagent daemon stop`")
        self.pid = pid


class InstanceLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = int(os.pread(fd, 32, 0).decode().strip() or 0) or None
            except ValueError:
                holder = None
            os.close(fd)
            raise AlreadyRunning(holder, self.path) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
