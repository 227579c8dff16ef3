"""The shape of state.db: its identity, its version, the steps that bring an older one up to date, and the
checks made before the daemon trusts it.

`open_registry`, in order:
1. A missing file is created whole: built under a temporary name and renamed into place, so yagent never
   leaves a half-made state.db behind; a `-wal` left by a database that is gone is moved aside, never
   paired with the new one.
2. `PRAGMA quick_check`: a damaged file is refused with what to do (its cost: `bench/registry_open.py`).
3. Identity: every registry since identities carries `PRAGMA application_id` = APPLICATION_ID; one written
   before (id 0) is recognised by having exactly yagent's tables. A file with no tables (zero bytes, or an
   empty database) is initialised — unless the home holds event logs or conversations, which means a
   registry was there and is lost: that is refused, so old tasks never vanish silently. Anything else is
   another program's database: refused, with the advice to move it aside.
4. Version: `PRAGMA user_version`. Newer than this yagent knows: refused. Older: the missing MIGRATIONS run,
   all in one transaction with the version and identity, so a failed upgrade leaves the file as it was.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .registry_errors import RegistryUnreadable, busy_advice, damaged_advice, foreign_advice, is_damage

__all__ = ["APPLICATION_ID", "MIGRATIONS", "SCHEMA_VERSION", "TABLES", "Migration", "open_registry"]

APPLICATION_ID = int.from_bytes(b"yAgt", "big")  # 0x79416774: "this SQLite file is yagent's registry"
# The tables of the registries written before they carried their identity (how such a file is recognised),
# and every table of the current schema.
FIRST_TABLES = frozenset({"projects", "tasks", "turns", "runs"})
TABLES = FIRST_TABLES | {"mcp_servers", "mcp_approvals", "subagents", "checkpoints", "checkpoint_paths",
                         "task_approvals"}

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Migration:
    """One step from schema version N to N+1: what it changes, and the change (run inside a transaction)."""

    what: str
    apply: Callable[[sqlite3.Connection], None]


def _statements(*sql: str) -> Callable[[sqlite3.Connection], None]:
    def apply(db: sqlite3.Connection) -> None:
        for statement in sql:  # one by one: `executescript` would commit the migration's transaction
            db.execute(statement)

    return apply


def _add_worker_start(db: sqlite3.Connection) -> None:
    if "worker_started_at" not in {row[1] for row in db.execute("PRAGMA table_info(runs)")}:
        db.execute("ALTER TABLE runs ADD COLUMN worker_started_at REAL NOT NULL DEFAULT 0")


_USAGE_COLUMNS = ("requests INTEGER", "input_tokens INTEGER", "cached_input_tokens INTEGER", "output_tokens INTEGER",
                  "cost_usd REAL", "unpriced_requests INTEGER", "slot_wait_seconds REAL", "cpu_seconds REAL")


def _add_run_usage(db: sqlite3.Connection) -> None:
    present = {row[1] for row in db.execute("PRAGMA table_info(runs)")}
    for column in _USAGE_COLUMNS:
        name = column.split()[0]
        if name not in present:
            db.execute(f"ALTER TABLE runs ADD COLUMN {column} NOT NULL DEFAULT 0")
    db.execute("CREATE INDEX IF NOT EXISTS runs_by_end ON runs(ended_at)")  # the day's spending at start


def _add_turn_launch(db: sqlite3.Connection) -> None:
    present = {row[1] for row in db.execute("PRAGMA table_info(turns)")}
    for column in ("agent TEXT NOT NULL DEFAULT ''", "yolo TEXT NOT NULL DEFAULT 'none'",
                   "resumes INTEGER NOT NULL DEFAULT 0"):
        if column.split()[0] not in present:
            db.execute(f"ALTER TABLE turns ADD COLUMN {column}")


def _add_turn_model(db: sqlite3.Connection) -> None:
    if "model_override" not in {row[1] for row in db.execute("PRAGMA table_info(turns)")}:
        db.execute("ALTER TABLE turns ADD COLUMN model_override TEXT NOT NULL DEFAULT ''")


def _add_run_unconfined(db: sqlite3.Connection) -> None:
    if "unconfined" not in {row[1] for row in db.execute("PRAGMA table_info(runs)")}:
        db.execute("ALTER TABLE runs ADD COLUMN unconfined TEXT NOT NULL DEFAULT ''")


MIGRATIONS: tuple[Migration, ...] = (
    Migration("the first registry: projects, tasks, turns, runs", _statements(
        """CREATE TABLE IF NOT EXISTS projects (
            id TEXT PRIMARY KEY,
            path TEXT NOT NULL UNIQUE,
            created_at REAL NOT NULL
        )""",
        """CREATE TABLE IF NOT EXISTS tasks (
            id TEXT PRIMARY KEY,
            project_id TEXT NOT NULL REFERENCES projects(id),
            title TEXT NOT NULL,
            state TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            last_seq INTEGER NOT NULL DEFAULT 0
        )""",
        "CREATE INDEX IF NOT EXISTS tasks_by_project ON tasks(project_id, updated_at)",
        """CREATE TABLE IF NOT EXISTS turns (
            task_id TEXT NOT NULL REFERENCES tasks(id),
            idx INTEGER NOT NULL,
            text TEXT NOT NULL,
            state TEXT NOT NULL,
            root_run TEXT NOT NULL DEFAULT '',
            output TEXT NOT NULL DEFAULT '',
            created_at REAL NOT NULL,
            ended_at REAL NOT NULL DEFAULT 0,
            PRIMARY KEY (task_id, idx)
        )""",
        """CREATE TABLE IF NOT EXISTS runs (
            id TEXT PRIMARY KEY,
            task_id TEXT NOT NULL REFERENCES tasks(id),
            turn INTEGER NOT NULL,
            parent_run TEXT,
            agent TEXT NOT NULL,
            status TEXT NOT NULL,
            stop_reason TEXT NOT NULL DEFAULT '',
            call_id TEXT NOT NULL DEFAULT '',
            input TEXT NOT NULL DEFAULT '',
            output TEXT NOT NULL DEFAULT '',
            error TEXT NOT NULL DEFAULT '',
            pid INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL,
            started_at REAL NOT NULL DEFAULT 0,
            ended_at REAL NOT NULL DEFAULT 0
        )""",
        "CREATE INDEX IF NOT EXISTS runs_by_task ON runs(task_id, created_at)",
    )),
    Migration("runs.worker_started_at: the worker's process start time, so a restarted daemon tells its "
              "predecessor's leftover workers from processes that merely reuse their pid", _add_worker_start),
    Migration("what each run used: model requests, tokens, cost, model-slot wait and CPU time, for `yagent ps` "
              "and the day's spending limit", _add_run_usage),
    Migration("turns.agent, turns.yolo, turns.resumes: how a turn was started, so an interrupted one is resumed as "
              "it ran (and which turn a resumed one continues)", _add_turn_launch),
    Migration("turns.model_override: the model a turn was started on (`/model`), so a resumed one keeps it",
              _add_turn_model),
    Migration("mcp_servers: the MCP server processes the daemon started (pid, start time, marker), so a daemon "
              "that starts after a crash kills what its predecessor left; mcp_approvals: the .mcp.json servers "
              "the user approved, per project", _statements(
        """CREATE TABLE IF NOT EXISTS mcp_servers (
            project_id TEXT NOT NULL,
            name TEXT NOT NULL,
            pid INTEGER NOT NULL,
            pid_started_at REAL NOT NULL,
            marker TEXT NOT NULL,
            spawned_at REAL NOT NULL,
            PRIMARY KEY (project_id, name)
        )""",
        """CREATE TABLE IF NOT EXISTS mcp_approvals (
            project_id TEXT NOT NULL,
            name TEXT NOT NULL,
            fingerprint TEXT NOT NULL,
            approved_at REAL NOT NULL,
            PRIMARY KEY (project_id, name)
        )""",
    )),
    Migration("runs.unconfined: why the kernel did not confine a run, so `yagent ps` still says it once the run "
              "has ended", _add_run_unconfined),
    Migration("subagents: the continuable sub-agents of each task (who delegated to it, its reuse key, its "
              "configuration signature, state, newest run and last conclusion), so a follow-up continues the "
              "right one across turns and restarts, and a background one is never forgotten", _statements(
        """CREATE TABLE IF NOT EXISTS subagents (
            id TEXT PRIMARY KEY,
            task_id TEXT NOT NULL REFERENCES tasks(id),
            owner TEXT NOT NULL DEFAULT '',
            agent TEXT NOT NULL,
            reuse_key TEXT NOT NULL DEFAULT '',
            signature TEXT NOT NULL DEFAULT '',
            state TEXT NOT NULL,
            last_run TEXT NOT NULL DEFAULT '',
            task TEXT NOT NULL DEFAULT '',
            conclusion TEXT NOT NULL DEFAULT '',
            handoff TEXT NOT NULL DEFAULT '',
            background TEXT NOT NULL DEFAULT '',
            unread INTEGER NOT NULL DEFAULT 0,
            interrupted INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS subagents_by_owner ON subagents(task_id, owner, updated_at)",
    )),
    Migration("checkpoints: the git checkpoints of each task (the commit and ref yagent made, the run it was made "
              "for), so diff, undo and a run's rollback take commits from yagent's own record, never from the "
              "repository an agent can write", _statements(
        """CREATE TABLE IF NOT EXISTS checkpoints (
            task_id TEXT NOT NULL,
            number INTEGER NOT NULL,
            project_id TEXT NOT NULL,
            turn INTEGER NOT NULL DEFAULT 0,
            run_id TEXT NOT NULL DEFAULT '',
            agent TEXT NOT NULL DEFAULT '',
            kind TEXT NOT NULL,
            label TEXT NOT NULL DEFAULT '',
            undoes TEXT NOT NULL DEFAULT '',
            ref TEXT NOT NULL,
            commit_id TEXT NOT NULL,
            common_dir TEXT NOT NULL,
            head TEXT NOT NULL DEFAULT '',
            skipped TEXT NOT NULL DEFAULT '{}',
            created_at REAL NOT NULL,
            PRIMARY KEY (task_id, number)
        )""",
        "CREATE INDEX IF NOT EXISTS checkpoints_by_age ON checkpoints(created_at)",
    )),
    Migration("checkpoint_paths: the files agents' file tools wrote inside directories git ignores, per task, and "
              "the first checkpoint that holds their prior state, so every later capture reads them too", _statements(
        """CREATE TABLE IF NOT EXISTS checkpoint_paths (
            task_id TEXT NOT NULL,
            path TEXT NOT NULL,
            since INTEGER NOT NULL,
            PRIMARY KEY (task_id, path)
        )""",
    )),
    Migration("task_approvals: what the user allowed for a task's session at its prompts, kept by the daemon as it "
              "relays the answer and handed to the task's later runs (a worker used to keep them in the task's own "
              "directory, which it can write: a run could have approved things for the next)", _statements(
        """CREATE TABLE IF NOT EXISTS task_approvals (
            task_id TEXT NOT NULL,
            grant_key TEXT NOT NULL,
            granted_at REAL NOT NULL,
            PRIMARY KEY (task_id, grant_key)
        )""",
    )),
)
SCHEMA_VERSION = len(MIGRATIONS)


