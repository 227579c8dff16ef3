"""Authorisation prompts travel worker → daemon → client and back; yolo levels skip them."""

from __future__ import annotations

import json
import os
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


def _turn(daemon, project: Path, value: str, task: str | None = None, after: list | None = None,
          yolo: str = "none") -> tuple[str, list]:
    """One turn of `_script`'s, every prompt answered `value`; (its task, its events after those of `after`)."""
    async def go():
        async with daemon.client() as c:
            sub = await submit(c, project, "Clean up the build files.", agent="director", task=task, yolo=yolo)

            async def answer(ev):
                if ev.type == EventType.USER_HELP_NEEDED:
                    await c.request(Answer(id=0, task=sub.task, request_id=ev.data["request_id"],
                                           answer={"value": value}), Ack)

            return sub.task, await collect_turn(c, sub.task, turn=sub.turn, on_event=answer,
                                                after_seq=after[-1].seq if after else 0)

    return arun(go(), 90)


def _answering(daemon, project: Path, value: str, yolo: str = "none"):
    return _turn(daemon, project, value, yolo=yolo)[1]


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


def test_the_daemon_keeps_a_session_approval_for_the_tasks_later_runs_and_a_project_one_for_other_tasks(
        fake, agent_daemon, project: Path) -> None:
    home = agent_daemon.home
    _script(fake, ["touch one.txt"])
    task, events = _turn(agent_daemon, project, "session")
    assert len(of_type(events, EventType.USER_HELP_NEEDED)) == 1 and (project / "one.txt").exists()

    _script(fake, ["touch two.txt"])  # the task's next turn: a new run in a new worker, told by the daemon
    _, events = _turn(agent_daemon, project, "deny", task=task, after=events)
    assert not of_type(events, EventType.USER_HELP_NEEDED) and (project / "two.txt").exists()
    assert not list((home / "tasks").glob("*/grants.json"))  # no worker kept it anywhere

    _script(fake, ["touch three.txt"])  # another task of the project: the session approval is not its
    other, events = _turn(agent_daemon, project, "project")
    assert len(of_type(events, EventType.USER_HELP_NEEDED)) == 1 and (project / "three.txt").exists()
    saved = json.loads((home / "approvals" / "settings.json").read_text())
    assert saved == {"authorized_projects": {os.path.realpath(project): ["inside:run_bash"]}}

    _script(fake, ["touch four.txt"])  # a third task: the project's approval holds
    _, events = _turn(agent_daemon, project, "deny")
    assert not of_type(events, EventType.USER_HELP_NEEDED) and (project / "four.txt").exists()
    assert other != task


def test_a_project_approval_the_daemon_cannot_save_is_said_to_the_task_and_holds_for_it(
        fake, agent_daemon, project: Path) -> None:
    settings = agent_daemon.home / "approvals" / "settings.json"
    settings.mkdir(parents=True)  # what an unconfined run could leave there
    _script(fake, ["touch one.txt", "touch two.txt"])
    task, events = _turn(agent_daemon, project, "project")
    assert len(of_type(events, EventType.USER_HELP_NEEDED)) == 1 and (project / "two.txt").exists()
    said = [e for e in of_type(events, EventType.LOG) if "was not saved" in e.data["message"]]
    assert len(said) == 1 and said[0].agent == "coding" and said[0].data["level"] == "warning"
    assert str(settings) in said[0].data["message"] and "remove it" in said[0].data["message"]
    assert settings.is_dir() and not list(settings.iterdir())

    _script(fake, ["touch three.txt"])  # it holds for the task, as a session approval
    _, events = _turn(agent_daemon, project, "deny", task=task, after=events)
    assert not of_type(events, EventType.USER_HELP_NEEDED) and (project / "three.txt").exists()
