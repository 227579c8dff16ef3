"""state.db at open, on real SQLite files: identity, integrity, versions and migrations.

A registry the daemon cannot trust is refused with what to do, and the refused file is left as it was; a
zero-length or empty file is initialised only in a home with no earlier tasks; an upgrade keeps every
row, and a failed one changes nothing.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
from pathlib import Path

import pytest

from yagent.daemon.registry import Registry, RegistryUnreadable
from yagent.daemon.registry_schema import (
    APPLICATION_ID,
    MIGRATIONS,
    SCHEMA_VERSION,
    TABLES,
    Migration,
    open_registry,
)

# The registry's DDL as yagent 0.1 wrote it (schema 1, no application id): frozen here, because the code's
# copy is the first migration step and may be edited; an upgrade must keep working on files like these.
V1_DDL = """
CREATE TABLE IF NOT EXISTS projects (
    id TEXT PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects(id),
    title TEXT NOT NULL,
    state TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    last_seq INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS tasks_by_project ON tasks(project_id, updated_at);
CREATE TABLE IF NOT EXISTS turns (
    task_id TEXT NOT NULL REFERENCES tasks(id),
    idx INTEGER NOT NULL,
    text TEXT NOT NULL,
    state TEXT NOT NULL,
    root_run TEXT NOT NULL DEFAULT '',
    output TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    ended_at REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (task_id, idx)
);
CREATE TABLE IF NOT EXISTS runs (
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
);
CREATE INDEX IF NOT EXISTS runs_by_task ON runs(task_id, created_at);
"""


def write_v1_registry(path: Path, project: Path, tasks: int = 3) -> None:
    """A state.db as yagent 0.1 left it: WAL, schema 1, tasks with turns and a root and a child run each."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(V1_DDL)
    db.execute("PRAGMA user_version=1")
    db.execute("INSERT INTO projects VALUES ('proj-1', ?, 1.0)", (str(project),))
    for i in range(tasks):
        tid = f"t{i:09d}"
        db.execute("INSERT INTO tasks VALUES (?, 'proj-1', ?, 'done', ?, ?, ?)", (tid, f"title {i}", 10.0 + i,
                                                                                  20.0 + i, 7 + i))
        db.execute("INSERT INTO turns VALUES (?, 1, ?, 'done', ?, ?, 11.0, 12.0)", (tid, f"ask {i}", f"r{i}root",
                                                                                    f"out {i}"))
        db.execute("INSERT INTO runs(id, task_id, turn, parent_run, agent, status, stop_reason, input, output, pid, "
                   "created_at, started_at, ended_at) VALUES (?, ?, 1, NULL, 'director', 'done', 'agent_exit', ?, "
                   "?, ?, 11.0, 11.5, 12.0)", (f"r{i}root", tid, f"ask {i}", f"out {i}", 4000 + i))
        db.execute("INSERT INTO runs(id, task_id, turn, parent_run, agent, status, created_at) "
                   "VALUES (?, ?, 1, ?, 'coding', 'interrupted', 11.2)", (f"r{i}kid", tid, f"r{i}root"))
    db.close()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _header(path: Path) -> tuple[int, int]:
    db = sqlite3.connect(path)
    try:
        return db.execute("PRAGMA application_id").fetchone()[0], db.execute("PRAGMA user_version").fetchone()[0]
    finally:
        db.close()


def _refusal(path: Path) -> RegistryUnreadable:
    with pytest.raises(RegistryUnreadable) as refused:
        Registry(path).close()
    return refused.value


def test_a_new_registry_is_created_whole_with_its_identity_and_version(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    Registry(db).close()
    assert _header(db) == (APPLICATION_ID, SCHEMA_VERSION)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.db"]  # no temporary file left behind
    assert db.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("kind", ["zero_length", "empty_database"])
def test_a_blank_file_in_a_home_without_tasks_is_initialised(tmp_path: Path, kind: str) -> None:
    db = tmp_path / "state.db"
    if kind == "zero_length":
        db.write_bytes(b"")  # yagent created it and died before the first write
    else:
        sqlite3.connect(db).execute("VACUUM").connection.close()  # a valid database with no tables
    registry = Registry(db)
    task = registry.create_task(registry.ensure_project(tmp_path), "first")
    registry.close()
    assert _header(db) == (APPLICATION_ID, SCHEMA_VERSION)
    assert [t.id for t in Registry(db).list_tasks()] == [task.id]


@pytest.mark.parametrize("kind", ["zero_length", "empty_database"])
@pytest.mark.parametrize("earlier", ["events", "tasks"])
def test_a_blank_file_where_tasks_were_recorded_is_refused_as_a_lost_registry(tmp_path: Path, kind: str,
                                                                                earlier: str) -> None:
    (tmp_path / earlier).mkdir()
    (tmp_path / earlier / ("t123456789.log" if earlier == "events" else "t123456789.jsonl")).write_text("x")
    db = tmp_path / "state.db"
    if kind == "zero_length":
        db.write_bytes(b"")  # truncated by a crash, a failed copy
    else:
        sqlite3.connect(db).execute("VACUUM").connection.close()
    before = _digest(db)
    refused = _refusal(db)
    assert "the registry that was here is lost" in refused.problem and str(tmp_path / earlier) in refused.problem
    assert "restore state.db from a backup" in refused.advice and f"mv {db} {db}.empty" in refused.advice
    assert _digest(db) == before  # refused, not initialised


def test_another_programs_database_is_refused_and_left_untouched(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    other = sqlite3.connect(db)
    other.executescript("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes(body) VALUES ('x');")
    other.close()
    before = _digest(db)
    refused = _refusal(db)
    assert "not yagent's task registry (its tables: notes)" in refused.problem
    assert f"mv {db} {db}.broken" in refused.advice and "YAGENT_HOME" in refused.advice
    assert _digest(db) == before


def test_a_database_marked_as_another_application_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    Registry(db).close()  # even with yagent's very tables
    other = sqlite3.connect(db)
    other.execute(f"PRAGMA application_id = {0x5F4D534E}")  # some other tool's
    other.close()
    refused = _refusal(db)
    assert "another program's database (application id 0x5f4d534e)" in refused.problem


def test_a_newer_schema_is_refused_saying_to_upgrade_or_use_another_home(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    Registry(db).close()
    newer = sqlite3.connect(db)
    newer.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    newer.close()
    refused = _refusal(db)
    assert f"newer yagent (schema {SCHEMA_VERSION + 1}, this one reads up to {SCHEMA_VERSION})" in refused.problem
    assert refused.advice == "upgrade yagent, or set YAGENT_HOME to another directory"
    assert _header(db) == (APPLICATION_ID, SCHEMA_VERSION + 1)


def _filled(path: Path, tasks: int = 400) -> None:
    registry = Registry(path)
    project = registry.ensure_project(path.parent)
    for i in range(tasks):
        task = registry.create_task(project, f"task {i} " + "x" * 200)
        registry.add_turn(task.id, "y" * 300)
    registry.close()  # the last connection checkpoints: everything is in the main file


def test_pages_overwritten_with_junk_are_refused_at_start_with_what_to_do(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    _filled(db)
    with db.open("r+b") as fh:
        fh.seek(3 * 4096)
        fh.write(b"\xa5junk" * 2000)  # pages 4..6
    refused = _refusal(db)
    assert "integrity check failed" in refused.problem
    assert f"mv {db} {db}.broken" in refused.advice and ".recover" in refused.advice


def test_a_truncated_file_is_refused_at_start(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    _filled(db)
    with db.open("r+b") as fh:
        fh.truncate(db.stat().st_size // 2)
    refused = _refusal(db)
    assert "integrity check failed" in refused.problem or "malformed" in refused.problem
    assert f"mv {db} {db}.broken" in refused.advice


def test_a_registry_from_before_identities_is_upgraded_keeping_every_row(tmp_path: Path, caplog) -> None:
    db = tmp_path / "state.db"
    write_v1_registry(db, tmp_path, tasks=3)
    with caplog.at_level(logging.INFO):
        registry = Registry(db)
    try:
        assert _header(db) == (APPLICATION_ID, SCHEMA_VERSION)
        tasks = {t.id: t for t in registry.list_tasks()}
        assert sorted(tasks) == ["t000000000", "t000000001", "t000000002"]
        assert [(t.title, t.state, t.last_seq, t.project_path) for t in tasks.values()] == [
            (f"title {i}", "done", 7 + i, str(tmp_path)) for i in (2, 1, 0)]
        turns = registry.turns("t000000001")
        assert [(t.turn, t.text, t.root_run, t.output) for t in turns] == [(1, "ask 1", "r1root", "out 1")]
        runs = registry.runs_of("t000000001")
        assert [(r.id, r.parent_run, r.status, r.pid) for r in runs] == [
            ("r1root", None, "done", 4001), ("r1kid", "r1root", "interrupted", 0)]
        assert [(r.id, r.worker_started_at) for r in registry.unfinished_runs()] == []
        # The new column works: a run recorded now carries its worker's start time.
        registry.add_run("rnew", "t000000001", 2, None, "director", "", "go")
        registry.run_started("rnew", 4242, 1234.5)
        assert [(r.id, r.pid, r.worker_started_at) for r in registry.unfinished_runs()] == [("rnew", 4242, 1234.5)]
    finally:
        registry.close()
    assert "from schema 1 to" in caplog.text


def test_a_failed_upgrade_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    write_v1_registry(db, tmp_path)

    def fail(_db: sqlite3.Connection) -> None:
        raise sqlite3.OperationalError("no space left on device")

    steps = (*MIGRATIONS, Migration("a step that fails", fail))
    with pytest.raises(RegistryUnreadable) as refused:
        open_registry(db, 1.0, steps)
    assert f"upgrading it from schema 1 to {len(steps)} failed" in refused.value.problem
    assert "left as it was" in refused.value.problem
    assert _header(db) == (0, 1)  # neither the version nor the identity moved
    check = sqlite3.connect(db)
    try:
        columns = {row[1] for row in check.execute("PRAGMA table_info(runs)")}
        assert "worker_started_at" not in columns  # the earlier step of the same upgrade was rolled back too
        assert check.execute("SELECT count(*) FROM tasks").fetchone()[0] == 3
    finally:
        check.close()
    Registry(db).close()  # the real upgrade still works afterwards
    assert _header(db) == (APPLICATION_ID, SCHEMA_VERSION)


def test_a_journal_left_without_its_database_is_moved_aside_not_replayed(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    _filled(db, tasks=1)
    keeper = sqlite3.connect(db, isolation_level=None)
    keeper.execute("PRAGMA wal_autocheckpoint=0")
    keeper.execute("UPDATE tasks SET title = 'from the old journal'")
    saved = Path(f"{db}-wal").read_bytes()  # the journal as a crash would leave it
    keeper.close()
    db.unlink()  # moved away without its journal
    Path(f"{db}-wal").write_bytes(saved)
    registry = Registry(db)
    check = sqlite3.connect(db)  # a second reader (a backup, `sqlite3`) alongside the daemon
    try:
        # A fresh registry, not the old journal's pages (the table itself: an index would not show them).
        assert check.execute("SELECT title FROM tasks").fetchall() == []
    finally:
        check.close()
        registry.close()
    orphans = list(tmp_path.glob("state.db-wal.orphaned-*"))
    assert len(orphans) == 1 and orphans[0].read_bytes() == saved


def test_a_damaged_registry_under_a_running_daemon_costs_progress_writes_once_said(tmp_path: Path, caplog) -> None:
    db = tmp_path / "state.db"
    _filled(db)
    registry = Registry(db)
    task = registry.list_tasks(limit=1)[0]
    with db.open("r+b") as fh:
        fh.seek(4096)
        fh.write(b"\x00junk" * 40_000)  # everything past the first page
    other = sqlite3.connect(db)
    other.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")  # another connection's write: the cache goes
    other.close()
    with caplog.at_level(logging.ERROR):
        for _ in range(3):
            registry.set_task_state(task.id, "done")  # never raises
    said = [r for r in caplog.records if "is damaged" in r.getMessage()]
    assert len(said) == 1 and f"mv {db} {db}.broken" in said[0].getMessage()
    assert len(registry.deferred) == 0  # dropped: a damaged file does not heal while the daemon runs
    assert registry.task_seq_floor(task.id) == 0  # reads that cannot fail the caller say 0
    with pytest.raises(sqlite3.DatabaseError):
        registry.list_tasks()  # a request's read fails; `commands.dispatch` turns it into advice
    registry.close()


def test_every_table_is_known_to_the_schema() -> None:
    db = sqlite3.connect(":memory:", isolation_level=None)
    for step in MIGRATIONS:
        step.apply(db)
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == TABLES
