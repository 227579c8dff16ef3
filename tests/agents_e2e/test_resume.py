"""A turn the daemon's stop (or death) cut short mid-delegation resumes with `yagent continue TASK`."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import psutil
import pytest

from tests.agent_harness import LINE_COUNTER_DESIGN, MARKERS, tool_messages
from tests.daemon_harness import arun, collect_turn, of_type, submit
from tests.fake_provider import Step, ToolCallSpec
from yagent.ipc import EventStream
from yagent.ipc.messages import Ack, TaskControl
from yagent.ipc.vocabulary import ControlAction, EventType, HandoffStatus, ReplayVerdict, RunStatus, TaskState

pytestmark = pytest.mark.e2e


def _script(fake) -> None:
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("delegate_repo", {"task": "Where is the greeting printed?"}, id="call_repo")]),
        Step(text="The greeting is printed in app.py on line 1."),
    ])
    fake.script("repo", MARKERS["repo"], [
        Step(tool_calls=[ToolCallSpec("read_file", {"path": "app.py"})]),
        Step(text="never delivered", latency=120),  # the step in flight when the daemon goes
        Step(text="app.py line 1 prints the greeting.", tool_calls=[ToolCallSpec("agent_exit", {
            "summary": "found it", "handoff": {"conclusion": "app.py:1", "status": "ok",
                                               "facts": [{"claim": "prints hello", "where": "app.py:1"}]}})]),
    ])


def _submit_until_second_step(agent_daemon, fake, project: Path, text: str, identity: str
                              ) -> tuple[str, list[psutil.Process]]:
    """Submit `text` to the Director and return once `identity` is in its second step: the task and the
    daemon's workers then."""
    async def start() -> str:
        async with agent_daemon.client() as c:
            return (await submit(c, project, text, agent="director")).task

    task = arun(start(), 30)
    fake.wait_for_requests(2, timeout=60, identity=identity)
    daemon = psutil.Process(agent_daemon.proc.pid)
    return task, [p for p in daemon.children(recursive=True) if "yagent" in " ".join(p.cmdline())]


def _stop_the_daemon_in_second_step(agent_daemon, fake, project: Path, text: str, identity: str) -> str:
    task, workers = _submit_until_second_step(agent_daemon, fake, project, text, identity)
    assert agent_daemon.terminate() == 0
    psutil.wait_procs(workers, timeout=30)  # they write what they hold before they exit
    agent_daemon.start()
    return task


def _start_and_stop_mid_delegation(agent_daemon, fake, project: Path, *, stop: str) -> str:
    (project / "app.py").write_text('print("hello")\n')
    _script(fake)
    task, workers = _submit_until_second_step(agent_daemon, fake, project, "Where is the greeting printed?", "repo")
    if stop == "daemon-kill-9":
        agent_daemon.proc.kill()
        agent_daemon.proc.wait(10)
    elif stop == "daemon-stop":
        assert agent_daemon.terminate() == 0
    else:  # the Director's own worker dies mid-delegation; its child is stopped with it
        director = _director_worker(agent_daemon, task)
        workers = [psutil.Process(director)]
        os.kill(director, signal.SIGKILL)
        _wait_task_state(agent_daemon, task, TaskState.FAILED)
    # The workers see the daemon (or their parent) go and write what they hold before they exit.
    psutil.wait_procs(workers, timeout=30)
    return task


def _director_worker(agent_daemon, task: str) -> int:
    ps = json.loads(agent_daemon.cli("ps", "--json").stdout)
    runs = next(t for t in ps if t["task"] == task)["runs"]
    return next(r["pid"] for r in runs if r["agent"] == "director")


def _wait_task_state(agent_daemon, task: str, state: str) -> None:
    async def go():
        async with agent_daemon.client() as c, EventStream(c, task) as stream:
            async for ev in stream.events():
                if ev.type == EventType.TURN_FINISHED:
                    return ev.data["state"]
        return None

    assert arun(go(), 60) == state


def _continue(agent_daemon, task: str) -> tuple[Ack, list]:
    async def go():
        async with agent_daemon.client() as c:
            ack = await c.request(TaskControl(id=0, task=task, action=ControlAction.CONTINUE), Ack)
            events = await collect_turn(c, task, turn=2)
            return ack, events

    return arun(go(), 90)


