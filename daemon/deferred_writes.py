"""Progress writes to the registry that never raise: kept in order and retried while state.db is busy.

A status or a stop reason must reach its parent and its followers even when its row cannot be written yet
(`database is locked` while a backup or an `sqlite3` shell holds state.db, `database or disk is full`).
Such a write is kept, in order, and tried again with the next update or when the retry timer the daemon
sets through `on_deferred` fires. A damaged file (`database disk image is malformed`) does not heal while
the daemon runs: its writes are dropped, said once per failing streak with what to do.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .registry_errors import is_damage, running_failure

__all__ = ["RETRY_INTERVAL", "DeferredWrites"]

# How often deferred progress writes are tried again while the registry cannot be written.
RETRY_INTERVAL = 2.0

log = logging.getLogger(__name__)


class DeferredWrites:
    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self._db = db
        self._path = path
        self._pending: list[tuple[str, tuple[Any, ...]]] = []
        self._retry_at = 0.0
        self._failing = False
        # Called with the delay after which `flush` is worth trying again; the daemon schedules it.
        self.on_deferred: Callable[[float], None] | None = None

    def __len__(self) -> int:
        return len(self._pending)

    def record(self, sql: str, args: tuple[Any, ...]) -> None:
        """Write one progress update now if the database lets us, else keep it for later."""
        self._pending.append((sql, args))
        self.flush()

    def _report(self, problem: str) -> None:
        if not self._failing:  # once per failing streak: every status write would say it again
            self._failing = True
            log.error("%s", problem)

    def flush(self, *, force: bool = False) -> bool:
        """Write the deferred updates; True when none is left."""
        if not self._pending:
            return True
        if not force and time.monotonic() < self._retry_at:
            return False  # back off: each attempt can block the event loop for the busy timeout
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for sql, args in self._pending:
                    self._db.execute(sql, args)
                self._db.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            if is_damage(exc):  # a damaged file does not heal while the daemon runs: retrying only piles up
                self._report(f"cannot record {len(self._pending)} progress updates in the task registry: "
                             f"{running_failure(self._path, exc)}")
                self._pending.clear()
                return True
            if not isinstance(exc, sqlite3.OperationalError):  # a statement that can never succeed
                log.exception("dropping %d registry updates that %s refuses", len(self._pending), self._path)
                self._pending.clear()
                return True
            # Locked, full, I/O: worth another try.
            self._retry_at = time.monotonic() + RETRY_INTERVAL
            self._report(f"cannot write the task registry {self._path}: {exc}; keeping the update in memory and "
                         f"retrying every {RETRY_INTERVAL:.0f}s — close any program holding the file open (an "
                         "`sqlite3` shell, a backup) or free disk space")
            if self.on_deferred is not None:
                self.on_deferred(RETRY_INTERVAL)
            return False
        if self._failing:
            self._failing = False
            log.warning("the task registry %s is writable again; wrote %d deferred updates", self._path,
                        len(self._pending))
        self._pending.clear()
        return True
