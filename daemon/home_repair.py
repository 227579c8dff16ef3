"""Repair of an existing state home at daemon start: group and other access removed from everything in it.

Installs made before yagent kept its state private have `$YAGENT_HOME` 0755 and its files 0644 (another
user could read a task's event log). New state is private by the umask (`yagent.ipc.private_files`); this
walk fixes what is already there, once per start.

The walk goes by descriptor, one name at a time with O_NOFOLLOW, and changes modes with fchmod on what it
opened: a symbolic link is never followed (not even one swapped in while the walk runs), so nothing outside
the home can have its mode changed. Sockets, FIFOs and devices are left as they are (opening them could
block or act); they are counted as skipped.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

__all__ = ["HomeRepair", "repair_home"]

_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_OPEN_TO_OTHERS = 0o077
_MAX_DEPTH = 64  # deeper than anything yagent makes; a deeper tree is not ours to walk


@dataclass
class HomeRepair:
    """What one walk did: entries made private, entries it could not (another owner, gone, special files)."""

    repaired: int = 0
    skipped: int = 0
    failed: int = 0


def repair_home(home: Path) -> HomeRepair:
    """Remove group and other access from `home` and everything beneath it; links are never followed."""
    report = HomeRepair()
    try:
        fd = os.open(home, _OPEN_DIR)
    except OSError:
        report.failed += 1  # a link or missing home: the daemon's own checks say what is wrong with it
        return report
    try:
        _make_private(fd, report)
        _walk(fd, report, depth=0)
    finally:
        os.close(fd)
    return report


def _walk(dir_fd: int, report: HomeRepair, depth: int) -> None:
    try:
        entries = list(os.scandir(dir_fd))
    except OSError:
        report.failed += 1
        return
    for entry in entries:
        try:
            kind = stat.S_IFMT(entry.stat(follow_symlinks=False).st_mode)
        except OSError:
            continue  # gone since the listing
        if kind == stat.S_IFLNK:
            continue  # the link's own mode means nothing; its target is not ours to change
        if kind not in (stat.S_IFDIR, stat.S_IFREG):
            report.skipped += 1
            continue
        try:
            fd = os.open(entry.name, _OPEN_DIR if kind == stat.S_IFDIR else _OPEN_FILE, dir_fd=dir_fd)
        except OSError as exc:
            # ELOOP: a link swapped in after the listing; ENOTDIR: a directory swapped for a file. Neither followed.
            report.failed += exc.errno not in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR)
            continue
        try:
            opened = stat.S_IFMT(os.fstat(fd).st_mode)
            if opened != kind:
                report.skipped += 1
                continue
            _make_private(fd, report)
            if kind == stat.S_IFDIR and depth < _MAX_DEPTH:
                _walk(fd, report, depth + 1)
        finally:
            os.close(fd)


def _make_private(fd: int, report: HomeRepair) -> None:
    mode = stat.S_IMODE(os.fstat(fd).st_mode)
    if not mode & _OPEN_TO_OTHERS:
        return
    try:
        os.fchmod(fd, mode & ~_OPEN_TO_OTHERS)
    except OSError:
        report.failed += 1  # owned by another user (a file copied in as root): reported, not fatal
        return
    report.repaired += 1
