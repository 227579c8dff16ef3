"""Authorisation prompts travel worker → daemon → client and back; yolo levels skip them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent_harness import MARKERS, run_turn, tool_messages
from tests.daemon_harness import arun, collect_turn, of_type, submit
from tests.fake_provider import Step, ToolCallSpec
from yagent.ipc.messages import Ack, Answer
from yagent.ipc.vocabulary import EventType, QuestionKind

pytestmark = pytest.mark.e2e


def _script(fake, commands: list[str]) -> None:
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("delegate_coding", {"task": "clean up"}, id="code")]),
        Step(text="done", tool_calls=[ToolCallSpec("agent_exit", {"summary": "done"})]),
    ])
    fake.script("coding", MARKERS["coding"], [
        *[Step(tool_calls=[ToolCallSpec("run_bash", {"command": c, "is_dangerous": True})]) for c in commands],
        Step(text="finished", tool_calls=[ToolCallSpec("agent_exit", {"summary": "finished"})]),
    ])


def _answering(daemon, project: Path, value: str, yolo: str = "none"):
    async def go():
        async with daemon.client() as c:
            sub = await submit(c, project, "Clean up the build files.", agent="director", yolo=yolo)

            async def answer(ev):
                if ev.type == EventType.USER_HELP_NEEDED:
                    await c.request(Answer(id=0, task=sub.task, request_id=ev.data["request_id"],
                                           answer={"value": value}), Ack)

            return await collect_turn(c, sub.task, on_event=answer)

    return arun(go(), 90)


def test_allowing_once_runs_the_command(fake, agent_daemon, project: Path) -> None:
    _script(fake, ["touch allowed.txt"])
    events = _answering(agent_daemon, project, "once")
    asked = of_type(events, EventType.USER_HELP_NEEDED)
    assert len(asked) == 1
    q = asked[0].data
    assert q["kind"] == QuestionKind.AUTHORIZE and q["agent"] == "coding"
    assert q["options"] == ["once", "session", "project", "deny"]
    assert "touch allowed.txt" in q["prompt"]
    assert (project / "allowed.txt").exists()
    assert of_type(events, EventType.USER_HELP_RESPONSE)[0].data["answer"] == {"value": "once"}


def test_denying_returns_a_refusal_to_the_model(fake, agent_daemon, project: Path) -> None:
    _script(fake, ["touch denied.txt"])
    _answering(agent_daemon, project, "deny")
    assert not (project / "denied.txt").exists()
    refusal = tool_messages(fake.requests_for("coding")[1])[0]["content"]
    assert refusal.startswith("The user denied 'touch denied.txt'")
    assert "Do not retry it" in refusal


def test_a_session_approval_covers_the_rest_of_the_task(fake, agent_daemon, project: Path) -> None:
    _script(fake, ["touch one.txt", "touch two.txt"])
    events = _answering(agent_daemon, project, "session")
    assert len(of_type(events, EventType.USER_HELP_NEEDED)) == 1
    assert (project / "one.txt").exists() and (project / "two.txt").exists()


def test_yolo_skips_in_workspace_prompts(fake, agent_daemon, project: Path) -> None:
    _script(fake, ["touch yolo.txt"])
    _, events = run_turn(agent_daemon, project, "Clean up.", yolo="yolo")
    assert of_type(events, EventType.USER_HELP_NEEDED) == []
    assert (project / "yolo.txt").exists()


def test_full_yolo_removes_ask_user_for_help(fake, agent_daemon, project: Path) -> None:
    fake.script("director", MARKERS["director"], [Step(text="ok", tool_calls=[
        ToolCallSpec("agent_exit", {"summary": "ok"})])])
    run_turn(agent_daemon, project, "Hi.", yolo="full")
    tools = {t["function"]["name"] for t in fake.requests_for("director")[0].body["tools"]}
    assert "ask_user_for_help" not in tools and "delegate_coding" in tools
