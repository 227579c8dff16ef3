"""Noticing that control.sock is gone or no longer ours while the daemon runs.

systemd-logind removes /run/user/UID when the user's last session ends; `rm -rf` does the same. A daemon
that went on would be unreachable, and a second one could start beside it on the same state home.
`watch` asks the kernel (inotify) to say when the runtime directory's entries change, so an idle daemon
does not wake up to look; where inotify is missing the daemon checks `problem` on a timer instead.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import os
from collections.abc import Callable
from pathlib import Path

__all__ = ["ControlSocketWatch"]

log = logging.getLogger(__name__)

# inotify(7): entries created, deleted or moved in the directory, the directory itself deleted or moved.
# IN_UNMOUNT and IN_IGNORED (the watch is gone) come without asking.
_IN_CREATE, _IN_DELETE, _IN_MOVED_FROM, _IN_MOVED_TO = 0x100, 0x200, 0x40, 0x80
_IN_DELETE_SELF, _IN_MOVE_SELF = 0x400, 0x800
_WATCH_MASK = _IN_CREATE | _IN_DELETE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_DELETE_SELF | _IN_MOVE_SELF
_IN_NONBLOCK, _IN_CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC


def _inotify_fd(directory: Path) -> int | None:
    """A non-blocking inotify descriptor watching `directory`, or None where inotify cannot be had."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        init, add_watch = libc.inotify_init1, libc.inotify_add_watch
    except (OSError, AttributeError):
        return None
    fd = init(_IN_NONBLOCK | _IN_CLOEXEC)
    if fd < 0:
        log.info("no inotify (%s); checking the runtime directory every second instead",
                 os.strerror(ctypes.get_errno()))
        return None
    if add_watch(fd, os.fsencode(directory), ctypes.c_uint32(_WATCH_MASK)) < 0:
        log.info("cannot watch %s with inotify (%s); checking it every second instead", directory,
                 os.strerror(ctypes.get_errno()))
        os.close(fd)
        return None
    return fd


def _stamp(path: Path) -> tuple[int, int] | None:
    """Which file a path names (device, inode); None when nothing is there."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


class ControlSocketWatch:
    def __init__(self, path: Path) -> None:
        """Call once the socket is bound: the file there now is the one that is ours."""
        self.path = path
        self._stamp = _stamp(path)
        self._fd: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def watch(self, on_change: Callable[[], None]) -> bool:
        """Call `on_change` on the running loop whenever the socket's directory changes; False where the kernel
        cannot say (then poll `problem`)."""
        self._fd = _inotify_fd(self.path.parent)
        if self._fd is None:
            return False
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self._fd, self._changed, on_change)
        return True

    def _changed(self, on_change: Callable[[], None]) -> None:
        assert self._fd is not None
        try:
            while os.read(self._fd, 64 * 1024):  # what changed does not matter: `problem` looks
                pass
        except BlockingIOError:
            pass
        on_change()

    def close(self) -> None:
        if self._fd is not None:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = None

    def problem(self) -> str | None:
        """What happened to the socket file, or None while it is the one bound at start."""
        stamp = _stamp(self.path)
        if stamp == self._stamp:
            return None
        return "was removed" if stamp is None else "was replaced by another process"
