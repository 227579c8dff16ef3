"""Replacing a file atomically: readers see the old file or the new one, never a half-written one.

The one implementation for every package: daemon, workers and client all replace files (state, config,
unit file, event logs), and each copy of this had lost a different step (a fixed temp name two writers
share, a missing fsync, a temp file left behind by a failed write).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from .private_files import process_umask

__all__ = ["write_atomic"]

_TEMP_ATTEMPTS = 100  # unique names drawn before giving up, as tempfile.mkstemp does


def write_atomic(path: Path | str, data: bytes | Iterable[bytes], *, mode: int | None = None,
                 dir_fd: int | None = None) -> None:
    """Replace `path` with `data` (bytes, or an iterable of byte chunks written in order as they come).

    The new content goes to a uniquely named temp file in the target's directory (a rename is atomic only
    within one file system, and concurrent writers must not share a temp file), is flushed to disk, gets
    its mode and is renamed over `path`; then the directory is synced so the rename survives a crash.
    If anything fails on the way — including the chunk iterable raising — `path` is untouched and the
    temp file is removed.

    `mode` defaults to the existing file's permission bits (an edit keeps an executable bit), else to
    0o666 less the process umask, as a plain `open` would create it. Pass 0o600 for private state.
    A symlink at `path` is replaced by a regular file; to write through a link, pass its resolved target.

    With `dir_fd` (a directory opened for reading), `path` is one name in that directory: the temp file,
    the rename and the sync all go through the descriptor, so no step can be sent elsewhere by a link
    swapped into the path in between; the default mode is then that of a regular file at the name.
    """
    if dir_fd is not None:
        name = os.fspath(path)
        if not name or "/" in name or name in (".", ".."):
            raise ValueError(f"write_atomic with dir_fd takes one file name, not {name!r}")
        _replace_in(dir_fd, name, data, _mode_of_entry(dir_fd, name) if mode is None else mode)
        return
    path = Path(path)
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o666 & ~process_umask()
    parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _replace_in(parent, path.name, data, mode)
    finally:
        os.close(parent)


def _mode_of_entry(dir_fd: int, name: str) -> int:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return 0o666 & ~process_umask()
    return stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else 0o666 & ~process_umask()


def _replace_in(dir_fd: int, name: str, data: bytes | Iterable[bytes], mode: int) -> None:
    chunks = (data,) if isinstance(data, bytes | bytearray | memoryview) else data
    fd, tmp = _create_temp(dir_fd, name)
    try:
        with os.fdopen(fd, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
            os.fchmod(fh.fileno(), mode)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        raise
    os.fsync(dir_fd)  # make the rename itself durable


def _create_temp(dir_fd: int, name: str) -> tuple[int, str]:
    # O_EXCL | O_NOFOLLOW: a fresh file of our own, never an existing file or a link planted at the name.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(_TEMP_ATTEMPTS):
        tmp = f".{name}.{os.urandom(6).hex()}.tmp"
        try:
            return os.open(tmp, flags, 0o600, dir_fd=dir_fd), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no unused temp file name for {name} after {_TEMP_ATTEMPTS} tries")

