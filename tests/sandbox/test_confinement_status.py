"""Where Landlock is missing (simulated with the one seam, `YAGENT_LANDLOCK_ABI=0`) or turned off, runs go
unconfined and every place the user looks says so; `[sandbox] required = true` refuses them instead."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.daemon_harness import DaemonProcess, arun, collect_turn, submit
from yagent.ipc.confinement import ABI_ENV
from yagent.ipc.messages import ListTasks, TaskList
from yagent.ipc.vocabulary import EventType, RunStatus, Unconfined, YoloLevel

PROBE_MODULES = '[daemon]\nagent_modules = ["tests.agents.scripted", "tests.agents.sandbox_probe"]\n'


def _probe_turn(daemon: DaemonProcess, project: Path, ops: list[list[str]], *, yolo: str = YoloLevel.NONE,
                agent: str = "repo") -> tuple[list, list]:
    async def go() -> tuple[list, list]:
        async with daemon.client() as c:
            sub = await submit(c, project, json.dumps(ops), agent=agent, yolo=yolo)
            events = await collect_turn(c, sub.task)
            tasks = await c.request(ListTasks(id=0, project=None, limit=10), TaskList)
        return events, tasks.tasks

    return arun(go(), 120)


def test_without_landlock_runs_go_unconfined_and_the_log_status_and_run_events_say_so(
        make_daemon, project: Path, tmp_path: Path) -> None:
    daemon = make_daemon(PROBE_MODULES + "[sandbox]\nwritable_roots = []\n", env={ABI_ENV: "0"})
    outside = tmp_path / "outside-file"
    events, tasks = _probe_turn(daemon, project, [["write", str(outside)], ["write", str(project / "by_repo")]])
    assert [e.data["ok"] for e in events if e.type == "probe"] == [True, True]  # unconfined: a Repo run writes
    # Once the run has ended too, its line says it ran unconfined (the registry keeps why).
    assert [r.unconfined for t in tasks for r in t.runs] == [Unconfined.LANDLOCK_MISSING]
    assert "NOT CONFINED (no Landlock on this kernel)" in daemon.cli("ps").stdout, [t.project for t in tasks]
    assert outside.exists()
    started = [e for e in events if e.type == EventType.RUN_STARTED]
    assert [e.data["unconfined"] for e in started] == [Unconfined.LANDLOCK_MISSING]
    assert "Landlock is missing on this kernel: runs are NOT confined" in daemon.log_path.read_text()
    status = daemon.status()
    assert not status.confined and "Landlock is missing" in status.confinement
    shown = daemon.cli("daemon", "status")
    assert "sandbox      Landlock is missing on this kernel: runs are NOT confined" in shown.stdout, shown


def test_required_refuses_runs_where_landlock_is_missing_saying_what_to_do(make_daemon, project: Path) -> None:
    daemon = make_daemon(PROBE_MODULES + "[sandbox]\nrequired = true\n", env={ABI_ENV: "0"})
    events, _tasks = _probe_turn(daemon, project, [["write", str(project / "x")]])
    finished = [e for e in events if e.type == EventType.RUN_FINISHED]
    assert [e.data["status"] for e in finished] == [RunStatus.FAILED]
    assert "[sandbox] required = true" in finished[0].data["error"]
    assert "required = false" in finished[0].data["error"]
    assert not [e for e in events if e.type == "probe"] and not (project / "x").exists()
    assert "runs are refused" in daemon.status().confinement


def test_full_yolo_and_sandbox_off_run_unconfined_and_ps_says_why_while_the_run_lives(
        make_daemon, project: Path) -> None:
    daemon = make_daemon(PROBE_MODULES)
    ps = f"{sys.executable} -m yagent.client.cli ps"  # asked by the live run itself: its line carries the reason
    cases = ((YoloLevel.FULL, "", Unconfined.FULL_YOLO, "NOT CONFINED (--full-yolo)"),
             (YoloLevel.NONE, 'mode = "off"', Unconfined.SANDBOX_OFF, 'NOT CONFINED ([sandbox] mode = "off")'))
    for yolo, config, why, shown in cases:
        if config:
            daemon.write_config(PROBE_MODULES + f"[sandbox]\n{config}\n")
        events, _ = _probe_turn(daemon, project, [["write", str(project / f"by_repo_{yolo}")], ["bash", ps]],
                                yolo=yolo)
        wrote, listed = (e.data for e in events if e.type == "probe")
        assert wrote["ok"] and listed["ok"], listed
        assert shown in listed["out"], listed["out"]
        assert [e.data["unconfined"] for e in events if e.type == EventType.RUN_STARTED] == [why]


def test_a_confined_run_says_nothing_of_confinement_in_ps(make_daemon, project: Path) -> None:
    daemon = make_daemon(PROBE_MODULES + "[sandbox]\nwritable_roots = []\n")
    events, tasks = _probe_turn(daemon, project, [["write", str(project / "by_repo")]])
    assert [e.data["ok"] for e in events if e.type == "probe"] == [False]
    assert [r.unconfined for t in tasks for r in t.runs] == [""] and "CONFINED" not in daemon.cli("ps").stdout
    assert [e.data["unconfined"] for e in events if e.type == EventType.RUN_STARTED] == [""]
    assert daemon.status().confined and "runs are confined" in daemon.status().confinement
