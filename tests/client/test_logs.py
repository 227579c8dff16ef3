"""`yagent logs` against a real daemon: a record a person can read, `--json` complete, `-f` live."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.client.conftest import PROVIDER_CONFIG
from tests.client.test_headless import client_process
from tests.daemon_harness import script
from yagent.ipc import event_data
from yagent.ipc.vocabulary import EventType

pytestmark = pytest.mark.e2e


def emit(type_: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"event": {"type": type_, "data": data}}


def a_step(step: int, reasoning: str, text: str, size: int = 3) -> list[dict[str, Any]]:
    """One model step as an agent streams it: reasoning and text in fragments of `size` characters."""
    pieces = lambda s: [s[i:i + size] for i in range(0, len(s), size)]  # noqa: E731
    return [emit(EventType.AI_STREAM_START, event_data.ai_stream_start(step, "m")),
            *[emit(EventType.THINKING, event_data.thinking(p)) for p in pieces(reasoning)],
            *[emit(EventType.AI_CHUNK, event_data.ai_chunk(p)) for p in pieces(text)],
            emit(EventType.AI_STREAM_END, event_data.ai_stream_end(step)),
            emit(EventType.AI_RESPONSE, event_data.ai_response(step, text, 0))]


STEPS = [*a_step(1, "Let me look at the file first.", "Reading it now."),
         emit(EventType.TOOL_CALL_START, event_data.tool_call_start("c1", "read_file", '{"path": "README.md"}',
                                                                    "README.md")),
         emit(EventType.TOOL_CALL_RESULT, event_data.tool_call_result("c1", "read_file", "a project\n" * 30, False,
                                                                      0.01)),
         *a_step(2, "Now the answer.", "The project is described in one line: a project.")]


def test_logs_print_each_step_whole_and_json_keeps_every_event(make_daemon, project: Path) -> None:
    daemon = make_daemon(PROVIDER_CONFIG)
    ran = daemon.cli("--json", "run", "--agent", "scripted", script(*STEPS, output="fin"), cwd=project)
    assert ran.returncode == 0, ran.stderr
    task = json.loads(ran.stdout.splitlines()[-1])["task"]
    plain = daemon.cli("logs", task)
    assert plain.returncode == 0, plain.stderr
    lines = plain.stdout.splitlines()
    assert lines[0].startswith('▶ turn 1: {"steps": [') and lines[0].endswith("…") and len(lines[0]) < 220
    assert lines == [
        lines[0],
        "  ✻ scripted thinking", "    Let me look at the file first.",
        "Reading it now.",
        "  ⚙ scripted: read_file README.md",
        "    ✓ read_file (0.0s): a project … (+29 lines)",
        "  ✻ scripted thinking", "    Now the answer.",
        "The project is described in one line: a project.",
        lines[-1],
    ]
    assert lines[-1].startswith("■ turn 1 done (agent_exit) after ")
    logged = [json.loads(line) for line in daemon.cli("--json", "logs", task).stdout.splitlines()]
    events = logged[:-1]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))  # every event, none merged
    fragments = [e["data"]["text"] for e in events if e["type"] == EventType.THINKING]
    assert "".join(fragments) == "Let me look at the file first.Now the answer." and len(fragments) == 15
    assert logged[-1]["type"] == "result" and logged[-1]["output"] == "fin"


def test_logs_follow_prints_each_step_as_it_ends_while_the_turn_goes_on(make_daemon, project: Path) -> None:
    daemon = make_daemon(PROVIDER_CONFIG)
    steps = script(*a_step(1, "", "The first part is done."), {"sleep": 120})
    sub = daemon.cli("--json", "run", "--detach", "--agent", "scripted", steps, cwd=project)
    task = json.loads(sub.stdout)["task"]
    with client_process(daemon, "logs", "-f", task, cwd=project) as (proc, out, _err):
        out.wait_for("The first part is done.\n")  # the turn is still running: this came live
        assert daemon.cli("cancel", task).returncode == 0
        assert out.wait_for("■ turn 1 cancelled").startswith("■ turn 1 cancelled (cancelled)")
        assert proc.poll() is None  # `-f` keeps following after the turn