@pytest.mark.parametrize("stop", ["daemon-stop", "daemon-kill-9", "director-kill-9"])
def test_an_interrupted_delegation_is_replayed_by_continue_and_no_finished_step_is_asked_again(
        agent_daemon, fake, project: Path, stop: str) -> None:
    task = _start_and_stop_mid_delegation(agent_daemon, fake, project, stop=stop)
    if stop != "director-kill-9":
        agent_daemon.start()
        ps = json.loads(agent_daemon.cli("ps", "--json").stdout)
        assert next(t for t in ps if t["task"] == task)["state"] == TaskState.INTERRUPTED
    listed = json.loads(agent_daemon.cli("resume", "--json").stdout)
    assert [(c["task"], c["resumable"]) for c in listed] == [(task, True)]

    ack, events = _continue(agent_daemon, task)
    assert ack.detail == "resumed turn 1 as turn 2"
    assert json.loads(agent_daemon.cli("resume", "--json").stdout) == []  # no longer stopped midway
    first, started = (e.data for e in of_type(events, EventType.TURN_STARTED))
    assert first["resumes"] == 0 and started["resumes"] == 1
    stopped, finished = (e.data for e in of_type(events, EventType.TURN_FINISHED))
    assert stopped["status"] != RunStatus.DONE
    assert finished["status"] == RunStatus.DONE, finished
    assert finished["output"] == "The greeting is printed in app.py on line 1."

    # The Director's first step was not asked again: one request before the stop, one after.
    director = fake.requests_for("director")
    assert len(director) == 2
    # Its second call carries exactly one result for the delegation, the replayed child's (last wins).
    results = [m for m in tool_messages(director[1]) if m["tool_call_id"] == "call_repo"]
    assert len(results) == 1
    assert "app.py line 1 prints the greeting." in results[0]["content"]
    assert "status ok" in results[0]["content"]
    # The child went on from its first step: only the step in flight was asked again, and it was asked with
    # the first step's result in its history.
    repo = fake.requests_for("repo")
    assert len(repo) == 3
    assert tool_messages(repo[2]) and 'print("hello")' in tool_messages(repo[2])[0]["content"]
    fake.assert_no_problems()


def test_a_delegation_whose_record_is_gone_comes_back_as_a_degraded_report_not_an_error(
        agent_daemon, fake, project: Path) -> None:
    task = _start_and_stop_mid_delegation(agent_daemon, fake, project, stop="daemon-stop")
    rollouts = agent_daemon.home / "tasks" / task / "rollout"
    children = [p for p in rollouts.iterdir() if p.name.endswith("_repo.jsonl")]
    assert len(children) == 1
    children[0].unlink()  # the interrupted child's record is lost: replaying it is not safe
    agent_daemon.start()

    _, events = _continue(agent_daemon, task)
    assert of_type(events, EventType.TURN_FINISHED)[-1].data["status"] == RunStatus.DONE
    director = fake.requests_for("director")
    assert len(director) == 2
    (result,) = [m for m in tool_messages(director[1]) if m["tool_call_id"] == "call_repo"]
    content = result["content"]
    assert f"status {HandoffStatus.DEGRADED}" in content and "no rollout" in content
    assert "Done:" in content and "Not done:" in content and "Next steps:" in content
    assert "failed unexpectedly" not in content and "DaemonLost" not in content
    assert len(fake.requests_for("repo")) == 2  # a degraded report asks the model nothing
    # The board keeps it as a note whose hand-off says degraded (the reason stays with the task).
    notes = list((agent_daemon.home / "tasks" / task / "notes" / "repo").glob("*.md"))
    assert len(notes) == 1
    _, front, _body = notes[0].read_text().split("---\n", 2)  # JSON between the two fences
    front = json.loads(front)
    assert front["handoff"]["status"] == HandoffStatus.DEGRADED


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


