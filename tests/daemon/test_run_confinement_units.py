"""What the daemon hands a worker to confine itself with, decided per run, and the state layout move."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import zmq

from tests.daemon.seams import ScriptedLauncher
from yagent.daemon.admission import WorkerSlots
from yagent.daemon.event_hub import EventHub
from yagent.daemon.leases import LeaseManager
from yagent.daemon.registry import Registry
from yagent.daemon.run_confinement import REQUIRED_BUT_MISSING
from yagent.daemon.run_services import RunServices
from yagent.daemon.run_table import RunTable
from yagent.daemon.schedule import Scheduler
from yagent.daemon.settings_source import SettingsSource
from yagent.daemon.state_migration import migrate_state_layout
from yagent.daemon.task_scope import TaskScope
from yagent.daemon.turn import TurnController
from yagent.ipc.config import Settings
from yagent.ipc.sandbox_settings import SandboxSettings
from yagent.ipc.state_layout import AGENTS_FILE, GRANTS_FILE, MEMORY_FILE, approvals_file, task_dir
from yagent.ipc.vocabulary import RunStatus, Unconfined, YoloLevel


@contextlib.asynccontextmanager
async def _services(tmp_path: Path, *, abi: int, sandbox: SandboxSettings | None = None
                    ) -> AsyncIterator[tuple[RunServices, ScriptedLauncher]]:
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub.bind(f"ipc://{tmp_path}/ev.sock")
    home = tmp_path / "home"
    home.mkdir()
    registry = Registry(home / "state.db")
    hub = EventHub(pub, home / "events", 1000)
    launcher = ScriptedLauncher()
    scope = TaskScope("test")
    services = RunServices(
        config=SettingsSource(home, Settings(stop_grace=0.2, sandbox=sandbox or SandboxSettings())),
        clock=asyncio.get_running_loop().time, registry=registry, hub=hub, leases=LeaseManager(1),
        slots=WorkerSlots(8, lambda: False), launcher=launcher, scheduler=Scheduler(), scope=scope,
        workers_endpoint="ipc://unused", home=home, send_worker=lambda _run, _msg: None,
        is_shutting_down=lambda: False, runtime_dir=tmp_path / "run", landlock_abi=abi)
    try:
        yield services, launcher
    finally:
        await scope.drain(2.0)
        hub.close()
        registry.close()
        pub.close(0)
        ctx.term()


def _start(services: RunServices, tmp_path: Path, yolo: str = YoloLevel.NONE):
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    row = services.registry.create_task(services.registry.ensure_project(project), "t")
    turn = TurnController(services, row, RunTable(), lambda _t: None)
    return turn.start("go", "coding", yolo=yolo, options={})


def test_a_confined_run_gets_its_spec_at_launch_with_its_state_dirs_made_and_the_secrets_kept_out(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with _services(tmp_path, abi=7) as (services, launcher):
            run = _start(services, tmp_path)
            spec = launcher.confinements[run.id]
            assert spec is not None and spec.unconfined is None and run.unconfined is None
            assert spec.abi == 7 and spec.agent == "coding"
            assert spec.task_dir == str(task_dir(services.home, run.turn.id))
            for made in (spec.task_dir, spec.scratch_dir, *spec.shared_dirs, spec.approvals_dir):
                assert Path(made).is_dir() and Path(made).stat().st_mode & 0o077 == 0, made
            assert spec.shared_dirs == [str(services.home / "breaker")]  # written by every worker
            assert spec.approvals_dir == str(services.home / "approvals")  # read by them: the daemon writes it
            assert spec.home == str(services.home) and spec.runtime_dir == str(tmp_path / "run")
            assert spec.deny_read == [str(Path.home() / p) for p in (".ssh", ".gnupg", ".aws")]

    asyncio.run(main())


@pytest.mark.parametrize(("abi", "sandbox", "yolo", "why"), [
    (7, SandboxSettings(mode="off"), YoloLevel.NONE, Unconfined.SANDBOX_OFF),
    (7, SandboxSettings(), YoloLevel.FULL, Unconfined.FULL_YOLO),
    (7, SandboxSettings(), YoloLevel.YOLO, None),  # --yolo skips prompts and stays confined
    (0, SandboxSettings(), YoloLevel.NONE, Unconfined.LANDLOCK_MISSING),
])
def test_why_a_run_is_not_confined_travels_with_its_launch(tmp_path: Path, abi: int, sandbox: SandboxSettings,
                                                           yolo: str, why: Unconfined | None) -> None:
    async def main() -> None:
        async with _services(tmp_path, abi=abi, sandbox=sandbox) as (services, launcher):
            run = _start(services, tmp_path, yolo)
            spec = launcher.confinements[run.id]
            assert spec is not None and spec.unconfined is why and run.unconfined is why

    asyncio.run(main())


def test_where_landlock_is_missing_and_required_a_run_is_refused_saying_what_to_do(tmp_path: Path) -> None:
    async def main() -> None:
        async with _services(tmp_path, abi=0, sandbox=SandboxSettings(required=True)) as (services, launcher):
            run = _start(services, tmp_path)
            assert run.id not in launcher.confinements  # never launched
            assert run.outcome is not None and run.outcome.status is RunStatus.FAILED
            assert run.outcome.error == REQUIRED_BUT_MISSING and "required = false" in REQUIRED_BUT_MISSING

    asyncio.run(main())


def test_an_earlier_installs_task_files_move_into_one_directory_per_task_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    home = tmp_path / "home"
    tasks = home / "tasks"
    tasks.mkdir(parents=True)
    (tasks / "t1.jsonl").write_text("memory 1")
    (tasks / "t1.agents.json").write_text("agents 1")
    (tasks / "t1.grants.json").write_text("grants 1")
    (tasks / "t1.grants.json.lock").write_text("")
    (tasks / "t2.jsonl").write_text("memory 2")
    (home / "settings.json").write_text("approvals")
    (task_dir(home, "t3")).mkdir()
    (task_dir(home, "t3") / MEMORY_FILE).write_text("new memory 3")
    (tasks / "t3.jsonl").write_text("old memory 3")  # its new place is taken: left where it is
    with caplog.at_level(logging.INFO):
        assert migrate_state_layout(home) == 5
    assert (task_dir(home, "t1") / MEMORY_FILE).read_text() == "memory 1"
    assert (task_dir(home, "t1") / AGENTS_FILE).read_text() == "agents 1"
    assert (task_dir(home, "t1") / GRANTS_FILE).read_text() == "grants 1"
    assert (task_dir(home, "t2") / MEMORY_FILE).read_text() == "memory 2"
    assert approvals_file(home).read_text() == "approvals"
    assert (task_dir(home, "t3") / MEMORY_FILE).read_text() == "new memory 3"
    assert (tasks / "t3.jsonl").read_text() == "old memory 3"
    assert sorted(p.name for p in tasks.iterdir()) == ["t1", "t2", "t3", "t3.jsonl"]
    assert any("moved 5 task state files" in r.getMessage() for r in caplog.records)
    assert any("t3.jsonl" in r.getMessage() and "exists already" in r.getMessage() for r in caplog.records)
    caplog.clear()
    assert migrate_state_layout(home) == 0  # once: a second start moves nothing and says nothing of it
    assert not any("moved" in r.getMessage() for r in caplog.records)
