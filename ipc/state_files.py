"""Opening what a run may have written in yagent's state home: never through a link, never waiting on a pipe.

A run's worker process may write its task's directory, its scratch directory and a few shared ones (approvals,
breaker, blueprints); the model's own commands may write the scratch directory too (not the others: their rules
leave them out), and so may a command the user let run outside the sandbox, a turn sent with --full-yolo, or a fault
in a worker. What is left there is read later by other runs, unconfined ones among them. So whatever sits at a name
there is not trusted to be what yagent put there: a symbolic link to a file that a later run can reach and this one
could not, a named pipe that makes a plain `open` wait for ever, a directory where a file belongs, or a file too
large to hold. Such names are read and written through here (or through `atomic_file.write_atomic`, which replaces
a link rather than following it, or an open of their own that refuses the same things), and what is found there
instead of a regular file or directory is refused with `StateFileError`, an `OSError` that names it and says what
to do: callers that already take a damaged or unwritable state file in their stride take this one the same way.

`open_state_file` and `state_dir` look at the last name of a path. Where the directory above it may be swapped while
it is used (one the model's commands write: `scratch/<run>/run_bash`), `open_state_dir` gives a descriptor of it and
the file is opened relative to that (`dir_fd`); elsewhere a directory is checked once (`state_dir`, `is_own_dir`):
that stops what was planted before, not a process racing the check.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

__all__ = ["StateFileError", "is_own_dir", "open_state_dir", "open_state_file", "read_state_bytes", "state_dir"]


class StateFileError(OSError):
    """Something other than the regular file or directory yagent keeps at a name of its state home."""


def open_state_file(path: Path | str, flags: int, mode: int = 0o600, *, dir_fd: int | None = None,
                    shown: Path | None = None) -> int:
    """`path` opened with `flags` (O_NOFOLLOW and O_CLOEXEC added): a blocking descriptor of a regular file. With
    `dir_fd` (`open_state_dir`), `path` is a name in that directory, and `shown` its whole path for messages.
    FileNotFoundError passes (without O_CREAT), as does a directory above it that is missing or not one; anything
    else at the name is a `StateFileError`."""
    try:  # O_NONBLOCK: opening a pipe must not wait for its other end; a regular file ignores it
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
            raise _refusal(path, exc.errno, "a regular file", dir_fd=dir_fd, shown=shown) from exc
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _refusal(path, errno.EINVAL, "a regular file", dir_fd=dir_fd, shown=shown)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_state_bytes(path: Path | str, limit: int, *, dir_fd: int | None = None, shown: Path | None = None) -> bytes:
    """The whole of the regular file `path`, at most `limit` bytes (a larger one is a `StateFileError`: its size
    and where the limit comes from are the caller's to explain). FileNotFoundError passes. `dir_fd` and `shown` as
    for `open_state_file`."""
    fd = open_state_file(path, os.O_RDONLY, dir_fd=dir_fd, shown=shown)
    path = shown or path
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise StateFileError(errno.EFBIG, f"{path} is {size} bytes, more than the {limit} yagent reads there: "
                                              "it was not written by yagent; move it aside")
        chunks: list[bytes] = []
        got = 0
        # Its size and a byte more (to see it did not grow), then 64 KiB at a time: never a buffer of the limit.
        while got <= limit and (chunk := os.read(fd, min(limit + 1 - got, max(size + 1 - got, 1 << 16)))):
            chunks.append(chunk)
            got += len(chunk)
    finally:
        os.close(fd)
    if got > limit:  # it grew after the stat
        raise StateFileError(errno.EFBIG, f"{path} grew past the {limit} bytes yagent reads there while it was "
                                          "read; move it aside")
    return b"".join(chunks)


def state_dir(path: Path) -> Path:
    """`path` made (with its parents) if missing, and checked to be a directory itself rather than a link to one:
    files made in it then stay in the state home. Returns `path`."""
    _make_dir(path)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise _refusal(path, errno.ENOTDIR, "a directory", info.st_mode)
    return path


def open_state_dir(path: Path) -> int:
    """`path` made (with its parents) if missing and opened as a directory, never through a link in its place: a
    descriptor (close-on-exec) the caller closes, for opening files in it that a swap of its name cannot redirect."""
    _make_dir(path)
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _refusal(path, exc.errno, "a directory") from exc
        raise


def _make_dir(path: Path) -> None:
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except FileExistsError:  # a file, or a link to nothing or to a file: the caller says what it is
        pass


def is_own_dir(path: Path) -> bool:
    """Whether `path` is a directory itself (False for a link to one, anything else, or nothing): a reader lists
    and opens nothing through a directory link."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _refusal(path: Path | str, code: int, expected: str, mode: int | None = None, *,
             dir_fd: int | None = None, shown: Path | None = None) -> StateFileError:
    if mode is None:
        try:
            mode = os.lstat(path, dir_fd=dir_fd).st_mode
        except OSError:
            mode = 0
    remedy = "remove it"
    if stat.S_ISLNK(mode):
        remedy = "remove it (remove the link, not what it leads to)"
        try:
            found = f"a symbolic link to {os.readlink(path, dir_fd=dir_fd)!r}, which yagent does not follow"
        except OSError:
            found = "a symbolic link, which yagent does not follow"
    elif stat.S_ISFIFO(mode):
        found = "a named pipe"
    elif stat.S_ISDIR(mode):
        found = "a directory"
    elif stat.S_ISREG(mode):
        found = "a regular file"
    elif stat.S_ISSOCK(mode):
        found = "a socket"
    elif mode:
        found = "a device or special file"
    else:
        found = "something that cannot be looked at"
    return StateFileError(code, f"{shown or path} is {found}, not {expected} of yagent's; something other than "
                                f"yagent put it there: {remedy}")
