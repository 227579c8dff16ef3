"""Placing a new file under a name no other writer can take: written whole to an exclusive temporary name, then
hard-linked to its final name — the link fails when the name exists, which is what keeps concurrent writers (other
processes of the task) apart. Readers never see a half-written file. The fsync comes after, off the writer's way
(`workers/late_sync.py`): the parent waiting for a delegation's result does not wait for the disk."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from yagent.workers.late_sync import LATE_SYNC

__all__ = ["place_exclusive"]


def place_exclusive(tmp: Path, final: Path, data: bytes, placed: list[os.stat_result] | None = None) -> bool:
    """Write `data` to `final` if that name is free; False when it, or `tmp`, is taken (try another name). `placed`
    receives the file's status once written whole: its device, inode, size and modification time are what a later
    `lstat` of `final` shows while the name holds that file (its link count and change time are not)."""
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return False
    kept = False
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        try:
            os.link(tmp, final)  # fails if the name is taken: the exclusion between writers
        except FileExistsError:
            return False
        except OSError:
            if os.path.lexists(final):
                return False
            os.replace(tmp, final)  # a file system without hard links; the names are random and exclusive
        kept = True
        if placed is not None:
            with contextlib.suppress(OSError):
                placed.append(os.fstat(fd))
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if kept:
            LATE_SYNC.add(fd)  # the same inode as `final`: syncing it makes the placed file durable
        else:
            os.close(fd)
