"""Headless runs against a real daemon: JSON lines, questions answered from elsewhere, yolo, exit codes."""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.client.conftest import PROVIDER_CONFIG
from tests.daemon_harness import DaemonProcess, script
from yagent.ipc.vocabulary import EventType, QuestionKind

pytestmark = pytest.mark.e2e

EVENT_FIELDS = {"seq", "task", "run", "agent", "type", "ts", "data"}


def popen(daemon: DaemonProcess, *args: str, cwd: Path, stdout: Any = subprocess.PIPE) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "yagent.client.cli", *args], env=daemon.env, cwd=str(cwd),
                            stdout=stdout, stderr=subprocess.PIPE, text=True)


def task_of(hint_line: str) -> str:
    """The task id in a "`yagent attach TASK`" hint."""
    return hint_line.split("yagent attach ")[1].split("`")[0]


def test_print_mode_streams_json_lines_and_a_final_answer(make_daemon, project: Path) -> None:
    daemon = make_daemon(PROVIDER_CONFIG)
    result = daemon.cli("--json", "-p", script({"chunks": ["你好", " world"]}, output="the full answer"),
                        "--agent", "scripted", cwd=project)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    events, final = lines[:-1], lines[-1]
    assert all(set(e) == EVENT_FIELDS for e in events)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert [e["data"]["text"] for e in events if e["type"] == EventType.AI_CHUNK] == ["你好", " world"]
    assert final == {"type": "result", "task": events[0]["task"], "status": "done", "stop_reason": "agent_exit",
                     "output": "the full answer", "error": ""}


def test_continue_flag_sends_print_mode_to_the_latest_task_and_task_picks_one(make_daemon, project: Path) -> None:
    daemon = make_daemon(PROVIDER_CONFIG)

    def task_of_run(*args: str) -> tuple[str, str]:
        result = daemon.cli("--json", *args, "--agent", "scripted", cwd=project)
        assert result.returncode == 0, result.stderr
        final = json.loads(result.stdout.splitlines()[-1])
        turn = next(json.loads(line)["data"]["turn"] for line in result.stdout.splitlines()
                    if json.loads(line).get("type") == EventType.TURN_STARTED)
        return final["task"], turn

    first, _ = task_of_run("-p", script(output="one"))
    second, _ = task_of_run("-p", script(output="two"))
    assert first != second  # -p alone starts a new task each time
    latest, turn = task_of_run("-c", "-p", script(output="three"))
    assert (latest, turn) == (second, 2)  # -c: the project's latest task, its next turn
    picked, turn = task_of_run("--task", first, "-p", script(output="four"))
    assert (picked, turn) == (first, 2)
    fresh, _ = task_of_run("-c", "--new", "-p", script(output="five"))
    assert fresh not in (first, second)


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
        answered = daemon.cli("answer", task_of(seen[-1]), "yes")
        assert answered.returncode == 0, answered.stderr
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "after the answer" in out


def test_yolo_approves_in_project_authorisation_only(make_daemon, project: Path) -> None:
    daemon = make_daemon(PROVIDER_CONFIG)
    steps = script({"ask": {"kind": QuestionKind.AUTHORIZE, "prompt": "delete build/?",
                            "details": {"tool": "delete_file"}}},
                   {"ask": {"kind": QuestionKind.AUTHORIZE, "prompt": "edit /etc/hosts?",
                            "details": {"outside_paths": ["/etc/hosts"]}}})
    proc = popen(daemon, "--json", "-p", steps, "--agent", "scripted", "--yolo", cwd=project)
    try:
        assert proc.stdout is not None
        questions = []
        for line in proc.stdout:
            ev = json.loads(line)
            if ev["type"] == EventType.USER_HELP_NEEDED:
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


