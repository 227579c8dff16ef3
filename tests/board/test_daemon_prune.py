"""The daemon's prune pass removes boards and artifacts idle past `[blackboard]` ttl / artifact_retention,
and keeps those of a task it still lists as resumable (a real daemon, its real registry)."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

from tests.daemon_harness import DaemonProcess, script
from yagent.ipc.state_layout import artifacts_dir, notes_dir
from yagent.ipc.vocabulary import TaskState
from yagent.workers.board import ArtifactStore, Handoff, NoteStore


def _age_tree(root: Path, seconds: float) -> None:
    then = time.time() - seconds
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            os.utime(os.path.join(dirpath, name), (then, then), follow_symlinks=False)
    os.utime(root, (then, then))


def test_idle_boards_go_at_the_daemons_prune_and_a_resumable_tasks_board_stays(make_daemon, project: Path) -> None:
    config = '[blackboard]\nttl = "1d"\nartifact_retention = "1d"\n'
    daemon = make_daemon(config)
    tasks = []
    for _ in range(2):
        sub = daemon.cli("--json", "run", "--agent", "scripted", script({"emit": 1}), cwd=project)
        tasks.append(json.loads(sub.stdout.splitlines()[-1])["task"])
    assert daemon.terminate() == 0
    done, resumable = tasks
    for task in tasks:
        NoteStore(notes_dir(daemon.home, task)).write("repo", Handoff("c"), "body")
        ArtifactStore(artifacts_dir(daemon.home, task)).put("long text")
        _age_tree(notes_dir(daemon.home, task), 2 * 86400)
        _age_tree(artifacts_dir(daemon.home, task), 2 * 86400)
    with sqlite3.connect(daemon.home / "state.db") as db:
        db.execute("UPDATE tasks SET state = ? WHERE id = ?", (TaskState.INTERRUPTED.value, resumable))
    again = DaemonProcess(daemon.root, config)
    again.home, again.runtime = daemon.home, daemon.runtime
    try:
        again.start()  # a pass runs at start, then hourly
        assert not notes_dir(daemon.home, done).exists()
        assert not list(artifacts_dir(daemon.home, done).iterdir())
        assert NoteStore(notes_dir(daemon.home, resumable)).refs()
        assert list(artifacts_dir(daemon.home, resumable).iterdir())
    finally:
        again.close()
