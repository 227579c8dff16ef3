"""Replacing a file atomically: readers see the old file or the new one, never a half-written one.

The one implementation for every package: daemon, workers and client all replace files (state, config,
unit file, event logs), and each copy of this had lost a different step (a fixed temp name two writers
share, a missing fsync, a temp file left behind by a failed write).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

__all__ = ["write_atomic"]


def write_atomic(path: Path, data: bytes | Iterable[bytes], *, mode: int | None = None) -> None:
    """Replace `path` with `data` (bytes, or an iterable of byte chunks written in order as they come).

    The new content goes to a uniquely named temp file in the target's directory (a rename is atomic only
    within one file system, and concurrent writers must not share a temp file), is flushed to disk, gets
    its mode and is renamed over `path`; then the directory is synced so the rename survives a crash.
    If anything fails on the way — including the chunk iterable raising — `path` is untouched and the
    temp file is removed.

    `mode` defaults to the existing file's permission bits (an edit keeps an executable bit), else to
    0o666 less the process umask, as a plain `open` would create it. Pass 0o600 for private state.
    A symlink at `path` is replaced by a regular file; to write through a link, pass its resolved target.
    """
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o666 & ~_umask()
    chunks = (data,) if isinstance(data, bytes | bytearray | memoryview) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    finally:
        os.close(dir_fd)


def _umask() -> int:
    # Read, not set-and-restore: os.umask() round trips race with other threads creating files.
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022
