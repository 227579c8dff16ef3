"""The registry on a real SQLite file: deferred writes and the interrupted mark."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from yagent.daemon.registry import Registry


def test_a_deferred_status_written_late_never_undoes_the_interrupted_mark(tmp_path: Path) -> None:
    registry = Registry(tmp_path / "state.db")
    task = registry.create_task(registry.ensure_project(tmp_path), "t")
    turn = registry.add_turn(task.id, "go")
    registry.add_run("r1", task.id, turn, None, "director", "", "go")
    other = sqlite3.connect(tmp_path / "state.db", isolation_level=None)  # a backup holding the write lock
    other.execute("BEGIN IMMEDIATE")
    registry.run_running("r1")  # deferred: the database is locked
    other.execute("COMMIT")
    other.close()
    marked = registry.mark_interrupted()
    registry.close()
    reopened = Registry(tmp_path / "state.db")
    try:
        assert [r.id for r in marked.runs] == ["r1"]
        assert [r.status for r in reopened.runs_of(task.id)] == ["interrupted"]
    finally:
        reopened.close()
