"""A turn the daemon's stop (or death) cut short mid-delegation resumes with `yagent continue TASK`."""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest

from tests.agent_harness import MARKERS, tool_messages
from tests.daemon_harness import arun, collect_turn, of_type, submit
from tests.fake_provider import Step, ToolCallSpec
from yagent.ipc.messages import Ack, TaskControl
from yagent.ipc.vocabulary import ControlAction, EventType, HandoffStatus, RunStatus, TaskState

pytestmark = pytest.mark.e2e


def _script(fake) -> None:
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("delegate_repo", {"task": "Where is the greeting printed?"}, id="call_repo")]),
        Step(text="The repo agent was interrupted; from its report, the greeting is still to be located."),
    ])
    fake.script("repo", MARKERS["repo"], [
        Step(tool_calls=[ToolCallSpec("read_file", {"path": "app.py"})]),
        Step(text="never delivered", latency=120),  # the step in flight when the daemon goes
    ])


def _start_and_stop_mid_delegation(agent_daemon, fake, project: Path, *, kill: bool) -> str:
    (project / "app.py").write_text('print("hello")\n')
    _script(fake)

    async def start() -> tuple[str, list[int]]:
        async with agent_daemon.client() as c:
            sub = await submit(c, project, "Where is the greeting printed?", agent="director")
            return sub.task, []

    task, _ = arun(start(), 30)
    fake.wait_for_requests(2, timeout=60, identity="repo")  # the child is in its second step
    workers = [p for p in psutil.Process(agent_daemon.proc.pid).children(recursive=True)
               if "yagent" in " ".join(p.cmdline())]
    if kill:
        agent_daemon.proc.kill()
        agent_daemon.proc.wait(10)
    else:
        assert agent_daemon.terminate() == 0
    # The workers see the daemon go and write what they hold (the Director's memory) before they exit.
    psutil.wait_procs(workers, timeout=30)
    return task


def _continue(agent_daemon, task: str) -> tuple[Ack, list]:
    async def go():
        async with agent_daemon.client() as c:
            ack = await c.request(TaskControl(id=0, task=task, action=ControlAction.CONTINUE), Ack)
            events = await collect_turn(c, task, turn=2)
            return ack, events

    return arun(go(), 90)


@pytest.mark.parametrize("kill", [False, True], ids=["daemon-stop", "daemon-kill-9"])
def test_an_interrupted_delegation_resumes_with_continue_and_no_step_is_asked_twice(
        agent_daemon, fake, project: Path, kill: bool) -> None:
    task = _start_and_stop_mid_delegation(agent_daemon, fake, project, kill=kill)
    agent_daemon.start()

    ps = json.loads(agent_daemon.cli("ps", "--json").stdout)
    row = next(t for t in ps if t["task"] == task)
    assert row["state"] == TaskState.INTERRUPTED

    ack, events = _continue(agent_daemon, task)
    assert ack.detail == "resumed turn 1 as turn 2"
    first, started = (e.data for e in of_type(events, EventType.TURN_STARTED))
    assert first["resumes"] == 0 and started["resumes"] == 1
    stopped, finished = (e.data for e in of_type(events, EventType.TURN_FINISHED))
    assert stopped["status"] == RunStatus.INTERRUPTED
    assert finished["status"] == RunStatus.DONE, finished
    assert finished["output"].startswith("The repo agent was interrupted")

    # The Director's first step was not asked again: one request before the stop, one after.
    director = fake.requests_for("director")
    assert len(director) == 2
    # Its second call carries exactly one result for the delegation: the replay's (last wins), read as a
    # degraded hand-off report and not as a failure — nor as the interruption it replaced.
    results = [m for m in tool_messages(director[1]) if m["tool_call_id"] == "call_repo"]
    assert len(results) == 1
    content = results[0]["content"]
    assert f"status {HandoffStatus.DEGRADED}" in content and "Done:" in content and "Next steps:" in content
    assert "failed unexpectedly" not in content and "DaemonLost" not in content
    # The stopped child's steps were not asked again either: the replay asked the model nothing.
    assert len(fake.requests_for("repo")) == 2
    fake.assert_no_problems()


def test_continue_of_a_finished_task_says_there_is_nothing_to_resume(agent_daemon, fake, project: Path) -> None:
    fake.script("director", MARKERS["director"], [Step(text="hi")])

    async def go():
        async with agent_daemon.client() as c:
            sub = await submit(c, project, "hello", agent="director")
            await collect_turn(c, sub.task)
            return sub.task

    task = arun(go(), 60)
    done = agent_daemon.cli("continue", task)
    assert done.returncode != 0
    assert "has no turn in progress" in done.stderr and "nothing to continue" in done.stderr
