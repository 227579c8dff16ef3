"""Spending limits end to end: a real daemon and Director against the fake provider, priced by the config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agent_harness import MARKERS, run_turn
from tests.daemon_harness import of_type
from tests.fake_provider import Step, ToolCallSpec, UsageSpec
from yagent.ipc.daemon_events import TurnFinished
from yagent.ipc.messages import Ack, Answer, Event, Question, TaskDetail, TaskInfo
from yagent.ipc.vocabulary import EventType, QuestionKind, TaskState

# One input token costs a dollar, so each scripted call's cost is its input token count.
PRICED = 'price = { input = 1000000.0, output = 0.0 }\n[llm]\nmax_cost_per_task = 1.5\n'


def _look(n: int) -> Step:
    return Step(text=f"Looking {n}.", tool_calls=[ToolCallSpec("list_dir", {"path": "."})],
                usage=UsageSpec(input_tokens=1, output_tokens=5))


def test_a_task_at_its_limit_pauses_asks_continues_when_raised_and_stops_when_told(
        fake, make_agent_daemon, project: Path) -> None:
    daemon = make_agent_daemon(PRICED)
    fake.script("director", MARKERS["director"], [_look(1), _look(2), _look(3), _look(4), _look(5)])
    answers = iter(["raise to $3.00", "stop"])
    asked: list[Question] = []
    states: list[str] = []

    async def on_event(ev: Event) -> None:
        if ev.type == EventType.USER_HELP_NEEDED:
            question = Question.read(ev.data)
            asked.append(question)
            async with daemon.client() as client:
                detail = await client.request(TaskInfo(id=0, task=ev.task), TaskDetail)
                states.append(detail.task.state)
                await client.request(Answer(id=0, task=ev.task, request_id=question.request_id,
                                            answer={"value": next(answers)}, by="test"), Ack)

    _task, events = run_turn(daemon, project, "Look around.", on_event=on_event)
    end = TurnFinished.read(of_type(events, EventType.TURN_FINISHED)[0].data)
    assert end.state == TaskState.CANCELLED and "spending limit" in end.error
    assert [q.kind for q in asked] == [QuestionKind.SELECT, QuestionKind.SELECT]
    assert "$2.00 spent this task, the limit is $1.50" in asked[0].prompt
    assert "the limit is $3.00" in asked[1].prompt  # raised once, reached again
    assert states == [TaskState.PAUSED, TaskState.PAUSED]
    # Two calls before the first question, one more after raising it; none after the answer to stop.
    assert len(fake.requests_for("director")) == 3
    fake.assert_no_problems()


def test_what_runs_cost_is_kept_after_they_end_and_the_days_total_survives_a_restart(
        fake, make_agent_daemon, project: Path) -> None:
    daemon = make_agent_daemon(PRICED.replace("max_cost_per_task = 1.5", "max_cost_per_day = 100.0"))
    fake.script("director", MARKERS["director"], [
        _look(1), Step(text="Done.", tool_calls=[ToolCallSpec("agent_exit", {"summary": "ok"})],
                       usage=UsageSpec(input_tokens=2, output_tokens=5))])
    run_turn(daemon, project, "Look around.")
    (listed,) = json.loads(daemon.cli("--json", "ps").stdout)
    (run,) = listed["runs"]
    assert (run["requests"], run["input_tokens"], run["output_tokens"]) == (2, 3, 10)
    assert run["cost_usd"] == pytest.approx(3.0) and run["cost_known"] and listed["cost_usd"] == pytest.approx(3.0)
    assert (listed["requests"], listed["input_tokens"], listed["output_tokens"]) == (2, 3, 10)
    assert daemon.terminate() == 0
    daemon.start()
    shown = daemon.cli("--json", "daemon", "status")
    status = json.loads(shown.stdout)
    assert "spent_today" in status, (shown.stdout, shown.stderr)
    assert status["spent_today"] == pytest.approx(3.0) and status["daily_limit"] == 100.0
    assert json.loads(daemon.cli("--json", "ps").stdout)[0]["runs"][0]["cost_usd"] == pytest.approx(3.0)
