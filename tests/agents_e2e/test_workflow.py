"""The built-in fiction workflow end to end: `yagent workflow run fiction` plans and writes a short book of three
chapters with the fake provider, each role a continuable sub-agent, every decision an event with its reason; a
fact file damaged in the middle stops it with the file named, and once fixed the same task goes on; the workflow is
a task like any other: cancel, continue, pause and attach act on it as on any task."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from tests.client.tui_harness import until
from tests.daemon_harness import arun, wait_until
from tests.fake_provider import Failure, Step, ToolCallSpec
from yagent.client.tui.backend import DaemonBackend
from yagent.client.tui.controller import TuiController, TuiOptions
from yagent.ipc import EventStream
from yagent.ipc.messages import Event, Replay, ReplayReply
from yagent.ipc.vocabulary import EventType, RunStatus, TaskState
from yagent.ipc.workflows import WORKFLOW_AGENT, workflow_dir

pytestmark = pytest.mark.e2e

ROLE = "You are the {} of yagent's fiction workflow"
FACTS = ".yagent/workflows/fiction"


def _node(text: str, *files: tuple[str, str]) -> Step:
    calls = [ToolCallSpec("create_file", {"path": path, "content": content}) for path, content in files]
    return Step(text=text, tool_calls=[*calls, ToolCallSpec("agent_exit", {
        "summary": text, "handoff": {"conclusion": text, "status": "ok"}})])


def _script(fake) -> None:
    fake.script("planner", ROLE.format("planner"), [
        _node("A short novel: one flat outline.", (f"{FACTS}/planning.toml", 'tier = "short"\n'))])
    fake.script("architect_short", ROLE.format("short-form architect"), [
        _node("Planned three chapters.", (f"{FACTS}/foundation/premise.md", "A lighthouse keeper.\n"),
              (f"{FACTS}/foundation/characters.md", "Mara, the keeper.\n"),
              (f"{FACTS}/foundation/world.md", "A rock in the sea.\n"),
              (f"{FACTS}/foundation/outline.md", "1. The storm\n2. The letter\n3. The boat\n")),
        _node("The story is told: complete.", (f"{FACTS}/complete.md", "Mara leaves the rock; the book ends.\n")),
    ])
    fake.script("writer", ROLE.format("writer"), [
        _node(f"Wrote chapter {n}.", (f"chapters/000{n}.md", f"# Chapter {n}\n\nThe sea, part {n}.\n"))
        for n in (1, 2, 3)])


def _writing(project: Path, chapters: int) -> None:
    """Facts of a short book whose foundation is complete and whose `chapters` outlined chapters are all unwritten."""
    facts = workflow_dir(project, "fiction")
    (facts / "foundation").mkdir(parents=True)
    (facts / "progress.toml").write_text('phase = "writing"\nflow = "writing"\ncompleted = []\n')
    (facts / "planning.toml").write_text('tier = "short"\n')
    for name in ("premise.md", "characters.md", "world.md"):
        (facts / "foundation" / name).write_text("x\n")
    (facts / "foundation" / "outline.md").write_text("".join(f"{n}. Part {n}\n" for n in range(1, chapters + 1)))


def _start(daemon, project: Path) -> str:
    started = daemon.cli("workflow", "run", "fiction", "--project", str(project), "--detach", "--json")
    assert started.returncode == 0, started.stderr
    return json.loads(started.stdout)["task"]


def _turn_finished(daemon, task: str, turn: int) -> dict:
    async def go() -> dict:
        async with daemon.client() as c, EventStream(c, task) as stream:
            async for ev in stream.events():
                if ev.type == EventType.TURN_FINISHED and ev.data["turn"] == turn:
                    return ev.data
        return {}

    return arun(go(), 60)


def _status(daemon) -> dict:
    status = json.loads(daemon.cli("workflow", "status", "--json").stdout)
    assert len(status) == 1
    return status[0]


def _events(daemon, task: str) -> list[Event]:
    async def go() -> list[Event]:
        async with daemon.client() as c, EventStream(c, task) as stream:
            return await stream.backlog()

    return arun(go(), 30)


def test_the_fiction_workflow_writes_a_short_book_deciding_each_step_from_its_facts(
        fake, agent_daemon, project: Path) -> None:
    _script(fake)
    result = agent_daemon.cli("workflow", "run", "fiction", "--project", str(project), timeout=120)
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert "The fiction workflow is complete: complete, 3 chapters written (3 outlined)" in result.stdout
    assert "◆ fiction 2: architect_short — Complete the book's foundation" in result.stdout
    fake.assert_no_problems()
    assert [(project / f"chapters/000{n}.md").read_text().startswith(f"# Chapter {n}") for n in (1, 2, 3)] == [True] * 3
    progress = (workflow_dir(project, "fiction") / "progress.toml").read_text()
    assert "completed = [1, 2, 3]" in progress and 'phase = "writing"' in progress

    status = json.loads(agent_daemon.cli("workflow", "status", "--json").stdout)
    assert len(status) == 1 and status[0]["workflow"] == "fiction" and status[0]["state"] == TaskState.DONE
    task = status[0]["task"]
    events = _events(agent_daemon, task)
    decisions = [e.data for e in events if e.type == EventType.WORKFLOW_DECISION]
    assert [(d["agent"] or d["situation"], d["action"]) for d in decisions] == [
        ("planner_needed", "planner"), ("architect_short", ""), ("writer", ""), ("writer", ""), ("writer", ""),
        ("architect_short", ""), ("complete", "finish")]
    assert all(d["reason"] for d in decisions)  # every decision says why
    assert decisions[2]["reason"] == "chapter 1 is next" and decisions[5]["reason"] == (
        "all 3 outlined chapters are written")
    assert status[0]["decision"]["situation"] == "complete"

    # Each role is one continuable sub-agent: the writer of chapter 2 went on from the conversation of chapter 1.
    runs = {}
    for e in events:
        if e.type == EventType.RUN_STARTED and e.agent.startswith("node:"):
            runs.setdefault(e.agent, set()).add(e.data["subagent"])
    assert {kind: len(ids) for kind, ids in runs.items()} == {
        "node:fiction:planner": 1, "node:fiction:architect_short": 1, "node:fiction:writer": 1}
    second = fake.requests_for("writer")[1].body["messages"]
    users = [m["content"] for m in second if m["role"] == "user"]
    assert users[0] == "Write chapter 1." and users[-1] == "Write chapter 2."
    assert any("chapters/0001.md" in json.dumps(m) for m in second if m["role"] == "assistant")
    assert sum(1 for m in second if m["role"] == "system") == 1


def test_a_damaged_fact_file_stops_the_workflow_naming_it_and_the_same_task_goes_on_once_it_is_fixed(
        fake, agent_daemon, project: Path) -> None:
    facts = workflow_dir(project, "fiction")
    (facts / "foundation").mkdir(parents=True)
    progress = facts / "progress.toml"
    good = 'phase = "writing"\nflow = "writing"\ncompleted = [1]\n'
    progress.write_text(good)
    (facts / "planning.toml").write_text('tier = "short"\n')
    for name in ("premise.md", "characters.md", "world.md"):
        (facts / "foundation" / name).write_text("x\n")
    (facts / "foundation" / "outline.md").write_text("1. One\n")
    (facts / "complete.md").write_text("done\n")
    damaged = good[:20] + "\x00\x00garbage[[" + good[20:]
    progress.write_text(damaged)

    result = agent_daemon.cli("workflow", "run", "fiction", "--project", str(project), timeout=60)
    assert result.returncode != 0
    assert f"{progress} is not valid TOML" in result.stdout + result.stderr
    assert progress.read_text() == damaged  # never "repaired" by the reader
    status = json.loads(agent_daemon.cli("workflow", "status", "--json").stdout)
    assert "not valid TOML" in status[0]["decision"]["error"]
    task = status[0]["task"]

    progress.write_text(good)
    again = agent_daemon.cli("workflow", "run", "fiction", "--project", str(project), timeout=60)
    assert again.returncode == 0, again.stderr
    assert "The fiction workflow is complete" in again.stdout
    status = json.loads(agent_daemon.cli("workflow", "status", "--json").stdout)
    assert [s["task"] for s in status] == [task]  # the same task: its role nodes are still its sub-agents

    async def turns() -> list[int]:
        async with agent_daemon.client() as c:
            page = await c.request(Replay(id=0, task=task), ReplayReply)
            return [Event.from_published(task, i).data["turn"] for i in page.events
                    if Event.from_published(task, i).type == EventType.TURN_FINISHED]

    assert arun(turns(), 30) == [1, 2]
    assert fake.requests == []  # nothing needed a model: the facts said the book was complete


def test_a_workflow_is_a_task_cancel_stops_its_step_and_continue_goes_on_from_its_facts(
        fake, agent_daemon, project: Path) -> None:
    _writing(project, chapters=2)
    fake.script("writer", ROLE.format("writer"), [
        Step(text="Chapter one begins", failure=Failure.stall(after_chunks=1)),  # in flight at the cancel
        _node("Wrote chapter 1.", ("chapters/0001.md", "# Chapter 1\n")),
        _node("Wrote chapter 2.", ("chapters/0002.md", "# Chapter 2\n"))])
    fake.script("architect_short", ROLE.format("short-form architect"), [
        _node("Complete.", (f"{FACTS}/complete.md", "The end.\n"))])
    task = _start(agent_daemon, project)
    fake.wait_for_requests(1, timeout=60, identity="writer")
    assert agent_daemon.cli("cancel", task).returncode == 0
    fake.wait_for_disconnect(timeout=30)  # the node's model call was hung up on with the task

    assert _turn_finished(agent_daemon, task, 1)["status"] == RunStatus.CANCELLED
    assert agent_daemon.cli("continue", task).returncode == 0
    ended = _turn_finished(agent_daemon, task, 2)
    assert ended["status"] == RunStatus.DONE and "complete" in ended["output"]
    assert (project / "chapters/0002.md").exists() and not (project / "chapters/0003.md").exists()
    fake.assert_no_problems()


def _gated_book(fake) -> threading.Event:
    """Script a two-chapter book whose first writer step stays in flight until the returned gate is set."""
    gate = threading.Event()
    fake.script("writer", ROLE.format("writer"), [
        replace(_node("Wrote chapter 1.", ("chapters/0001.md", "# Chapter 1\n")), gate=gate),
        _node("Wrote chapter 2.", ("chapters/0002.md", "# Chapter 2\n"))])
    fake.script("architect_short", ROLE.format("short-form architect"), [
        _node("Complete.", (f"{FACTS}/complete.md", "The end.\n"))])
    return gate


def _decisions(events: list[Event]) -> list[tuple[int, str, str]]:
    return [(e.data["step"], e.data["agent"] or f'{e.data["situation"]} → {e.data["action"]}', e.data["reason"])
            for e in events if e.type == EventType.WORKFLOW_DECISION]


def test_a_paused_workflow_ends_its_step_in_flight_holds_at_its_next_decision_and_goes_on_when_continued(
        fake, agent_daemon, project: Path) -> None:
    _writing(project, chapters=2)
    gate = _gated_book(fake)
    task = _start(agent_daemon, project)
    try:
        fake.wait_for_requests(1, timeout=60, identity="writer")  # decision 1 made, its writer step in flight
        paused = agent_daemon.cli("pause", task)
        assert paused.returncode == 0 and "paused" in paused.stdout, (paused.stdout, paused.stderr)
        assert _status(agent_daemon)["state"] == TaskState.PAUSED
        assert f"fiction · task {task} · paused ·" in agent_daemon.cli("workflow", "status").stdout
    finally:
        gate.set()
    # The step in flight is not lost: the writer ends it, the engine commits its chapter — and then holds, its
    # next decision not made while the task is paused.
    progress = workflow_dir(project, "fiction") / "progress.toml"
    wait_until(lambda: "completed = [1]" in progress.read_text(), 60, "chapter 1 committed by the paused engine")
    held = _status(agent_daemon)
    assert held["state"] == TaskState.PAUSED and held["decision"]["step"] == 1, held
    assert len(fake.requests_for("writer")) == 1

    resumed = agent_daemon.cli("continue", task)
    assert resumed.returncode == 0, resumed.stderr
    ended = _turn_finished(agent_daemon, task, 1)  # the same turn goes on: a paused task continues in place
    assert ended["status"] == RunStatus.DONE and "complete" in ended["output"], ended
    events = _events(agent_daemon, task)
    assert _decisions(events) == [  # each decision made once, in order: none lost to the pause, none repeated
        (1, "writer", "chapter 1 is next"), (2, "writer", "chapter 2 is next"),
        (3, "architect_short", "all 2 outlined chapters are written"),
        (4, "complete → finish", "no deterministic next step: complete")]
    types = [(e.type, e.agent, e.data.get("step")) for e in events]
    chapter_1 = next(i for i, e in enumerate(events)
                     if e.type == EventType.RUN_FINISHED and e.agent == "node:fiction:writer")
    assert events[chapter_1].data["status"] == RunStatus.DONE  # the pause let the step in flight end
    assert (types.index((EventType.WORKFLOW_DECISION, WORKFLOW_AGENT, 1))
            < types.index((EventType.TASK_PAUSED, "", None)) < chapter_1
            < types.index((EventType.TASK_RESUMED, "", None))
            < types.index((EventType.WORKFLOW_DECISION, WORKFLOW_AGENT, 2))), types
    assert [e.data["turn"] for e in events if e.type == EventType.TURN_STARTED] == [1]
    writer = fake.requests_for("writer")  # the writer's step in flight at the pause was not asked for again
    assert [[m["content"] for m in r.body["messages"] if m["role"] == "user"][-1] for r in writer] == [
        "Write chapter 1.", "Write chapter 2."]
    assert (project / "chapters/0002.md").exists() and not (project / "chapters/0003.md").exists()
    fake.assert_no_problems()


def test_a_client_attached_to_a_running_workflow_sees_each_decision_live_with_its_reason(
        fake, agent_daemon, project: Path) -> None:
    _writing(project, chapters=2)
    gate = _gated_book(fake)
    task = _start(agent_daemon, project)

    def decided(c: TuiController) -> list[str]:
        return [e.text for e in c.view.entries if e.kind == "notice" and e.text.startswith("◆ fiction")]

    async def go() -> tuple[list[str], list[str]]:
        # What `yagent attach TASK` runs: the full-screen client's controller on the task.
        attached = TuiController(DaemonBackend(agent_daemon.runtime, timeout=5.0),
                                 TuiOptions(project=project, agent=WORKFLOW_AGENT), liveness_interval=0.1)
        try:
            await fake.wait_for_requests_async(1, timeout=60, identity="writer")  # decision 1 made, its step held
            await attached.start(task, latest=False)
            await until(lambda: decided(attached), "the decision made before the attach", timeout=30)
            before = decided(attached)
            assert attached.view.display_state == TaskState.RUNNING
            gate.set()  # every later decision can only be made now, so the client hears it live
            await until(lambda: attached.view.display_state == TaskState.DONE, "the workflow's end", timeout=60)
            return before, decided(attached)
        finally:
            gate.set()
            await attached.aclose()

    before, after = arun(go(), 120)
    assert before == ["◆ fiction 1: writer — Write chapter 1. (chapter 1 is next)"]
    # Each decision once, in order, a step with the router's reason; "no step" names its situation, which is
    # what its reason says ("no deterministic next step: complete").
    assert after == [*before, "◆ fiction 2: writer — Write chapter 2. (chapter 2 is next)",
                     "◆ fiction 3: architect_short — The outline is used up: extend it, or complete the book. "
                     "(all 2 outlined chapters are written)",
                     "◆ fiction 4: no step — complete → finish"]
    fake.assert_no_problems()
