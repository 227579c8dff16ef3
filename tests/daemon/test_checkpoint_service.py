"""The daemon's checkpoint service with real processes from a real forkserver, a real registry and a real repository
(only the run and the event hub are stand-ins): numbers and records, a forged number refused, `[git_checkpoint]
retention` removing old refs and their records, a job line that never sticks when a run is never reaped."""

from __future__ import annotations

import asyncio
import dataclasses
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
from yagent.ipc.messages import CheckpointReply, CheckpointRollback, RunSpec


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


def test_records_a_forged_number_retention_and_a_run_never_reaped(tmp_path: Path, launcher) -> None:
    repo = make_repo(tmp_path / "repo")
    home = tmp_path / "home"
    home.mkdir()
    registry = Registry(home / "state.db")
    row = registry.create_task(registry.ensure_project(repo), "t")
    settings = settings_from_table(tomllib.loads('[git_checkpoint]\nretention = "1h"\n'), environ={})

    async def go() -> None:
        services = _Services(registry, launcher, TaskScope("test"), home, settings, runtime_dir=tmp_path / "run")
        service = CheckpointService(services)  # type: ignore[arg-type]
        spec = RunSpec(run="r1", task=row.id, turn=1, project=row.project_id, project_root=str(repo), agent="coding",
                       input="change a.txt", home=str(home))
        run = _Run("r1", "coding", spec)
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