def _connect(path: Path, timeout: float) -> sqlite3.Connection:
    db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=timeout)
    db.execute("PRAGMA foreign_keys=ON")
    return db


def open_registry(path: Path, timeout: float, migrations: Sequence[Migration] = MIGRATIONS) -> sqlite3.Connection:
    """A connection to the registry at `path`, checked and up to date; raises `RegistryUnreadable`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if not path.exists():
            _create(path, timeout, migrations)
        db = _connect(path, timeout)
    except sqlite3.Error as exc:
        raise _unreadable(path, exc) from None
    try:
        _check_integrity(db, path)
        app, version = _identify(db, path, len(migrations))
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        _migrate(db, path, app, version, migrations)
        missing = TABLES - _tables(db)
        if missing:
            raise RegistryUnreadable(path, f"it is marked as yagent's registry but has no {', '.join(sorted(missing))} "
                                           "table (the file is damaged)", damaged_advice(path))
    except RegistryUnreadable:
        db.close()
        raise
    except sqlite3.Error as exc:
        db.close()
        raise _unreadable(path, exc) from None
    return db


def _unreadable(path: Path, exc: sqlite3.Error) -> RegistryUnreadable:
    if isinstance(exc, sqlite3.OperationalError) and not is_damage(exc):  # locked, unwritable, disk full
        return RegistryUnreadable(path, str(exc), f"{busy_advice(path)}, then start yagentd again")
    return RegistryUnreadable(path, f"{exc} (the file is damaged or is not an SQLite database)", damaged_advice(path))


def _create(path: Path, timeout: float, migrations: Sequence[Migration]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.new")
    for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
        leftover.unlink(missing_ok=True)
    db = _connect(tmp, timeout)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        _migrate(db, tmp, 0, 0, migrations)
    finally:
        db.close()
    os.chmod(tmp, 0o600)
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size:
        aside = wal.with_name(f"{wal.name}.orphaned-{time.strftime('%Y%m%d-%H%M%S')}")
        wal.rename(aside)
        log.warning("%s has no database beside it (was %s moved without it?); moved it to %s so it is never "
                    "replayed into the new registry", wal, path.name, aside)
    Path(f"{path}-shm").unlink(missing_ok=True)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    log.info("created the task registry %s (schema %d)", path, len(migrations))


def _check_integrity(db: sqlite3.Connection, path: Path) -> None:
    try:
        problems = [row[0] for row in db.execute("PRAGMA quick_check(5)")]
    except sqlite3.DatabaseError as exc:  # damaged where the check itself must read (the schema's pages)
        if not is_damage(exc):
            raise
        problems = [str(exc)]
    if problems != ["ok"]:
        found = "; ".join(" ".join(str(p).split()) for p in problems)
        raise RegistryUnreadable(path, f"its integrity check failed ({found[:300]})", damaged_advice(path))


def _tables(db: sqlite3.Connection) -> set[str]:
    return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                         "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")}


def _identify(db: sqlite3.Connection, path: Path, known: int) -> tuple[int, int]:
    """The file's application id and the schema version to migrate from; refuses what is not ours."""
    app = db.execute("PRAGMA application_id").fetchone()[0]
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if app == APPLICATION_ID:
        if version > known:
            raise RegistryUnreadable(
                path, f"it was written by a newer yagent (schema {version}, this one reads up to {known})",
                "upgrade yagent, or set YAGENT_HOME to another directory")
        return app, version
    if app != 0:
        raise RegistryUnreadable(path, f"it is another program's database (application id {app:#010x}), not "
                                       "yagent's task registry", foreign_advice(path))
    tables = _tables(db)
    if not tables:
        earlier = _signs_of_earlier_tasks(path.parent)
        if earlier:
            raise RegistryUnreadable(
                path, f"it is empty ({path.stat().st_size} bytes, no tables), yet {earlier}: the registry that "
                      "was here is lost (truncated by a crash, a failed copy or restore)",
                f"restore state.db from a backup if you have one; otherwise move the empty file aside with "
                f"`mv {path} {path}.empty` and start yagentd again: the task list starts empty, conversations "
                "are kept")
        return app, 0
    if tables == FIRST_TABLES and version <= known:  # written before the registry carried its identity
        return app, max(version, 1)
    others = sorted(tables - FIRST_TABLES)
    raise RegistryUnreadable(
        path, "it is an SQLite database but not yagent's task registry (its tables: "
              f"{', '.join(others[:5] or sorted(tables)[:5])}{', …' if len(others) > 5 else ''})", foreign_advice(path))


