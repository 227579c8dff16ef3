"""Progress writes to the registry that never raise: kept in order and retried while state.db is busy.

A status or a stop reason must reach its parent and its followers even when its row cannot be written yet
(`database is locked` while a backup or an `sqlite3` shell holds state.db, `database or disk is full`).
Such a write is kept, in order, and tried again with the next update or when the retry timer the daemon
sets through `on_deferred` fires.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
        except sqlite3.OperationalError as exc:  # locked, full, I/O: worth another try
            self._retry_at = time.monotonic() + RETRY_INTERVAL
            if not self._failing:
                self._failing = True
                log.error("cannot write the task registry %s: %s; keeping the update in memory and retrying "
                          "every %.0fs — close any program holding the file open (an `sqlite3` shell, a backup) "
                          "or free disk space", self._path, exc, RETRY_INTERVAL)
            if self.on_deferred is not None:
                self.on_deferred(RETRY_INTERVAL)
            return False
        except sqlite3.Error:  # a statement that can never succeed must not hold back the rest forever
            log.exception("dropping %d registry updates that %s refuses", len(self._pending), self._path)
            self._pending.clear()
            return True
        if self._failing:
            self._failing = False
            log.warning("the task registry %s is writable again; wrote %d deferred updates", self._path,
                        len(self._pending))
        self._pending.clear()
        return True
