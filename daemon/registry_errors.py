"""What can go wrong with state.db, and what to tell the user about it.

    sqlite3.Error
    ├── damage (SQLITE_CORRUPT "database disk image is malformed", SQLITE_NOTADB): it never heals while the
    │   daemon runs — stop it, move the file aside (after saving what `.recover` can), start again
    ├── trouble (locked by another program, disk full, I/O error, read-only): it may pass — close the
    │   other program, free disk space; progress writes are kept and retried meanwhile
    └── anything else (a constraint, a misuse): a yagent bug, reported as an internal error
    RegistryUnreadable: state.db cannot be used as yagent's registry at start; yagentd exits 2 with advice

While running, a failed read or write costs that one request (an error reply saying the above), never
the daemon: turns in flight go on and end for their followers.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

__all__ = ["RegistryUnreadable", "busy_advice", "damaged_advice", "foreign_advice", "is_damage", "is_trouble",
           "running_failure"]

_DAMAGE_CODES = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def is_damage(exc: BaseException) -> bool:
    """The file itself is damaged (or is not a database): retrying cannot help."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(exc, sqlite3.DatabaseError) and code is not None and code & 0xFF in _DAMAGE_CODES


def is_trouble(exc: BaseException) -> bool:
    """A failure of the registry file rather than of yagent's own statement: damage, a lock, a full disk."""
    return is_damage(exc) or isinstance(exc, sqlite3.OperationalError)


def _move_aside(path: Path) -> str:
    broken = path.with_name(path.name + ".broken")
    command = f"mv {path} {broken}"
    wal = path.with_name(path.name + "-wal")
    if wal.exists():  # the journal belongs with its database: moved apart, it could be replayed into another
        command += f" && mv {wal} {broken}-wal"
    return command


def damaged_advice(path: Path) -> str:
    broken = path.with_name(path.name + ".broken")
    return (f"move it aside with `{_move_aside(path)}` and start yagentd again: it creates a fresh registry (the "
            f"task list starts empty; conversations under {path.parent / 'tasks'} are kept). To keep what is "
            f"still readable of the task list, run `sqlite3 {broken} .recover | sqlite3 {path}` before starting")


def foreign_advice(path: Path) -> str:
    return (f"if YAGENT_HOME is where you meant it to be, move the file aside with `{_move_aside(path)}` and start "
            "yagentd again (it creates a fresh registry); otherwise set YAGENT_HOME to yagent's own directory")


def busy_advice(path: Path) -> str:
    return ("close any program holding it open (an `sqlite3` shell, a backup), check the disk's free space and "
            "the file's permissions")


def running_failure(path: Path, exc: sqlite3.Error) -> str:
    """What a client is told when a request failed on the registry while the daemon runs."""
    if is_damage(exc):
        return (f"yagentd's task registry {path} is damaged ({exc}); turns already running go on, but tasks cannot "
                f"be listed or started. Stop yagentd (`yagent daemon stop`), then {damaged_advice(path)}")
    return f"yagentd cannot use its task registry {path} ({exc}); {busy_advice(path)}, then try again"


class RegistryUnreadable(Exception):
    """state.db cannot be opened as yagent's registry (damaged, foreign, lost, from a newer yagent, unwritable)."""

    def __init__(self, path: Path, problem: str, advice: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem
        self.advice = advice

    def lines(self) -> list[str]:
        return [f"cannot open the task registry {self.path}: {self.problem}", self.advice]
