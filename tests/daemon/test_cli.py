"""The `yagent` command against a real daemon."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.daemon_harness import DaemonProcess, script, wait_until
from yagent.ipc.vocabulary import EventType, QuestionKind

pytestmark = pytest.mark.e2e


def test_daemon_start_status_stop_cycle(tmp_path: Path) -> None:
    d = DaemonProcess(tmp_path / "d", "")
    try:
        status = d.cli("daemon", "status")
        assert status.returncode == 3
        assert "yagent daemon start" in status.stdout
        started = d.cli("daemon", "start")
        assert started.returncode == 0, started.stderr
        assert "yagentd started (pid" in started.stdout
        again = d.cli("daemon", "start")
        assert again.returncode == 0 and "already running" in again.stdout
        status = d.cli("--json", "daemon", "status")
        assert status.returncode == 0
        info = json.loads(status.stdout)
        assert info["running"] and info["leases"]["limit"] == 8
        stopped = d.cli("daemon", "stop")
        assert stopped.returncode == 0 and "stopped" in stopped.stdout
        assert d.cli("daemon", "status").returncode == 3
    finally:
        d.cli("daemon", "stop")
        d.close()


def test_daemon_start_reports_why_it_failed(tmp_path: Path) -> None:
    d = DaemonProcess(tmp_path / "d", "")
    (d.home / "config" / "config.toml").write_text("[agent]\nmax_parallel_delegations = [\n")
    try:
        result = d.cli("daemon", "start")
        assert result.returncode == 1
        assert "configuration error" in result.stderr and "yagent setup" in result.stderr
    finally:
        d.close()


def test_daemon_started_from_a_project_does_not_import_the_projects_modules(tmp_path: Path) -> None:
    # `python -m` puts the working directory first on sys.path: a project's msgpack.py would replace the
    # daemon's (and, through the forkserver, every worker's) msgpack.
    d = DaemonProcess(tmp_path / "d", "")
    project = tmp_path / "project"
    project.mkdir()
    (project / "msgpack.py").write_text('raise SystemExit("the project\'s msgpack.py was imported")\n')
    try:
        # Run like the installed `yagent` script, which (unlike `python -m`) does not put the cwd on sys.path.
        started = subprocess.run([sys.executable, "-P", "-m", "yagent.client.cli", "daemon", "start"], env=d.env,
                                 text=True, capture_output=True, timeout=60, cwd=project)
        assert started.returncode == 0, started.stderr
    finally:
        d.cli("daemon", "stop")
        d.close()


def test_run_prints_the_streamed_answer_and_exits_with_the_outcome(daemon, project: Path) -> None:
    ok = daemon.cli("run", "--project", str(project), "--agent", "scripted",
                    script({"emit": 3, "size": 2}))
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == "xxxxxx"
    failed = daemon.cli("run", "--project", str(project), "--agent", "scripted", script({"crash": "raise"}))
    assert failed.returncode == 1
    assert "scripted crash" in failed.stdout


def test_run_json_streams_one_line_per_event_and_a_result(daemon, project: Path) -> None:
    result = daemon.cli("--json", "run", "--agent", "scripted", script({"emit": 2}, output="fin"), cwd=project)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [ln["seq"] for ln in lines[:-1]] == list(range(1, len(lines)))
    assert set(lines[0]) == {"seq", "task", "run", "agent", "type", "ts", "data"}
    assert lines[-1]["type"] == "result" and lines[-1]["status"] == "done" and lines[-1]["output"] == "fin"


def test_detach_ps_logs_and_control(daemon, project: Path) -> None:
    sub = daemon.cli("--json", "run", "--detach", "--agent", "scripted", script({"step": 400}), cwd=project)
    assert sub.returncode == 0, sub.stderr
    task = json.loads(sub.stdout)["task"]
    listing = json.loads(daemon.cli("--json", "ps").stdout)
    assert [t["task"] for t in listing] == [task]
    human = daemon.cli("ps").stdout
    assert task in human and str(project) in human and "└ scripted" in human
    paused = daemon.cli("pause", task[:5])
    assert paused.returncode == 0 and "paused" in paused.stdout
    assert json.loads(daemon.cli("--json", "ps").stdout)[0]["state"] == "paused"
    assert daemon.cli("continue", task).returncode == 0
    cancelled = daemon.cli("cancel", task)
    assert cancelled.returncode == 0
    wait_until(lambda: json.loads(daemon.cli("--json", "ps").stdout)[0]["state"] == "cancelled", 30,
               "the task to be cancelled")
    log = daemon.cli("--json", "logs", task)
    types = [json.loads(line)["type"] for line in log.stdout.splitlines()]
    assert types[0] == EventType.TURN_STARTED and EventType.TASK_PAUSED in types and EventType.TASK_RESUMED in types
    assert types[-2:] == [EventType.TURN_FINISHED, "result"]
    assert daemon.cli("pause", task).returncode == 1  # nothing left to pause


def test_logs_follow_replays_then_streams_live(daemon, project: Path) -> None:
    sub = daemon.cli("--json", "run", "--detach", "--agent", "scripted",
                     script({"emit": 50}, {"ask": {"kind": "confirm", "prompt": "go on?"}}, {"emit": 50}), cwd=project)
    task = json.loads(sub.stdout)["task"]
    follower = subprocess.Popen([sys.executable, "-m", "yagent.client.cli", "--json", "logs", "-f", task],
                                env=daemon.env, stdout=subprocess.PIPE, text=True)
    try:
        seen = []
        assert follower.stdout is not None
        for line in follower.stdout:
            ev = json.loads(line)
            seen.append(ev)
            if ev["type"] == EventType.USER_HELP_NEEDED:
                answered = daemon.cli("answer", task, "yes")
                assert answered.returncode == 0, answered.stderr
            if ev["type"] == "result":
                break
    finally:
        follower.kill()
        follower.wait()
    seqs = [e["seq"] for e in seen if "seq" in e]
    assert seqs == list(range(1, len(seqs) + 1))
    assert sum(e["type"] == EventType.AI_CHUNK for e in seen) == 100


def test_unknown_task_and_no_daemon_errors_are_actionable(daemon, tmp_path: Path) -> None:
    missing = daemon.cli("logs", "tnothere")
    assert missing.returncode == 1 and "yagent ps" in missing.stderr
    other = DaemonProcess(tmp_path / "nodaemon", "")
    try:
        result = other.cli("pause", "t1")  # `ps` and `logs` start the daemon (tests/client/test_config_refusals.py)
        assert result.returncode == 3
        assert "yagentd is not running" in result.stderr and "yagent daemon start" in result.stderr
    finally:
        other.close()


def test_a_task_log_past_its_cap_is_trimmed_and_logs_says_what_is_gone(make_daemon, project: Path) -> None:
    daemon = make_daemon("[daemon]\nevent_ring = 100\nevent_log_max_bytes = 65536\n")
    sub = daemon.cli("--json", "run", "--agent", "scripted", script({"emit": 600, "size": 500}), cwd=project)
    task = json.loads(sub.stdout.splitlines()[-1])["task"]
    assert (daemon.home / "events" / f"{task}.log").stat().st_size <= 65536  # ~300 KB were published
    result = daemon.cli("--json", "logs", task)
    seqs = [json.loads(line)["seq"] for line in result.stdout.splitlines() if "seq" in json.loads(line)]
    assert seqs[0] > 400 and seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert f"{seqs[0] - 1} events of task {task} are no longer kept" in result.stderr


def test_event_logs_past_their_retention_are_deleted_and_the_task_stays_listed(make_daemon, project: Path) -> None:
    config = '[daemon]\nevent_log_retention = "1d"\n'
    daemon = make_daemon(config)
    sub = daemon.cli("--json", "run", "--agent", "scripted", script({"emit": 5}), cwd=project)
    task = json.loads(sub.stdout.splitlines()[-1])["task"]
    log = daemon.home / "events" / f"{task}.log"
    two_days_ago = time.time() - 2 * 86400
    os.utime(log, (two_days_ago, two_days_ago))
    assert daemon.terminate() == 0
    again = DaemonProcess(daemon.root, config)
    again.home, again.runtime = daemon.home, daemon.runtime
    try:
        again.start()  # a pass runs at start, then hourly
        assert not log.exists()
        assert [t["task"] for t in json.loads(again.cli("--json", "ps").stdout)] == [task]
        result = again.cli("--json", "logs", task)
        assert "are no longer kept" in result.stderr
    finally:
        again.close()


def test_logs_says_when_history_is_gone(make_daemon, project: Path) -> None:
    daemon = make_daemon("[daemon]\nevent_ring = 100\n")
    sub = daemon.cli("--json", "run", "--agent", "scripted", script({"emit": 300}), cwd=project)
    task = json.loads(sub.stdout.splitlines()[-1])["task"]
    (daemon.home / "events" / f"{task}.log").unlink()  # the history on disk is lost; only the ring is left
    result = daemon.cli("--json", "logs", task)
    seqs = [json.loads(line)["seq"] for line in result.stdout.splitlines() if "seq" in json.loads(line)]
    assert len(seqs) == 100 and seqs == list(range(seqs[0], seqs[0] + 100))
    assert f"{seqs[0] - 1} events of task {task} are no longer kept" in result.stderr


def test_answer_refuses_a_value_the_question_cannot_take_and_takes_several_words(daemon, project: Path) -> None:
    auth = {"ask": {"kind": QuestionKind.AUTHORIZE, "prompt": "delete build/?",
                    "options": ["once", "session", "project", "deny"], "details": {"tool": "delete_file"}}}
    sub = daemon.cli("--json", "run", "--detach", "--agent", "scripted",
                     script(auth, {"ask": {"kind": "input", "prompt": "which database?"}}), cwd=project)
    task = json.loads(sub.stdout)["task"]

    def pending() -> list[dict]:
        return json.loads(daemon.cli("--json", "ps").stdout)[0]["questions"]

    wait_until(pending, 30, "the authorisation prompt")
    refused = daemon.cli("answer", task, "yes")  # would be read as a refusal by the agent
    assert refused.returncode == 2
    assert "answer one of: once, session, project, deny" in refused.stderr
    assert [q["prompt"] for q in pending()] == ["delete build/?"]  # still waiting
    assert daemon.cli("answer", task, "Once").returncode == 0
    wait_until(lambda: [q["prompt"] for q in pending()] == ["which database?"], 30, "the second question")
    several = daemon.cli("--json", "answer", task, "the", "staging", "one")
    assert several.returncode == 0, several.stderr
    assert json.loads(several.stdout)["value"] == "the staging one"
    wait_until(lambda: json.loads(daemon.cli("--json", "ps").stdout)[0]["state"] == "done", 30, "the turn to end")
    result = json.loads(daemon.cli("--json", "logs", task).stdout.splitlines()[-1])
    notes = json.loads(result["output"])["notes"]
    assert notes == [{"answer": {"value": "once"}}, {"answer": {"value": "the staging one"}}]
    nothing = daemon.cli("answer", task, "yes")
    assert nothing.returncode == 1
    assert f"task {task} has no question waiting for an answer (state: done)" in nothing.stderr
