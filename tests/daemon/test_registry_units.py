"""The registry on a real SQLite file: deferred writes and the interrupted mark."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

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


def test_rows_written_together_are_all_kept_or_none_and_a_failure_leaves_no_transaction_open(tmp_path: Path) -> None:
    registry = Registry(tmp_path / "state.db")
    task = registry.create_task(registry.ensure_project(tmp_path / "project"), "t").id
    with pytest.raises(sqlite3.Error):  # the third key cannot be bound: the two before it must not stay behind
        registry.add_task_approvals(task, ["inside:run_bash", "outside:/srv", object()])  # type: ignore[list-item]
    assert registry.task_approvals(task) == []
    registry.add_task_approvals(task, ["inside:run_bash"])  # the connection is usable: no transaction left open
    registry.note_checkpoint_paths(task, ["a.txt"], 1)
    assert registry.task_approvals(task) == ["inside:run_bash"] and registry.checkpoint_paths(task) == {"a.txt": 1}
    registry.close()
    assert Registry(tmp_path / "state.db").task_approvals(task) == ["inside:run_bash"]  # committed, not just seen
