"""Private state: what yagent keeps under `$YAGENT_HOME` is its owner's alone (directories 0700, files 0600).

yagentd and its workers run with umask 077, so whatever they create there — SQLite files, logs, event
logs, memory, grants — is private however it is created. The umask the user started yagent with is kept
in the environment (inherited by the forkserver and every worker), so what an agent creates in the
user's project — files, directories, its shell commands' output — gets the user's usual modes instead.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["PRIVATE_UMASK", "USER_UMASK_ENV", "keep_private", "make_private_dirs", "process_umask", "user_umask"]

PRIVATE_UMASK = 0o077
USER_UMASK_ENV = "YAGENT_USER_UMASK"
_FALLBACK_UMASK = 0o022


def keep_private() -> int:
    """Set the process umask to 077, remembering the one it replaces for the user's files; returns that one.

    The first yagent process of a chain records it (yagentd started by hand or by systemd); its workers,
    which inherit 077 already, keep the recorded value instead of their own.
    """
    previous = os.umask(PRIVATE_UMASK)
    os.environ.setdefault(USER_UMASK_ENV, f"{previous:04o}")
    return user_umask()


def user_umask() -> int:
    """The umask for files made in the user's project: the recorded one, else this process's own."""
    raw = os.environ.get(USER_UMASK_ENV, "")
    try:
        value = int(raw, 8)
    except ValueError:
        return process_umask()
    return value if 0 <= value <= 0o777 else process_umask()


def make_private_dirs(path: Path) -> None:
    """`mkdir -p` whose every new directory is 0700 (pathlib gives the parents the umask's mode)."""
    missing = []
    for directory in (path, *path.parents):
        if directory.is_dir():
            break
        missing.append(directory)
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            if not directory.is_dir():
                raise


def process_umask() -> int:
    """This process's umask, read without changing it."""
    # Read, not set-and-restore: an os.umask() round trip races with other threads creating files.
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return _FALLBACK_UMASK
