"""Continuable sub-agents end to end: a real daemon, real workers, the fake provider.

Follow-ups continue a sub-agent's conversation in a new worker, a changed configuration is never continued,
background sub-agents run while the Director goes on and the end of the turn waits for, keeps or cancels them,
the daemon's limits hold under background starts, and a kept one survives `kill -9` of the daemon.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.agent_harness import MARKERS, llm_config, run_turn, tool_messages
from tests.daemon_harness import arun, collect_turn, of_type, submit
from tests.fake_provider import Failure, Step, ToolCallSpec
from yagent.ipc import EventStream
from yagent.ipc.messages import Ack, Answer, TaskControl
from yagent.ipc.vocabulary import ControlAction, EventType, RunStatus, StopReason, TaskState

pytestmark = pytest.mark.e2e

EXIT = {"summary": "done", "handoff": {"conclusion": "found", "status": "ok"}}
_ID = re.compile(r"\b(a[0-9a-f]{9})\b")


def _exit(text: str, conclusion: str = "found") -> Step:
    return Step(text=text, tool_calls=[ToolCallSpec("agent_exit", {
        "summary": text[:40], "handoff": {"conclusion": conclusion, "status": "ok"}})])


def _last_subagent(body: dict[str, Any]) -> str:
    """The sub-agent id the newest tool result of a request names (the daemon makes ids up)."""
    for message in reversed(body["messages"]):
        if message.get("role") == "tool":
            found = _ID.search(str(message.get("content")))
            if found:
                return found.group(1)
    raise AssertionError("no sub-agent id in the request's tool results")


def _then(make: Any) -> Step:
    return Step(respond=lambda body: make(_last_subagent(body)))


def _texts(request: Any, role: str) -> list[str]:
    return [str(m.get("content")) for m in request.body["messages"] if m.get("role") == role]


def test_a_follow_up_continues_the_sub_agents_conversation_in_a_new_worker(fake, agent_daemon, project: Path) -> None:
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("delegate_repo", {"task": "Where is the cache?"}, id="c1")]),
        _then(lambda sid: Step(tool_calls=[ToolCallSpec("send_followup", {
            "agent_id": sid, "message": "And who clears it?"}, id="c2")])),
        Step(text="The cache is in cache.py and clear() clears it."),
    ])
    fake.script("repo", MARKERS["repo"], [_exit("The cache is in cache.py.", "cache.py"),
                                          _exit("clear() in cache.py clears it.", "clear()")])
    _task, events = run_turn(agent_daemon, project, "Tell me about the cache.")
    assert of_type(events, EventType.TURN_FINISHED)[0].data["status"] == RunStatus.DONE
    fake.assert_no_problems()

    first, second = fake.requests_for("repo")
    # The follow-up's worker was given the whole earlier conversation, then the follow-up: one system prompt.
    assert _texts(second, "user")[0].startswith("Where is the cache?")
    assert _texts(second, "user")[-1].endswith("And who clears it?")
    assert "The cache is in cache.py." in _texts(second, "assistant")
    assert len(_texts(second, "system")) == 1 and _texts(second, "system") == _texts(first, "system")
    started = [e for e in of_type(events, EventType.RUN_STARTED) if e.agent == "repo"]
    assert len(started) == 2 and started[0].data["pid"] != started[1].data["pid"]  # a new worker each time
    assert started[0].data["subagent"] == started[1].data["subagent"] != ""
    queued = [e.data for e in of_type(events, EventType.RUN_QUEUED)]
    assert [q["followup"] for q in queued] == [False, True]
    # The Director read both results, the second naming the same sub-agent it can follow up again.
    results = {m["tool_call_id"]: m["content"] for m in tool_messages(fake.requests_for("director")[2])}
    assert "clear() in cache.py clears it." in results["c2"] and started[0].data["subagent"] in results["c2"]


def test_a_delegated_agent_that_delegates_sees_its_sub_agent_and_follows_it_up(fake, agent_daemon,
                                                                               project: Path) -> None:
    # Not only the Director: Repo delegates to DevOps, reads its sub-agents, and continues that DevOps sub-agent.
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("delegate_repo", {"task": "How is the project built?"}, id="d1")]),
        Step(text="It is built with make; the release target signs it."),
    ])
    fake.script("repo", MARKERS["repo"], [
        Step(tool_calls=[ToolCallSpec("delegate_devops", {"task": "Which build tool does it use?"}, id="r1")]),
        Step(tool_calls=[ToolCallSpec("agent_status", {}, id="r2")]),
        _then(lambda sid: Step(tool_calls=[ToolCallSpec("send_followup", {
            "agent_id": sid, "message": "And what does its release target do?"}, id="r3")])),
        _exit("Built with make; release signs it.", "make"),
    ])
    fake.script("devops", MARKERS["devops"], [_exit("It uses make.", "make"),
                                              _exit("The release target signs the build.", "signs")])
    _task, events = run_turn(agent_daemon, project, "How is it built?")
    assert of_type(events, EventType.TURN_FINISHED)[0].data["status"] == RunStatus.DONE
    fake.assert_no_problems()

    repo_requests = fake.requests_for("repo")
    results = {m["tool_call_id"]: m["content"] for m in tool_messages(repo_requests[-1])}
    started = [e for e in of_type(events, EventType.RUN_STARTED) if e.agent == "devops"]
    assert len(started) == 2 and started[0].data["subagent"] == started[1].data["subagent"] != ""
    subagent = started[0].data["subagent"]
    assert f"{subagent} devops [idle]" in results["r2"] and "Which build tool" in results["r2"]
    assert "The release target signs the build." in results["r3"] and subagent in results["r3"]
    # The follow-up's worker went on from DevOps's own conversation.
    first, second = fake.requests_for("devops")
    assert _texts(second, "user")[0].startswith("Which build tool does it use?")
    assert _texts(second, "user")[-1].endswith("And what does its release target do?")
    assert "It uses make." in _texts(second, "assistant")
    assert _texts(second, "system") == _texts(first, "system")
    queued = [e.data for e in of_type(events, EventType.RUN_QUEUED) if e.data["agent"] == "devops"]
    assert [q["followup"] for q in queued] == [False, True]
    # The background stays the root's: the delegated Repo was never offered spawn_agent, wait_agents or cancel_agents.
    offered = {t["function"]["name"] for t in repo_requests[0].body["tools"]}
    assert {"agent_status", "send_followup"} <= offered
    assert not {"spawn_agent", "wait_agents", "cancel_agents"} & offered


def test_a_sub_agent_whose_configuration_changed_is_never_continued(fake, make_agent_daemon, project: Path) -> None:
    daemon = make_agent_daemon()
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("delegate_repo", {"task": "Where is the cache?"}, id="c1")]),
        Step(text="In cache.py."),
        _then(lambda sid: Step(tool_calls=[ToolCallSpec("send_followup", {
            "agent_id": sid, "message": "And who clears it?"}, id="c2")])),
        Step(text="It could not be continued."),
    ])
    fake.script("repo", MARKERS["repo"], [_exit("The cache is in cache.py.", "cache.py")])
    task, _ = run_turn(daemon, project, "Where is the cache?")
    # Another model for every agent: the configuration signature moves, and the next turn reads the file again.
    daemon.write_config(llm_config(fake).replace('model = "fake-model"', 'model = "another-model"'))
    _, events = run_turn(daemon, project, "Who clears it?", task=task, turn=2)
    assert of_type(events, EventType.TURN_FINISHED)[-1].data["status"] == RunStatus.DONE
    assert len(fake.requests_for("repo")) == 1  # the follow-up asked its model nothing
    result = {m["tool_call_id"]: m["content"] for m in tool_messages(fake.requests_for("director")[3])}["c2"]
    assert "was not continued: model changed" in result and "Delegate the work anew" in result
    fake.assert_no_problems()


def test_create_and_dispatch_never_waits_and_a_cancel_choice_ends_the_sub_agent_with_the_turn(
        fake, agent_daemon, project: Path) -> None:
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("spawn_agent", {"agent": "repo", "task": "Map everything.",
                                                      "at_turn_end": "cancel"}, id="s1")]),
        Step(tool_calls=[ToolCallSpec("agent_status", {}, id="st")]),
        Step(text="Started the mapping; it was not needed after all."),
    ])
    fake.script("repo", MARKERS["repo"], [Step(text="mapping", failure=Failure.stall(after_chunks=1))])
    _task, events = run_turn(agent_daemon, project, "Map the project.")
    # The Director made two more model calls while its sub-agent worked (its only step never ends).
    status = {m["tool_call_id"]: m["content"] for m in tool_messages(fake.requests_for("director")[2])}["st"]
    assert "repo [working, background: cancel]" in status
    finished = {e.agent: e.data for e in of_type(events, EventType.RUN_FINISHED)}
    assert finished["repo"]["status"] == RunStatus.CANCELLED
    assert of_type(events, EventType.TURN_FINISHED)[0].data["state"] == TaskState.DONE


def test_a_wait_sub_agent_still_working_when_the_director_answers_is_awaited_and_read_first(
        fake, agent_daemon, project: Path) -> None:
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("spawn_agent", {"agent": "repo", "task": "Find the cache."}, id="s1")]),
        Step(text="Done, I think."),
        Step(text="The cache is in cache.py (from the background search)."),
    ])
    fake.script("repo", MARKERS["repo"], [_exit("The cache is in cache.py.", "cache.py")])
    _, events = run_turn(agent_daemon, project, "Find the cache.")
    finished = of_type(events, EventType.TURN_FINISHED)[0].data
    assert finished["output"] == "The cache is in cache.py (from the background search)."
    told = [t for t in _texts(fake.requests_for("director")[2], "user") if "at_turn_end=wait have ended" in t]
    assert len(told) == 1 and "The cache is in cache.py." in told[0]
    fake.assert_no_problems()


def test_a_question_a_kept_sub_agent_asked_before_its_turn_ended_keeps_the_task_waiting(
        fake, agent_daemon, project: Path) -> None:
    import threading

    director_may_finish = threading.Event()  # the Director's last answer waits for the sub-agent's question
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("spawn_agent", {"agent": "chat", "task": "Audit the cache.",
                                                      "at_turn_end": "keep"}, id="s1")]),
        Step(text="The audit runs in the background.", gate=director_may_finish),
    ])
    fake.script("chat", MARKERS["chat"], [
        Step(tool_calls=[ToolCallSpec("ask_user_for_help", {"kind": "input", "question": "Which cache?"})]),
    ])

    async def turn() -> tuple[str, list]:
        async with agent_daemon.client() as c:
            sub = await submit(c, project, "Audit the cache in the background.", agent="director")

            def asked(ev) -> None:
                if ev.type == EventType.USER_HELP_NEEDED:
                    director_may_finish.set()

            return sub.task, await collect_turn(c, sub.task, turn=1, on_event=asked)

    try:
        task, events = arun(turn(), 90)
    finally:
        director_may_finish.set()
    assert of_type(events, EventType.TURN_FINISHED)[0].data["state"] == TaskState.BACKGROUND
    # The turn ended after the question: the task is not merely working in the background, it waits for an answer.
    ps = next(t for t in json.loads(agent_daemon.cli("ps", "--json").stdout) if t["task"] == task)
    assert ps["state"] == TaskState.WAITING and [q["prompt"] for q in ps["questions"]] == ["Which cache?"]


def test_a_kept_sub_agent_outlives_its_turn_shows_in_ps_and_its_result_goes_to_the_next_turn(
        fake, agent_daemon, project: Path) -> None:
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("spawn_agent", {"agent": "chat", "task": "Audit the cache.",
                                                      "at_turn_end": "keep"}, id="s1")]),
        Step(text="The audit runs in the background."),
        Step(text="The audit found nothing wrong."),
        Step(text="The audit found nothing wrong."),  # the same answer after the delegation reminder stands
    ])
    fake.script("chat", MARKERS["chat"], [
        Step(tool_calls=[ToolCallSpec("ask_user_for_help", {"kind": "input", "question": "Which cache?"})]),
        _exit("The audit found nothing wrong with the LRU cache.", "no problems"),
    ])

    async def first_turn() -> tuple[str, list]:
        async with agent_daemon.client() as c:
            sub = await submit(c, project, "Audit the cache in the background.", agent="director")
            return sub.task, await collect_turn(c, sub.task, turn=1)

    task, events = arun(first_turn(), 90)
    finished = of_type(events, EventType.TURN_FINISHED)[0].data
    assert finished["status"] == RunStatus.DONE and finished["state"] == TaskState.BACKGROUND

    async def answer_and_watch() -> list:
        async with agent_daemon.client() as c, EventStream(c, task) as stream:
            seen = []
            async for ev in stream.events():
                seen.append(ev)
                if ev.type == EventType.USER_HELP_NEEDED:
                    # The turn is over, the task is not idle: `yagent ps` shows its background work asking.
                    ps = next(t for t in json.loads(agent_daemon.cli("ps", "--json").stdout) if t["task"] == task)
                    assert ps["state"] == TaskState.WAITING and [q["prompt"] for q in ps["questions"]] == [
                        "Which cache?"]
                    assert [r["agent"] for r in ps["runs"] if r["status"] == RunStatus.RUNNING] == ["chat"]
                    await c.request(Answer(id=0, task=task, request_id=ev.data["request_id"],
                                           answer={"value": "the LRU one"}), Ack)
                if ev.type == EventType.BACKGROUND_WORK and not ev.data["running"]:
                    return seen
        return seen

    seen = arun(answer_and_watch(), 60)
    work = [e.data for e in of_type(seen, EventType.BACKGROUND_WORK)]
    assert work[0]["state"] == TaskState.BACKGROUND and [i["agent"] for i in work[0]["running"]] == ["chat"]
    assert work[-1]["state"] == TaskState.DONE
    ps = next(t for t in json.loads(agent_daemon.cli("ps", "--json").stdout) if t["task"] == task)
    assert ps["state"] == TaskState.DONE
    # The next turn is handed the result no turn had read.
    run_turn(agent_daemon, project, "What did the audit find?", task=task, turn=2)
    user = [t for t in _texts(fake.requests_for("director")[2], "user") if "What did the audit find?" in t]
    assert len(user) == 1 and "# Background sub-agents" in user[0] and "nothing wrong with the LRU cache" in user[0]
    fake.assert_no_problems()


def test_background_starts_queue_in_the_parents_delegation_pool_and_a_flood_is_refused(
        fake, make_agent_daemon, project: Path) -> None:
    daemon = make_agent_daemon("[agent]\nmax_parallel_delegations = 1\n")
    spawns = [ToolCallSpec("spawn_agent", {"agent": "repo", "task": f"Part {i}.", "at_turn_end": "wait"},
                           id=f"s{i}") for i in range(3)]
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=spawns),
        Step(tool_calls=[ToolCallSpec("wait_agents", {"timeout_seconds": 120}, id="w")]),
        Step(tool_calls=[ToolCallSpec("spawn_agent", {"agent": "chat", "task": f"Idle {i}.",
                                                      "at_turn_end": "cancel"}, id=f"f{i}") for i in range(9)]),
        Step(text="All three parts are done."),
    ])
    for i in range(3):
        fake.script("repo", MARKERS["repo"], [_exit(f"Part {i} is fine.")], user_contains=f"Part {i}.")
    fake.script("chat", MARKERS["chat"], [Step(text="idle", failure=Failure.stall(after_chunks=1))])
    _, events = run_turn(daemon, project, "Check the three parts.")
    spans = {}
    for e in events:
        if e.agent == "repo" and e.type in (EventType.RUN_STARTED, EventType.RUN_FINISHED):
            spans.setdefault(e.run, []).append(e.seq)
    assert len(spans) == 3
    ordered = sorted(spans.values())
    assert all(a[1] < b[0] for a, b in itertools.pairwise(ordered))  # never two at once
    waited = {m["tool_call_id"]: m["content"] for m in tool_messages(fake.requests_for("director")[2])}["w"]
    assert all(f"Part {i} is fine." in waited for i in range(3))
    flood = {m["tool_call_id"]: m["content"] for m in tool_messages(fake.requests_for("director")[3])}
    refused = [cid for cid, text in flood.items() if "at most 8" in text]
    assert refused == ["f8"], flood  # eight wait in the pool (one starts), the ninth is refused
    assert len([e for e in of_type(events, EventType.RUN_STARTED) if e.agent == "chat"]) == 1
    assert of_type(events, EventType.TURN_FINISHED)[0].data["status"] == RunStatus.DONE


def test_a_kept_sub_agent_interrupted_by_kill_9_of_the_daemon_goes_on_from_its_conversation_after_continue(
        fake, agent_daemon, project: Path) -> None:
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("spawn_agent", {"agent": "chat", "task": "Audit the cache.",
                                                      "at_turn_end": "keep"}, id="s1")]),
        Step(text="The audit runs in the background."),
    ])
    fake.script("chat", MARKERS["chat"], [
        Step(tool_calls=[ToolCallSpec("ask_user_for_help", {"kind": "input", "question": "Which cache?"})]),
        _exit("Audited after the restart: all fine.", "all fine"),
    ])

    async def first_turn() -> str:
        async with agent_daemon.client() as c:
            sub = await submit(c, project, "Audit the cache in the background.", agent="director")
            seen: set[str] = set()
            async with EventStream(c, sub.task) as stream:
                async for ev in stream.events():  # the turn over, the kept sub-agent waiting for an answer
                    seen.add(ev.type)
                    if {EventType.USER_HELP_NEEDED, EventType.TURN_FINISHED} <= seen:
                        return sub.task
        raise AssertionError("no question")

    task = arun(first_turn(), 60)
    workers = psutil.Process(agent_daemon.proc.pid).children(recursive=True)
    agent_daemon.proc.kill()
    agent_daemon.proc.wait(10)
    _, survivors = psutil.wait_procs(workers, timeout=30)  # the sub-agent's worker sees the daemon go, writes what
    # it holds and exits
    agent_daemon.start()
    ps = next(t for t in json.loads(agent_daemon.cli("ps", "--json").stdout) if t["task"] == task)
    assert ps["state"] == TaskState.INTERRUPTED

    async def resume() -> list:
        async with agent_daemon.client() as c:
            ack = await c.request(TaskControl(id=0, task=task, action=ControlAction.CONTINUE), Ack)
            assert ack.detail == "resumed turn 1 as turn 2"
            async with EventStream(c, task) as stream:
                seen = []
                async for ev in stream.events():
                    seen.append(ev)
                    if ev.type == EventType.BACKGROUND_WORK and not ev.data["running"]:
                        return seen
        return []

    try:
        seen = arun(resume(), 90)
    except TimeoutError as exc:  # seen once beside two CPU burners, not since: what to look at next time
        raise AssertionError(f"the resumed turn's background work did not end within 90 s (workers of the killed "
                             f"daemon still alive after 30 s: {[p.pid for p in survivors if p.is_running()]}); "
                             f"yagentd's log:\n{agent_daemon.log_tail(150)}") from exc
    turn2 = [e.data for e in of_type(seen, EventType.TURN_FINISHED) if e.data["turn"] == 2]
    assert turn2 and turn2[0]["output"] == "The audit runs in the background." and turn2[0]["status"] == RunStatus.DONE
    assert len(fake.requests_for("director")) == 2  # the answer stood: the Director was not asked again
    restarted = fake.requests_for("chat")[1]
    users = _texts(restarted, "user")
    assert users[0].startswith("Audit the cache.") and "started you again" in users[-1]
    assert any("ask_user_for_help" in json.dumps(m) for m in restarted.body["messages"])  # its earlier step
    repo_runs = [e for e in of_type(seen, EventType.RUN_FINISHED) if e.agent == "chat"]
    assert repo_runs[-1].data["status"] == RunStatus.DONE and repo_runs[-1].data["stop_reason"] == StopReason.AGENT_EXIT
    assert of_type(seen, EventType.BACKGROUND_WORK)[-1].data["state"] == TaskState.DONE


def test_a_follow_up_to_another_tasks_sub_agent_or_a_forged_id_is_refused_and_runs_nothing(
        fake, agent_daemon, project: Path) -> None:
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("delegate_repo", {"task": "Where is the cache?"}, id="c1")]),
        Step(text="In cache.py."),
    ])
    fake.script("repo", MARKERS["repo"], [_exit("The cache is in cache.py.", "cache.py")])
    _, events = run_turn(agent_daemon, project, "Where is the cache?")
    theirs = next(e.data["subagent"] for e in of_type(events, EventType.RUN_STARTED) if e.agent == "repo")
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("send_followup", {"agent_id": theirs, "message": "Clear it."}, id="f1"),
                         ToolCallSpec("send_followup", {"agent_id": "a" + "0" * 9, "message": "Clear it."}, id="f2"),
                         ToolCallSpec("wait_agents", {"agent_ids": [theirs], "timeout_seconds": 5}, id="w")]),
        Step(text="Those are not mine."),
    ])
    _, other = run_turn(agent_daemon, project, "Clear the cache.")  # a new task of the same project
    assert of_type(other, EventType.TURN_FINISHED)[0].data["status"] == RunStatus.DONE
    results = {m["tool_call_id"]: m["content"] for m in tool_messages(fake.requests_for("director")[3])}
    for call in ("f1", "f2", "w"):
        assert "belongs to you in this task" in results[call], results[call]
    assert len(fake.requests_for("repo")) == 1 and not of_type(other, EventType.RUN_STARTED)[1:]
    fake.assert_no_problems()