def test_a_replayed_child_replays_its_own_interrupted_delegation_one_level_down(
        agent_daemon, fake, project: Path) -> None:
    # Director → Repo → DevOps; the daemon stops while DevOps is in its second step.
    (project / "app.py").write_text('print("hello")\n')
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("delegate_repo", {"task": "Which Python runs app.py?"}, id="call_repo")]),
        Step(text="app.py runs on Python 3."),
    ])
    fake.script("repo", MARKERS["repo"], [
        Step(tool_calls=[ToolCallSpec("delegate_devops", {"task": "Report the python3 version."}, id="call_ops")]),
        Step(text="Python 3.", tool_calls=[ToolCallSpec("agent_exit", {
            "summary": "python 3", "handoff": {"conclusion": "runs on python 3", "status": "ok"}})]),
    ])
    fake.script("devops", MARKERS["devops"], [
        Step(tool_calls=[ToolCallSpec("list_files", {"path": "."})]),
        Step(text="never delivered", latency=120),  # in flight when the daemon goes
        Step(text="python3 is installed.", tool_calls=[ToolCallSpec("agent_exit", {
            "summary": "python3 found", "handoff": {"conclusion": "python3 present", "status": "ok"}})]),
    ])

    task = _stop_the_daemon_in_second_step(agent_daemon, fake, project, "Which Python runs app.py?", "devops")
    # `yagent resume` says beforehand what happens at both levels.
    (listed,) = json.loads(agent_daemon.cli("resume", "--json").stdout)
    assert [(c["agent"], c["verdict"], c["depth"], c["step"]) for c in listed["children"]] == [
        ("repo", ReplayVerdict.REPLAYABLE, 1, 2), ("devops", ReplayVerdict.REPLAYABLE, 2, 2)]

    _, events = _continue(agent_daemon, task)
    finished = of_type(events, EventType.TURN_FINISHED)[-1].data
    assert finished["status"] == RunStatus.DONE and finished["output"] == "app.py runs on Python 3.", finished
    # No finished step is asked again at any level: each asks only the step the stop cut off.
    assert [len(fake.requests_for(a)) for a in ("director", "repo", "devops")] == [2, 2, 3]
    # DevOps went on with its first step's result in its history.
    assert tool_messages(fake.requests_for("devops")[2])
    # Repo's next call holds one result for its delegation: the replayed DevOps report, not an interruption.
    (ops,) = [m for m in tool_messages(fake.requests_for("repo")[1]) if m["tool_call_id"] == "call_ops"]
    assert "python3 is installed." in ops["content"] and "Interrupted" not in ops["content"]
    (repo,) = [m for m in tool_messages(fake.requests_for("director")[1]) if m["tool_call_id"] == "call_repo"]
    assert "Python 3." in repo["content"] and "status ok" in repo["content"]
    fake.assert_no_problems()


def test_a_meta_delegation_cut_off_in_its_first_run_is_not_designed_again(agent_daemon, fake, project: Path) -> None:
    (project / "notes.txt").write_text("alpha\nbeta\n")
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("load_tool", {"names": ["delegate_meta"]})]),
        Step(tool_calls=[ToolCallSpec("delegate_meta", {"task": "An agent that counts lines."}, id="call_meta")]),
        Step(text="notes.txt has 2 lines."),
    ])
    fake.script("meta", MARKERS["meta"], [Step(text=json.dumps(LINE_COUNTER_DESIGN))])
    fake.script("custom", MARKERS["custom"], [
        Step(tool_calls=[ToolCallSpec("read_file", {"path": "notes.txt"})]),
        Step(text="never delivered", latency=120),  # the first run's step in flight when the daemon goes
        Step(text="notes.txt has 2 lines.", tool_calls=[ToolCallSpec("agent_exit", {
            "summary": "2 lines", "handoff": {"conclusion": "2", "status": "ok"}})]),
    ])

    task = _stop_the_daemon_in_second_step(agent_daemon, fake, project, "Count lines with a purpose-built agent.",
                                           "custom")
    (listed,) = json.loads(agent_daemon.cli("resume", "--json").stdout)
    assert [(c["call_id"], c["agent"], c["verdict"], c["step"]) for c in listed["children"]] == [
        ("call_meta", "custom:line_counter", ReplayVerdict.REPLAYABLE, 2)]

    _, events = _continue(agent_daemon, task)
    finished = of_type(events, EventType.TURN_FINISHED)[-1].data
    assert finished["status"] == RunStatus.DONE and finished["output"] == "notes.txt has 2 lines.", finished
    # The design was made once; the first run went on from its finished step; the Director asked once more.
    assert [len(fake.requests_for(a)) for a in ("meta", "custom", "director")] == [1, 3, 3]
    assert 'alpha' in tool_messages(fake.requests_for("custom")[2])[0]["content"]
    (result,) = [m for m in tool_messages(fake.requests_for("director")[2]) if m["tool_call_id"] == "call_meta"]
    assert "designed before the stop" in result["content"] and "notes.txt has 2 lines." in result["content"]
    resumed = [e.agent for e in of_type(events, EventType.RUN_STARTED)][-3:]
    assert resumed == ["director", "meta", "custom:line_counter"]
    fake.assert_no_problems()
