"""The daemon's side of resume inspections against inspection processes that die, hang, lie or flood (real
processes, through the launcher seam): each costs its task one "could not be inspected" line, never the daemon,
never past the deadline, and no such process outlives the request."""

from __future__ import annotations

import asyncio
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.daemon.seams import HostileInspections
from yagent.daemon import resume_inspections
from yagent.daemon.arbiter import Daemon
from yagent.daemon.registry import TaskRow, TurnRow
from yagent.daemon.resume_inspections import Inspection, inspect_stopped_turns
from yagent.daemon.sd_notify import SystemdNotifier
from yagent.ipc import DaemonClient
from yagent.ipc.config import Settings, settings_from_table
from yagent.ipc.messages import (
    DaemonStatus,
    ListResumeCandidates,
    ResumeCandidateList,
    ResumeInspectionReport,
    StatusRequest,
)
from yagent.ipc.runtime_dir import ensure_runtime_dir
from yagent.ipc.vocabulary import ReplayVerdict, RunStatus, StopReason, TaskState


def _target(home: Path, task: str = "t1") -> Inspection:
    (home / "tasks" / task).mkdir(parents=True, exist_ok=True)
    row = TaskRow(id=task, project_id="p1", project_path=str(home.parent), title="t", state=TaskState.INTERRUPTED,
                  created_at=0.0, updated_at=0.0, last_seq=0)
    turn = TurnRow(task_id=task, turn=1, text="t", state=TaskState.INTERRUPTED, root_run="rootrun", output="",
                   created_at=0.0, ended_at=0.0, agent="director")
    return Inspection(row, turn)


def _inspect(launcher: HostileInspections, home: Path, targets: list[Inspection], *, deadline: float,
             settings: Settings | None = None, abi: int = 7) -> dict[str, ResumeInspectionReport | str]:
    async def go() -> dict[str, ResumeInspectionReport | str]:
        return await inspect_stopped_turns(launcher, settings or Settings(), home=home, runtime_dir=home / "run",
                                           abi=abi, targets=targets, gate=asyncio.Semaphore(4), deadline=deadline)

    return asyncio.run(go())


def _all_gone(launcher: HostileInspections) -> None:
    for _spec, _confinement, handle in launcher.started:
        assert handle.gone(timeout=30), f"inspection process {handle.pid} outlived its request"


@pytest.mark.parametrize(("how", "said"), [
    ("kill -9", "its process ended without a report"),
    ("garbage", "its report could not be read"),
    ("oversized", "its report was refused"),
    ("another kind", "it sent a shutdown message instead of its report"),
])
def test_an_inspection_that_dies_or_lies_costs_its_task_one_line_and_its_process(tmp_path: Path, how: str,
                                                                                said: str) -> None:
    launcher = HostileInspections(how)
    got = _inspect(launcher, tmp_path / "home", [_target(tmp_path / "home")], deadline=60)
    assert isinstance(got["t1"], str) and said in got["t1"], got
    _all_gone(launcher)


def test_an_inspection_whose_start_waits_past_the_start_limit_is_given_up_and_killed_once_started(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resume_inspections, "START_LIMIT", 0.2)
    launcher = HostileInspections("hang")
    hold = launcher.hold = threading.Event()
    home = tmp_path / "home"

    async def go() -> dict[str, ResumeInspectionReport | str]:
        try:  # the deadline is long: only the start's own limit can end this wait
            return await inspect_stopped_turns(launcher, Settings(), home=home, runtime_dir=home / "run", abi=7,
                                               targets=[_target(home)], gate=asyncio.Semaphore(4), deadline=600)
        finally:
            hold.set()  # the start goes on now, and finds itself given up on

    got = asyncio.run(go())
    assert launcher.holding.is_set()
    assert isinstance(got["t1"], str) and "did not start within 0.2s" in got["t1"], got
    assert launcher.launched.wait(30)
    _all_gone(launcher)


@pytest.mark.parametrize("how", ["hang", "half a frame"])
def test_an_inspection_that_hangs_is_killed_at_its_deadline_and_the_answer_comes_then(tmp_path: Path,
                                                                                      how: str) -> None:
    launcher = HostileInspections(how)
    began = time.monotonic()
    got = _inspect(launcher, tmp_path / "home", [_target(tmp_path / "home")], deadline=0.5)
    assert time.monotonic() - began < 30  # the deadline, plus the time to kill: never waiting for the process
    assert isinstance(got["t1"], str) and "did not report within 0.5s of its start and was stopped" in got["t1"]
    _all_gone(launcher)