class PipeReader:
    """What a child writes to a pipe, read on a thread as it arrives (no need for a newline), so that a
    test can wait for some text with a deadline."""

    def __init__(self, stream: Any) -> None:
        self._fd = stream.fileno()
        self._text = ""
        self._ended = False
        self._changed = threading.Condition()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")()
        while chunk := os.read(self._fd, 65536):
            with self._changed:
                self._text += decoder.decode(chunk)
                self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def wait_for(self, needle: str, timeout: float = 30.0) -> str:
        """The line (so far) that holds `needle`, once it has been written."""
        with self._changed:
            if not self._changed.wait_for(lambda: needle in self._text or self._ended, timeout):
                raise AssertionError(f"no {needle!r} within {timeout}s; saw {self._text!r}")
            if needle not in self._text:
                raise AssertionError(f"the stream ended without {needle!r}; saw {self._text!r}")
            at = self._text.index(needle)
            start = self._text.rfind("\n", 0, at) + 1
            end = self._text.find("\n", at)
            return self._text[start:] if end < 0 else self._text[start:end + 1]

    def rest(self, timeout: float = 30.0) -> str:
        """Everything written, once the writer has closed the pipe."""
        with self._changed:
            if not self._changed.wait_for(lambda: self._ended, timeout):
                raise AssertionError(f"the stream did not end within {timeout}s; saw {self._text!r}")
            return self._text


@contextlib.contextmanager
def client_process(daemon: DaemonProcess, *args: str, cwd: Path) -> Iterator[tuple[subprocess.Popen[str], PipeReader,
                                                                                     PipeReader]]:
    """`yagent ARGS` with its stdout and stderr read as they arrive; killed on the way out if still running."""
    proc = popen(daemon, *args, cwd=cwd)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        yield proc, PipeReader(proc.stdout), PipeReader(proc.stderr)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_json_is_accepted_after_the_command_as_the_spec_writes_it(make_daemon, project: Path) -> None:
    daemon = make_daemon(PROVIDER_CONFIG)
    result = daemon.cli("run", "--json", "--agent", "scripted", script({"emit": 1}, output="fin"), cwd=project)
    assert result.returncode == 0, result.stderr
    final = json.loads(result.stdout.splitlines()[-1])
    assert final["type"] == "result" and final["output"] == "fin"
    listing = daemon.cli("ps", "--json")
    assert listing.returncode == 0, listing.stderr
    assert [t["task"] for t in json.loads(listing.stdout)] == [final["task"]]


def test_a_closed_stdout_ends_the_client_without_a_traceback(make_daemon, project: Path) -> None:
    daemon = make_daemon(PROVIDER_CONFIG)
    proc = popen(daemon, "--json", "-p", script({"emit": 20000}), "--agent", "scripted", cwd=project)
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
        proc.stdout.close()  # `yagent --json -p … | head -1`
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert first["type"] == EventType.TURN_STARTED
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert proc.returncode == 141


def test_a_daemon_killed_mid_run_is_reported_with_what_to_do(make_daemon, project: Path) -> None:
    daemon = make_daemon(PROVIDER_CONFIG)
    with client_process(daemon, "-p", script({"step": 20000}), "--agent", "scripted", cwd=project) as (
            proc, _out_lines, err_lines):
        task = task_of(err_lines.wait_for("yagent attach"))
        assert daemon.proc is not None
        daemon.proc.kill()
        err = err_lines.rest(timeout=8)  # the liveness probe notices within a second or two
        proc.wait(timeout=8)
    assert proc.returncode == 3
    assert f"yagentd stopped while following task {task}" in err
    assert "`yagent daemon start`" in err and f"`yagent attach {task}`" in err


def test_logs_follow_reports_a_daemon_that_dies(make_daemon, project: Path) -> None:
    daemon = make_daemon(PROVIDER_CONFIG)
    sub = daemon.cli("--json", "run", "--detach", "--agent", "scripted", script({"step": 20000}), cwd=project)
    task = json.loads(sub.stdout)["task"]
    with client_process(daemon, "--json", "logs", "-f", task, cwd=project) as (proc, out_lines, err_lines):
        out_lines.wait_for('"type": "step"')
        assert daemon.proc is not None
        daemon.proc.kill()
        err = err_lines.rest(timeout=8)
        proc.wait(timeout=8)
    assert proc.returncode == 3
    assert f"yagentd stopped while following task {task}" in err


def test_ctrl_c_names_the_task_still_running_and_how_to_stop_it(make_daemon, project: Path) -> None:
    daemon = make_daemon(PROVIDER_CONFIG)
    steps = script({"chunks": ["partial answer", " rest"], "delay": 30})
    with client_process(daemon, "-p", steps, "--agent", "scripted", cwd=project) as (proc, out_lines, err_lines):
        task = task_of(err_lines.wait_for("yagent attach"))
        out_lines.wait_for("partial answer")
        proc.send_signal(signal.SIGINT)
        err = err_lines.rest(timeout=10)
        out = out_lines.rest(timeout=10)
        proc.wait(timeout=10)
    assert proc.returncode == 130
    assert f"`yagent cancel {task}` stops it" in err
    assert out == "partial answer\n"  # the cut-off line is ended, so the shell prompt starts on its own line
    assert json.loads(daemon.cli("--json", "ps").stdout)[0]["state"] == "running"


