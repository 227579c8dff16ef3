"""The daemon's checkpoint service with real processes from a real forkserver, a real registry and a real repository
(only the run and the event hub are stand-ins): numbers and records, a forged number refused, `[git_checkpoint]
retention` removing old refs and their records, a job line that never sticks when a run is never reaped."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.checkpoints.repos import git, make_repo
from tests.daemon_harness import arun
from yagent.daemon import checkpoints as checkpoints_module
from yagent.daemon.checkpoints import CheckpointService
from yagent.daemon.launcher import MultiprocessingLauncher
from yagent.daemon.registry import Registry
from yagent.daemon.task_scope import TaskScope
from yagent.ipc.config import settings_from_table
from yagent.ipc.confinement import landlock_abi
from yagent.ipc.messages import CheckpointNote, CheckpointReply, CheckpointRollback, RunSpec
from yagent.ipc.noted_paths import MAX_NOTED_PATHS


@dataclass
class _Hub:
    said: list[str] = field(default_factory=list)

    def publish(self, task: str, run: str, agent: str, type_: str, data: dict[str, Any]) -> int:
        self.said.append(data["message"])
        return len(self.said)


@dataclass
class _Services:
    registry: Registry
    launcher: MultiprocessingLauncher
    scope: TaskScope
    home: Path
    settings: Any
    hub: _Hub = field(default_factory=_Hub)
    runtime_dir: Path | None = None
    landlock_abi: int = field(default_factory=landlock_abi)


@dataclass
class _Run:
    id: str
    agent: str
    spec: RunSpec
    reaped: asyncio.Event = field(default_factory=asyncio.Event)


@pytest.fixture(scope="module")
def launcher():
    started = MultiprocessingLauncher()
    started.start()
    yield started
    started.stop()


def _home_with_task(tmp_path: Path, repo: Path) -> tuple[Path, Registry, Any]:
    """A state home with a real registry holding one task of `repo`."""
    home = tmp_path / "home"
    home.mkdir()
    registry = Registry(home / "state.db")
    return home, registry, registry.create_task(registry.ensure_project(repo), "t")


def _coding_run(row: Any, repo: Path, home: Path, task: str) -> _Run:
    spec = RunSpec(run="r1", task=row.id, turn=1, project=row.project_id, project_root=str(repo), agent="coding",
                   input=task, home=str(home))
    return _Run("r1", "coding", spec)


def test_records_a_forged_number_retention_and_a_run_never_reaped(tmp_path: Path, launcher) -> None:
    repo = make_repo(tmp_path / "repo")
    home, registry, row = _home_with_task(tmp_path, repo)
    settings = settings_from_table(tomllib.loads('[git_checkpoint]\nretention = "1h"\n'), environ={})

    async def go() -> None:
        services = _Services(registry, launcher, TaskScope("test"), home, settings, runtime_dir=tmp_path / "run")
        service = CheckpointService(services)  # type: ignore[arg-type]
        run = _coding_run(row, repo, home, "change a.txt")
        spec = run.spec
        assert await service.before_run(run, row, 1)  # type: ignore[arg-type]
        (repo / "a.txt").write_text("changed\n")
        service.after_run(run, row, 1)  # type: ignore[arg-type]
        run.reaped.set()
        replies: list[CheckpointReply] = []
        service.agent_request(run, row, 1, CheckpointRollback(id=7, number=99), replies.append)  # type: ignore[arg-type]
        diff = await service.diff(row, patches=False)  # in line after both
        assert [c.number for c in diff.checkpoints] == [1, 2] and [f.path for f in diff.subtasks[0].files] == ["a.txt"]
        assert replies[0].is_error and "no checkpoint 99" in replies[0].content
        assert (repo / "a.txt").read_text() == "changed\n"

        # A run that is never reaped holds its project's line at most REAP_WAIT: it never sticks.
        checkpoints_module.REAP_WAIT = 0.2
        stuck = _Run("r2", "coding", dataclasses.replace(spec, run="r2"))
        assert await service.before_run(stuck, row, 2)  # type: ignore[arg-type]
        service.after_run(stuck, row, 2)  # type: ignore[arg-type]
        later = await service.diff(row, patches=False)
        assert [c.number for c in later.checkpoints] == [1, 2, 3, 4]

        registry._db.execute("UPDATE checkpoints SET created_at = 0 WHERE number <= 2")  # older than retention
        removed = await service.prune(lambda task: str(repo) if task == row.id else None)
        assert removed == 2 and [r.number for r in registry.checkpoints(row.id)] == [3, 4]
        assert git(repo, "for-each-ref", "--format=%(refname)", "refs/yagent").split() == [
            f"refs/yagent/checkpoints/{row.id}/3", f"refs/yagent/checkpoints/{row.id}/4"]
        services.settings = settings_from_table(tomllib.loads('[git_checkpoint]\nretention = "0"\n'), environ={})
        registry._db.execute("UPDATE checkpoints SET created_at = 0")
        assert await service.prune(lambda task: str(repo)) == 0  # "0": kept for good

    try:
        arun(go(), 120)
    finally:
        checkpoints_module.REAP_WAIT = 60.0
        registry.close()


def test_notes_amend_the_runs_checkpoints_keep_their_record_refuse_forged_paths_and_stop_at_the_cap(
        tmp_path: Path, launcher) -> None:
    repo = make_repo(tmp_path / "repo")  # its .gitignore ignores build/
    (repo / "build").mkdir()
    (repo / "build" / "keep.txt").write_text("before\n")
    home, registry, row = _home_with_task(tmp_path, repo)
    settings = settings_from_table({}, environ={})

    async def go() -> None:
        services = _Services(registry, launcher, TaskScope("test"), home, settings, runtime_dir=tmp_path / "run")
        service = CheckpointService(services)  # type: ignore[arg-type]
        run = _coding_run(row, repo, home, "rebuild")

        async def note(paths: list[str], who: _Run = run) -> CheckpointReply:
            answered: asyncio.Future[CheckpointReply] = asyncio.get_running_loop().create_future()
            service.note(who, row, 1, CheckpointNote(id=3, paths=paths), answered.set_result)  # type: ignore[arg-type]
            return await answered

        idle = await note(["build/keep.txt"])  # no before-checkpoint yet: nothing to keep, the write goes on
        assert not idle.is_error and "no checkpoints" in idle.content and registry.checkpoint_paths(row.id) == {}
        assert await service.before_run(run, row, 1)  # type: ignore[arg-type]
        first = registry.checkpoints(row.id)[0].commit
        kept = await note(["build/keep.txt", "build/new.txt", "../escape", ".git/hooks/pre-commit", "/etc/passwd"])
        assert not kept.is_error and kept.content.startswith("kept 1 of 2; 1 did not exist yet."), kept.content
        assert registry.checkpoint_paths(row.id) == {"build/keep.txt": 1, "build/new.txt": 1}
        amended = registry.checkpoints(row.id)[0].commit
        assert amended != first and git(repo, "rev-parse", registry.checkpoints(row.id)[0].ref).strip() == amended
        assert git(repo, "show", f"{amended}:build/keep.txt") == "before\n"

        os.mkfifo(repo / "build" / "pipe")
        unread = await note(["build/pipe"])  # there but no file: not noted, so no capture reads it, no undo touches it
        assert unread.is_error and "Not kept, and left as they are by an undo: build/pipe (not a file)" in \
            unread.content and "build/pipe" not in registry.checkpoint_paths(row.id)
        os.unlink(repo / "build" / "pipe")

        many = [f"build/m{i:05d}" for i in range(MAX_NOTED_PATHS)]
        capped = await note(many)  # two are noted already: the last two asked for find no room
        assert capped.is_error and f"at most {MAX_NOTED_PATHS} files" in capped.content
        assert "build/m00998" in capped.content and len(registry.checkpoint_paths(row.id)) == MAX_NOTED_PATHS
        assert any("could not be kept for `yagent undo`" in said for said in services.hub.said)

        (repo / "build" / "keep.txt").write_text("after\n")
        (repo / "build" / "new.txt").write_text("made\n")
        service.after_run(run, row, 1)  # type: ignore[arg-type]
        run.reaped.set()
        diff = await service.diff(row, patches=False)
        assert {(f.path, f.change.value) for f in diff.subtasks[0].files} == {("build/keep.txt", "modified"),
                                                                              ("build/new.txt", "added")}
        registry._db.execute("UPDATE checkpoints SET created_at = 0")
        services.settings = settings_from_table(tomllib.loads('[git_checkpoint]\nretention = "1h"\n'), environ={})
        assert await service.prune(lambda task: str(repo)) == 2
        assert registry.checkpoint_paths(row.id) == {}  # no checkpoint left needs them

    try:
        arun(go(), 120)
    finally:
        registry.close()