def _signs_of_earlier_tasks(home: Path) -> str:
    """What in the home shows that tasks were recorded here before ("" when nothing does)."""
    for where, pattern, what in ((home / "events", "*.log", "event logs"), (home / "tasks", "*", "conversations")):
        with contextlib.suppress(OSError):
            if next(where.glob(pattern), None) is not None:
                return f"{where} holds the {what} of earlier tasks"
    return ""


def _migrate(db: sqlite3.Connection, path: Path, app: int, version: int, migrations: Sequence[Migration]) -> None:
    target = len(migrations)
    if version == target and app == APPLICATION_ID:
        return
    steps = migrations[version:]
    db.execute("BEGIN IMMEDIATE")
    try:
        for step in steps:
            step.apply(db)
        # Both live in the file's header page, which the transaction covers: all of it lands, or none.
        db.execute(f"PRAGMA user_version = {target}")
        db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        db.execute("COMMIT")
    except BaseException as exc:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")
        if not isinstance(exc, sqlite3.Error):
            raise
        if isinstance(exc, sqlite3.OperationalError) and not is_damage(exc):
            advice = f"{busy_advice(path)}, then start yagentd again"
        else:
            advice = ("report this to yagent's maintainers with the message above; meanwhile keep using the yagent "
                      "version that wrote it, or set YAGENT_HOME to another directory")
        raise RegistryUnreadable(path, f"upgrading it from schema {version} to {target} failed ({exc}); it was "
                                       "left as it was", advice) from None
    if version:
        log.info("upgraded the task registry %s from schema %d to %d: %s", path, version, target,
                 "; ".join(step.what for step in steps))
