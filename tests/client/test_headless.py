"""Headless runs against a real daemon: JSON lines, questions answered from elsewhere, yolo, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.client.conftest import PROVIDER_CONFIG
from tests.daemon_harness import DaemonProcess, script

pytestmark = pytest.mark.e2e

EVENT_FIELDS = {"seq", "task", "run", "agent", "type", "ts", "data"}


def popen(daemon: DaemonProcess, *args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "yagent.client.cli", *args], env=daemon.env, cwd=str(cwd),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_print_mode_streams_json_lines_and_a_final_answer(make_daemon, project: Path) -> None:
    daemon = make_daemon(PROVIDER_CONFIG)
    result = daemon.cli("--json", "-p", script({"chunks": ["你好", " world"]}, output="the full answer"),
                        "--agent", "scripted", cwd=project)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    events, final = lines[:-1], lines[-1]
    assert all(set(e) == EVENT_FIELDS for e in events)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert [e["data"]["text"] for e in events if e["type"] == "ai_chunk"] == ["你好", " world"]
    assert final == {"type": "result", "task": events[0]["task"], "status": "done", "stop_reason": "agent_exit",
                     "output": "the full answer", "error": ""}


def test_a_question_says_how_to_answer_it_and_the_run_waits(make_daemon, project: Path) -> None:
    daemon = make_daemon(PROVIDER_CONFIG)
    proc = popen(daemon, "-p", script({"ask": {"kind": "confirm", "prompt": "deploy now?"}},
                                      {"chunks": ["after the answer"]}), "--agent", "scripted", cwd=project)
    try:
        assert proc.stdout is not None
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if "yagent attach" in line:
                break
        assert any("asks: deploy now?" in line for line in seen)
        hint = seen[-1]
        task = hint.split("yagent attach ")[1].split("`")[0]
        answered = daemon.cli("answer", task, "yes")
        assert answered.returncode == 0, answered.stderr
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "after the answer" in out


def test_yolo_approves_in_project_authorisation_only(make_daemon, project: Path) -> None:
    daemon = make_daemon(PROVIDER_CONFIG)
    steps = script({"ask": {"kind": "authorize", "prompt": "delete build/?", "details": {"tool": "delete_file"}}},
                   {"ask": {"kind": "authorize", "prompt": "edit /etc/hosts?",
                            "details": {"outside_paths": ["/etc/hosts"]}}})
    proc = popen(daemon, "--json", "-p", steps, "--agent", "scripted", "--yolo", cwd=project)
    try:
        assert proc.stdout is not None
        questions = []
        for line in proc.stdout:
            ev = json.loads(line)
            if ev["type"] == "user_help_needed":
                questions.append(ev)
                if ev["data"]["prompt"] == "edit /etc/hosts?":
                    break
        assert [q["data"]["prompt"] for q in questions] == ["delete build/?", "edit /etc/hosts?"]
        denied = daemon.cli("answer", questions[-1]["task"], "deny")
        assert denied.returncode == 0, denied.stderr
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "approved without asking (--yolo): delete build/?" in err
    result = json.loads(out.splitlines()[-1])
    notes = json.loads(result["output"])["notes"]
    assert notes == [{"answer": {"value": "once"}}, {"answer": {"value": "deny"}}]


def test_exit_codes_say_how_the_turn_ended(make_daemon, project: Path) -> None:
    daemon = make_daemon(PROVIDER_CONFIG)
    crashed = daemon.cli("-p", script({"crash": "raise"}), "--agent", "scripted", cwd=project)
    assert crashed.returncode == 1 and "scripted crash" in crashed.stdout
    proc = popen(daemon, "--json", "-p", script({"step": 2000}), "--agent", "scripted", cwd=project)
    try:
        assert proc.stdout is not None
        task = json.loads(proc.stdout.readline())["task"]
        assert daemon.cli("cancel", task).returncode == 0
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 4


@pytest.mark.parametrize("command", [["-p", "hello"], [], ["attach", "t123"], ["run", "hello"]])
def test_a_broken_config_prints_three_lines_and_exits_2(tmp_path: Path, project: Path, command: list[str]) -> None:
    d = DaemonProcess(tmp_path / "d", "")
    path = d.home / "config" / "config.toml"
    path.write_text("[llm]\ntimeout = \"soon\"\n")
    try:
        result = d.cli(*command, cwd=project)
    finally:
        d.close()
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "configuration error: [llm] timeout = 'soon' is not a duration: write e.g. \"90s\", \"10m\" or \"1h30m\"",
        f"file: {path}",
        "run `yagent setup` to fix it",
    ]
    assert result.stdout == ""