def test_json_mode_ends_with_a_result_line_also_when_no_turn_end_arrives(make_daemon, project: Path) -> None:
    daemon = make_daemon(PROVIDER_CONFIG)
    results = {}
    for how in ("ctrl-c", "daemon-killed"):
        with client_process(daemon, "--json", "-p", script({"step": 20000}), "--agent", "scripted",
                            cwd=project) as (proc, out_lines, _err_lines):
            out_lines.wait_for('"type": "step"')
            if how == "ctrl-c":
                proc.send_signal(signal.SIGINT)
            else:
                assert daemon.proc is not None
                daemon.proc.kill()
            out = out_lines.rest(timeout=10)
            proc.wait(timeout=10)
        last = json.loads(out.strip().splitlines()[-1])
        results[how] = (proc.returncode, last["type"], last["status"], bool(last["task"]))
    assert results == {"ctrl-c": (130, "result", "detached", True), "daemon-killed": (3, "result", "interrupted", True)}


def test_yolo_in_text_mode_does_not_ask_for_an_answer_it_gave_itself(make_daemon, project: Path) -> None:
    daemon = make_daemon(PROVIDER_CONFIG)
    steps = script({"ask": {"kind": QuestionKind.AUTHORIZE, "prompt": "delete build/?", "options": ["once", "deny"],
                            "details": {"tool": "delete_file"}}}, output="deleted")
    result = daemon.cli("-p", steps, "--agent", "scripted", "--yolo", cwd=project)
    assert result.returncode == 0, result.stderr
    assert "approved without asking (--yolo): delete build/?" in result.stderr
    assert "answer it from any terminal" not in result.stdout + result.stderr
    assert "asks:" not in result.stdout


def test_a_question_reaches_the_terminal_when_stdout_is_redirected(make_daemon, project: Path,
                                                                   tmp_path: Path) -> None:
    daemon = make_daemon(PROVIDER_CONFIG)
    answer_file = tmp_path / "answer.txt"
    with answer_file.open("w") as out:  # `yagent -p … > answer.txt`
        proc = popen(daemon, "-p", script({"ask": {"kind": "confirm", "prompt": "deploy now?"}}), "--agent", "scripted",
                     cwd=project, stdout=out)
    try:
        assert proc.stderr is not None
        err_lines = PipeReader(proc.stderr)
        hint = err_lines.wait_for("deploy now?")
        assert "yagent answer" in hint and "yagent attach" in hint
        assert daemon.cli("answer", task_of(hint), "yes").returncode == 0
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0


def test_an_empty_message_is_a_bad_argument(make_daemon, project: Path) -> None:
    daemon = make_daemon(PROVIDER_CONFIG)
    result = daemon.cli("-p", "", cwd=project)
    assert result.returncode == 2
    assert "the message is empty" in result.stderr


def test_a_daemon_that_cannot_start_says_why_not_to_start_it(make_daemon, project: Path) -> None:
    daemon = make_daemon(PROVIDER_CONFIG, start=False)
    (daemon.home / "state.db").mkdir()  # yagentd cannot open its registry
    result = daemon.cli("-p", "hello", "--agent", "scripted", cwd=project)
    assert result.returncode == 3
    assert "starting it failed: yagentd exited with code" in result.stderr
    assert "runtime dir yagentd" not in result.stderr  # the reason is not passed off as a directory
    assert str(daemon.home / "logs" / "yagentd.out") in result.stderr


def test_print_mode_says_when_it_started_the_daemon(make_daemon, project: Path) -> None:
    daemon = make_daemon(PROVIDER_CONFIG, start=False)
    try:
        result = daemon.cli("--json", "-p", "hello", "--agent", "scripted", cwd=project)
        assert result.returncode == 0, result.stderr
        assert "yagent: yagentd was not running; yagentd started (pid" in result.stderr
        assert json.loads(result.stdout.splitlines()[-1])["output"] == "echo: hello"
    finally:
        daemon.cli("daemon", "stop")
