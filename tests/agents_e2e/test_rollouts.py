"""Through a real daemon: a Director turn with a delegation leaves a Director rollout and a child rollout that
names its parent run and the delegation id."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests.agent_harness import MARKERS, run_turn
from tests.daemon_harness import arun, collect_turn, of_type, submit, wait_until
from tests.fake_provider import Step, ToolCallSpec
from yagent.ipc import EventStream
from yagent.ipc.messages import Ack, TaskControl
from yagent.ipc.state_layout import rollout_dir
from yagent.ipc.vocabulary import ControlAction, EventType, StopReason
from yagent.workers.llm import Message, ToolCall
from yagent.workers.memory.replay import (
    ReplayVerdict,
    assess_replay,
    find_child_rollout,
    latest_root_rollout,
    load_for_replay,
)
from yagent.workers.memory.resume_repair import INTERRUPTED_TOOL_RESULT

pytestmark = pytest.mark.e2e


def test_a_director_turn_with_a_delegation_leaves_linked_rollouts(fake, agent_daemon, project: Path) -> None:
    fake.script("director", MARKERS["director"], [
        Step(text="<thought>\ngoal: find it\nstep: ask\nreason: facts\nplan:\n- [>] ask repo\n</thought>",
             reasoning="ask the repo agent", tool_calls=[
                 ToolCallSpec("delegate_repo", {"task": "Where is the greeting?"}, id="call_repo")]),
        Step(text="The greeting is in app.py."),
    ])
    fake.script("repo", MARKERS["repo"], [
        Step(text="app.py line 1.", reasoning="looked", tool_calls=[ToolCallSpec("agent_exit", {
            "summary": "app.py:1", "handoff": {"conclusion": "app.py line 1", "status": "ok"}})]),
    ])
    task, events = run_turn(agent_daemon, project, "Where is the greeting?")
    assert of_type(events, EventType.TURN_FINISHED)[0].data["status"] == "done"
    runs = {e.agent: e.run for e in of_type(events, EventType.RUN_STARTED)}

    directory = rollout_dir(agent_daemon.home, task)
    director_files = list(directory.glob(f"*_{runs['director']}.jsonl"))
    child_files = list(directory.glob(f"*_{runs['repo']}_repo.jsonl"))
    assert len(director_files) == 1 and len(child_files) == 1, sorted(p.name for p in directory.iterdir())

    director = load_for_replay(director_files[0])
    assert director.meta["parent_session_id"] == "" and director.meta["board"] == task
    assert director.stop_reason == StopReason.PLAIN_TEXT and director.checkpoint is not None
    results = [m for m in director.messages if m.role == "tool" and m.tool_call_id == "call_repo"]
    assert len(results) == 1 and "app.py line 1" in results[0].content
    assert director.messages[2].reasoning == "ask the repo agent"
    # The turn context as it last stood: the plan and the roster with each delegation's state.
    assert director.turn_context is not None and director.turn_context["plan"] == ["[doing] ask repo"]
    assert director.turn_context["delegations"] == [{"agent": "repo", "call_id": "call_repo", "state": "returned"}]
    assert {"agent": "repo", "state": "available"} in director.turn_context["roster"]

    child = load_for_replay(child_files[0])
    assert child.meta["parent_session_id"] == runs["director"]
    assert child.meta["delegation_id"] == "call_repo" and child.meta["agent"] == "repo"
    assert child.stop_reason == StopReason.AGENT_EXIT and child.checkpoint["delegation_id"] == "call_repo"
    assert child.turn_context is not None and "agent_exit" in child.turn_context["loaded_tools"]
    assert find_child_rollout(directory.parent, "call_repo") == child_files[0]
    # A finished child is not replayed: its result is already the parent's.
    verdict = assess_replay(directory.parent, "call_repo", project_root=project, max_steps=50)
    assert verdict.verdict == ReplayVerdict.NOT_RESUMABLE_STOP
    fake.assert_no_problems()


def _child_script(fake, command: str) -> None:
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("delegate_coding", {"task": "Run the slow check."}, id="call_code")]),
        Step(text="never reached"),
    ])
    fake.script("coding", MARKERS["coding"], [
        Step(reasoning="run it", tool_calls=[ToolCallSpec("run_bash", {"command": command}, id="call_bash")]),
        Step(text="never reached"),
    ])


async def _until_child_tool(client, project: Path, events: list) -> str:
    sub = await submit(client, project, "Run the slow check.", agent="director", yolo="yolo")
    async with EventStream(client, sub.task) as stream:
        async for ev in stream.events():
            events.append(ev)
            if ev.type == EventType.TOOL_CALL_START and ev.agent == "coding":
                return sub.task
    raise AssertionError("the task's stream ended before the child ran its tool")


def _checkpointed(path_glob) -> Path | None:
    for path in path_glob():
        replay = load_for_replay(path)
        if replay.checkpoint is not None and replay.stop_reason is not None:
            return path
    return None


def test_a_kill_9_of_the_daemon_mid_delegation_leaves_a_replayable_interrupted_child(
        fake, agent_daemon, project: Path) -> None:
    _child_script(fake, "sleep 1000")
    events: list = []

    async def go() -> str:
        async with agent_daemon.client() as c:
            return await _until_child_tool(c, project, events)

    task = arun(go(), 60)
    assert agent_daemon.proc is not None
    agent_daemon.proc.kill()
    directory = rollout_dir(agent_daemon.home, task)
    child = wait_until(lambda: _checkpointed(lambda: directory.glob("*_coding.jsonl")), 30,
                       "the child's checkpoint after the daemon's kill -9")
    replay = load_for_replay(child)
    assert replay.stop_reason == StopReason.INTERRUPTED and replay.checkpoint["delegation_id"] == "call_code"
    bash = [m for m in replay.messages if m.role == "tool" and m.tool_call_id == "call_bash"]
    assert len(bash) == 1  # the interrupted call has its one result: no dangling call for a provider
    verdict = assess_replay(directory.parent, "call_code", project_root=project, max_steps=150)
    assert verdict.replayable, verdict.reason
    director = wait_until(lambda: _checkpointed(lambda: [p for p in directory.glob("*.jsonl")
                                                         if not p.name.endswith("_coding.jsonl")]),
                          30, "the Director's checkpoint")
    stopped = load_for_replay(director)
    assert stopped.stop_reason == StopReason.INTERRUPTED
    assert stopped.turn_context is not None
    assert stopped.turn_context["delegations"] == [{"agent": "coding", "call_id": "call_code", "state": "interrupted"}]


def test_a_run_paused_at_its_step_boundary_then_cancelled_stops_as_paused(fake, agent_daemon, project: Path) -> None:
    # The tool runs until the test opens its gate, which it does only once the pause was sent: the pause is
    # on its way to the worker long before the step it must hold at, however fast or slow the machine.
    gate = project / "gate"
    _child_script(fake, f"while [ ! -e {gate} ]; do sleep 0.05; done")
    events: list = []

    async def go() -> str:
        async with agent_daemon.client() as c:
            task = await _until_child_tool(c, project, events)
            await c.request(TaskControl(id=0, task=task, action=ControlAction.PAUSE), Ack)
            gate.write_text("open")
            # The tool ends and the child reaches its gate, where the pause holds it.
            async with EventStream(c, task, after_seq=events[-1].seq) as stream:
                async for ev in stream.events():
                    if ev.type == EventType.TOOL_CALL_RESULT and ev.agent == "coding":
                        break
            await c.request(TaskControl(id=0, task=task, action=ControlAction.CANCEL), Ack)
            await collect_turn(c, task, after_seq=events[-1].seq)
            return task

    task = arun(go(), 90)
    directory = rollout_dir(agent_daemon.home, task)
    child = _checkpointed(lambda: directory.glob("*_coding.jsonl"))
    assert child is not None
    replay = load_for_replay(child)
    assert replay.stop_reason == StopReason.PAUSED and replay.checkpoint["step"] == 1, replay.stop_reason
    assert assess_replay(directory.parent, "call_code", project_root=project, max_steps=150).replayable


def test_a_director_turn_after_a_kill_mid_tool_sends_the_dangling_call_as_interrupted(
        fake, agent_daemon, project: Path) -> None:
    # The same answer twice: the Director's second reply after a delegation reminder ends the turn.
    fake.script("director", MARKERS["director"], [Step(text="first answer")] * 2)
    task, _ = run_turn(agent_daemon, project, "first question")
    assert latest_root_rollout(rollout_dir(agent_daemon.home, task).parent) is not None
    # What a worker killed mid-tool leaves in memory: a call, no result.
    memory = agent_daemon.home / "tasks" / task / "memory.jsonl"
    with memory.open("a") as fh:
        fh.write(json.dumps(Message.assistant("", tool_calls=(ToolCall("call_lost", "delegate_repo", "{}"),))
                            .to_dict()) + "\n")
    fake.script("director", MARKERS["director"], [Step(text="second answer")] * 2)
    run_turn(agent_daemon, project, "second question", task=task)
    sent = fake.requests_for("director")[-1].body["messages"]
    lost = [m for m in sent if m["role"] == "tool" and m.get("tool_call_id") == "call_lost"]
    assert [m["content"] for m in lost] == [INTERRUPTED_TOOL_RESULT]
    fake.assert_no_problems()


def test_a_kill_9_of_a_child_worker_mid_run_leaves_its_rollout_readable(fake, agent_daemon, project: Path) -> None:
    _child_script(fake, "sleep 1000")
    events: list = []

    async def go() -> str:
        async with agent_daemon.client() as c:
            task = await _until_child_tool(c, project, events)
            pid = next(e.data["pid"] for e in of_type(events, EventType.RUN_STARTED) if e.agent == "coding")
            directory = rollout_dir(agent_daemon.home, task)
            # The writer's batch holding the tool call lands within its 20 ms; kill once it is on disk.
            wait_until(lambda: any(m.tool_calls for p in directory.glob("*_coding.jsonl")
                                   for m in load_for_replay(p).messages), 30, "the child's tool call on disk")
            os.kill(pid, signal.SIGKILL)
            wait_until(lambda: not _alive(pid), 30, "the child worker to die")
            # The Director reads the crash and answers (its second step): the turn ends on its own, however
            # soon — a cancel sent now could find it over already.
            await collect_turn(c, task, after_seq=events[-1].seq)
            return task

    task = arun(go(), 90)
    directory = rollout_dir(agent_daemon.home, task)
    (child,) = directory.glob("*_coding.jsonl")
    replay = load_for_replay(child)  # the worker died between two batches or inside one: readable either way
    assert replay.checkpoint is None and replay.meta["delegation_id"] == "call_code"
    # The call the kill cut short has no result on disk: the reader answers it as interrupted.
    assert [m.content for m in replay.messages if m.tool_call_id == "call_bash"] == [INTERRUPTED_TOOL_RESULT]
    verdict = assess_replay(directory.parent, "call_code", project_root=project, max_steps=150)
    assert verdict.verdict == ReplayVerdict.NO_CHECKPOINT


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False