def test_an_honest_report_arrives_and_the_inspection_holds_no_key(tmp_path: Path) -> None:
    settings = settings_from_table({"global": {"llm": {"use_provider": "p", "providers": {"p": {
        "model": "m", "api_base_url": "http://127.0.0.1:9", "api_key": "sk-1"}}}}})
    assert settings.run_settings.llm.providers  # the daemon's own settings do hold the key
    launcher = HostileInspections("honest")
    got = _inspect(launcher, tmp_path / "home", [_target(tmp_path / "home")], deadline=60, settings=settings)
    report = got["t1"]
    assert isinstance(report, ResumeInspectionReport)
    assert [(c.call_id, c.verdict, c.step) for c in report.children] == [("c1", ReplayVerdict.REPLAYABLE, 2)]
    (spec, confinement, _process), = launcher.started
    assert not spec.settings.llm.providers and "sk-1" not in repr(spec) + repr(confinement)
    assert (spec.task, spec.stopped_run, spec.agent) == ("t1", "rootrun", "director")
    assert confinement.unconfined is None and confinement.task_dir == str(tmp_path / "home" / "tasks" / "t1")
    _all_gone(launcher)


def test_a_task_directory_that_is_a_link_is_never_handed_to_an_inspection(tmp_path: Path) -> None:
    home = tmp_path / "home"
    target = _target(home)
    (home / "tasks" / "t1").rename(tmp_path / "elsewhere")
    (home / "tasks" / "t1").symlink_to(tmp_path / "elsewhere")
    launcher = HostileInspections("honest")
    got = _inspect(launcher, home, [target], deadline=60)
    assert "is a symbolic link" in got["t1"] and "nothing was read" in got["t1"]
    assert launcher.started == []


def test_without_landlock_a_required_sandbox_starts_no_inspection_and_an_optional_one_says_unconfined(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    required = settings_from_table({"sandbox": {"required": True}})
    launcher = HostileInspections("honest")
    got = _inspect(launcher, home, [_target(home)], deadline=60, settings=required, abi=0)
    assert "cannot confine the inspection" in got["t1"] and launcher.started == []
    _inspect(launcher, home, [_target(home)], deadline=60, abi=0)
    assert launcher.started[0][1].unconfined is not None  # handed over as such: the worker reports it
    _all_gone(launcher)


def test_the_control_loop_serves_while_a_listing_waits_for_a_hanging_inspection(tmp_path: Path) -> None:
    short = Path(tempfile.mkdtemp(prefix="yg-", dir="/tmp"))
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(short / "notify.sock"))
    notify.setblocking(False)
    try:
        paths = ensure_runtime_dir(short / "run")
        home = tmp_path / "home"
        home.mkdir()
        launcher = HostileInspections("hang")
        daemon = Daemon(Settings(), paths, home, launcher,
                        notifier=SystemdNotifier({"NOTIFY_SOCKET": str(short / "notify.sock")}))
        registry = daemon.registry
        project = registry.ensure_project(tmp_path)
        row = registry.create_task(project, "stopped mid-delegation")
        turn = registry.add_turn(row.id, "go", agent="director")
        registry.add_run("rootrun", row.id, turn, None, "director", "", "go")
        registry.set_turn_root(row.id, turn, "rootrun")
        registry.finish_run("rootrun", RunStatus.INTERRUPTED, StopReason.INTERRUPTED, "", "")
        registry.finish_turn(row.id, turn, TaskState.INTERRUPTED, "")
        registry.set_task_state(row.id, TaskState.INTERRUPTED)
        (home / "tasks" / row.id).mkdir(parents=True)

        async def main() -> tuple[list[str], ResumeCandidateList]:
            serving = asyncio.create_task(daemon.serve())
            order: list[str] = []
            loop = asyncio.get_running_loop()
            async with asyncio.timeout(30):
                while b"READY=1" not in await loop.sock_recv(notify, 4096):
                    pass
            try:
                async with DaemonClient(paths.root, timeout=60) as client:
                    async def listing() -> ResumeCandidateList:
                        got = await client.request(ListResumeCandidates(id=0), ResumeCandidateList)
                        order.append("listing")
                        return got

                    pending = asyncio.create_task(listing())
                    # The inspection is under way (its process exists) when the status is asked for.
                    assert await asyncio.to_thread(launcher.launched.wait, 30)
                    await client.request(StatusRequest(id=0), DaemonStatus)
                    order.append("status")
                    return order, await pending
            finally:
                daemon.request_shutdown()
                await serving

        order, listed = asyncio.run(main())
        assert order == ["status", "listing"]  # the status was answered while the inspection hung
        (candidate,) = listed.candidates
        assert candidate.task.task == row.id and candidate.children == []
        assert "did not report within 5s of its start and was stopped" in candidate.uninspected
        _all_gone(launcher)
    finally:
        notify.close()
        shutil.rmtree(short, ignore_errors=True)
