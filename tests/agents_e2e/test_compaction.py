"""Context compression through a real daemon: a scripted long Director session compacts (tier 1, then tier 2 with
the summary scripted as the Director's own request) and still knows its goal, its active plan item, the user's
latest request, the project instructions (from the repository root above the project, read under the sandbox)
and the board's index; its memory and rollout hold the compacted history; `/compact` is delivered to the
running turn, and a turn resumed after a compaction goes on from the compacted history."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.agent_harness import MARKERS, llm_config, run_turn
from tests.daemon_harness import arun, collect_turn, of_type, submit
from tests.fake_provider import Step, ToolCallSpec, UsageSpec
from yagent.ipc.errors import RemoteError
from yagent.ipc.messages import Ack, Answer, CompactContext, TaskControl
from yagent.ipc.state_layout import MEMORY_FILE, rollout_dir, task_dir, thinklink_dir
from yagent.ipc.vocabulary import ControlAction, ErrorCode, EventType, RunStatus
from yagent.workers.board import INDEX_HEADER
from yagent.workers.context.emergency import COMPACTED_HEADING, SUMMARY_REQUEST
from yagent.workers.context.rule_truncation import CUT_MARK
from yagent.workers.context.thinklink import read_thinklink
from yagent.workers.memory.replay import load_for_replay

pytestmark = pytest.mark.e2e

REQUEST = "Tally the modules of this app and tell me how many there are."
GOAL = "Tally the modules"


def _thought(doing: str, done: list[str]) -> str:
    plan = "".join(f"- [x] {d}\n" for d in done) + f"- [>] {doing}\n- [ ] report the tally\n"
    return f"<thought>\ngoal: {GOAL}\nstep: went on\nreason: it is the next item\nplan:\n{plan}</thought>"


def _repository(tmp_path: Path) -> Path:
    """A git repository whose instructions sit at its root, above the project directory the turn runs in."""
    repo = tmp_path / "repo"
    work = repo / "app"
    work.mkdir(parents=True)
    (repo / ".git").mkdir()
    (repo / "AGENTS.md").write_text("ROOT-RULE-7: modules are counted by file, never by class.\n")
    (work / "CLAUDE.md").write_text("APP-RULE-3: report numbers as digits.\n")
    for name in ("mod_a", "mod_b", "mod_c"):
        (work / f"{name}.py").write_text("".join(f"# {name} line {i}: {'x' * 70}\n" for i in range(130)))
    return work


def _read(name: str, call: str, doing: str, done: list[str], usage: int) -> Step:
    return Step(text=_thought(doing, done), usage=UsageSpec(usage, 30),
                tool_calls=[ToolCallSpec("read_file", {"path": f"{name}.py"}, id=call)])


def test_a_long_session_compacts_and_still_knows_its_goal_plan_item_request_instructions_and_board(
        fake, make_daemon, tmp_path: Path) -> None:
    work = _repository(tmp_path)
    # No writable roots: the worker reads only its project's tree, and the repository root's AGENTS.md only
    # because the daemon grants that one file.
    daemon = make_daemon(llm_config(fake, extra="[enhanced_commander]\ncontext_compression_threshold = 12000\n"
                                                "[sandbox]\nwritable_roots = []\n"))
    fake.script("director", MARKERS["director"], [
        Step(text=_thought("ask Repo where the modules are", []), usage=UsageSpec(3_000, 30),
             tool_calls=[ToolCallSpec("delegate_repo", {"task": "Where are the modules?"}, id="c_repo")]),
        _read("mod_a", "c_a", "read mod_a.py", ["ask Repo where the modules are"], 5_000),
        _read("mod_b", "c_b", "read mod_b.py", ["read mod_a.py"], 9_500),
        # The next request measures 9 500 + mod_b's result: over 12 000, so tier 1 cuts mod_a's result.
        _read("mod_c", "c_c", "read mod_c.py", ["read mod_b.py"], 12_500),
        # 12 500 + mod_c's result: cutting mod_b is not enough, so tier 2 asks for a summary first.
        Step(text="SUMMARY-77: Repo said the modules are the mod_*.py files; mod_a and mod_b were read."),
        Step(text="There are 3 modules."),
        Step(text="The tests are not counted."),  # the second turn (its reminder is answered with the same text)
        Step(text="The tests are not counted."),
    ])
    fake.script("repo", MARKERS["repo"], [Step(text="The modules are mod_a.py, mod_b.py and mod_c.py.", tool_calls=[
        ToolCallSpec("agent_exit", {"summary": "three files", "handoff": {
            "conclusion": "three module files", "status": "ok",
            "facts": [{"claim": "mod_*.py", "where": "app/"}]}})])])

    task, events = run_turn(daemon, work, REQUEST)
    assert of_type(events, EventType.TURN_FINISHED)[0].data["output"] == "There are 3 modules."
    assert [e.data["tier"] for e in of_type(events, EventType.CONTEXT_COMPRESSED)] == ["rule", "rule"]
    (emergency,) = of_type(events, EventType.CONTEXT_EMERGENCY_COMPRESSED)
    assert emergency.data["saved_tokens"] > 0 and not of_type(events, EventType.CONTEXT_ULTIMATE_COMPRESSED)

    requests = fake.requests_for("director")
    first_call_user = requests[0].body["messages"][1]["content"]
    assert "ROOT-RULE-7" in first_call_user and "APP-RULE-3" in first_call_user  # root first, read under Landlock
    assert first_call_user.index("ROOT-RULE-7") < first_call_user.index("APP-RULE-3")
    tier_one = {m["tool_call_id"]: m["content"] for m in requests[3].body["messages"] if m["role"] == "tool"}
    assert CUT_MARK in tier_one["c_a"] and CUT_MARK not in tier_one["c_b"]
    assert requests[4].body["messages"][-1]["content"] == SUMMARY_REQUEST

    after = requests[5].body["messages"]
    compacted = after[1]["content"]
    assert after[0]["role"] == "system" and after[1]["role"] == "user" and compacted.startswith(COMPACTED_HEADING)
    assert f"goal: {GOAL}" in compacted and "current item: [>] read mod_c.py" in compacted
    assert f"(word for word)\n\n{REQUEST}" in compacted and "SUMMARY-77" in compacted
    assert "ROOT-RULE-7" in compacted and "APP-RULE-3" in compacted  # put back, never summarised away
    index = [m["content"] for m in after[2:] if INDEX_HEADER in (m.get("content") or "")]
    assert len(index) == 1 and "three module files" in index[0]  # the board's index still comes with the call
    assert "mod_a line 129" not in json.dumps(after)

    memory = [json.loads(line) for line in (task_dir(daemon.home, task) / MEMORY_FILE).read_text().splitlines()]
    assert [m["role"] for m in memory] == ["user", "assistant"] and memory[0]["content"] == compacted
    director_run = of_type(events, EventType.TURN_STARTED)[0].run
    (rollout,) = sorted(rollout_dir(daemon.home, task).glob(f"*_{director_run}.jsonl"))
    records = [json.loads(line) for line in rollout.read_text().splitlines()]
    assert [r["payload"]["step"] for r in records if r["type"] == "compacted"] == [4, 5, 5]
    assert [m.role for m in load_for_replay(rollout).messages] == ["system", "user", "assistant"]
    entries, problems = read_thinklink(thinklink_dir(daemon.home, task) / f"{director_run}.jsonl")
    assert problems == [] and [e.plan.goal for e in entries if e.plan is not None] == [GOAL] * 4

    run_turn(daemon, work, "And the tests?", task=task, turn=2)
    second = fake.requests_for("director")[6].body["messages"]
    assert [m["role"] for m in second[:4]] == ["system", "user", "assistant", "user"]
    assert second[1]["content"] == compacted and second[3]["content"] == "And the tests?"
    assert sum("ROOT-RULE-7" in (m.get("content") or "") for m in second) == 1  # not injected twice
    fake.assert_no_problems()


def test_compact_reaches_the_running_turn_and_a_turn_resumed_after_it_goes_on_from_the_compacted_history(
        fake, agent_daemon, project: Path) -> None:
    for name in ("mod_a", "mod_b"):
        (project / f"{name}.py").write_text("".join(f"# {name} line {i}\n" for i in range(200)))
    ask = "ask_user_for_help"
    fake.script("director", MARKERS["director"], [
        _read("mod_a", "c_a", "read mod_a.py", [], 1_000),
        _read("mod_b", "c_b", "read mod_b.py", ["read mod_a.py"], 2_000),
        Step(text=_thought("ask which module matters", ["read mod_b.py"]),
             tool_calls=[ToolCallSpec(ask, {"kind": "input", "question": "Which module matters?"}, id="c_q1")]),
        Step(text="SUMMARY-12: both modules were read; the user was asked which one matters."),
        Step(text=_thought("confirm with the user", ["ask which module matters"]),
             tool_calls=[ToolCallSpec(ask, {"kind": "input", "question": "Shall I go on?"}, id="c_q2")]),
        Step(text="Going on from the compacted history."),  # the resumed turn; its reminder gets the same answer
        Step(text="Going on from the compacted history."),
    ])
    state: dict[str, Any] = {}

    async def go() -> tuple[str, list]:
        async with agent_daemon.client() as c:
            sub = await submit(c, project, "Which module matters most?", agent="director")

            async def on_event(ev) -> None:
                if ev.type != EventType.USER_HELP_NEEDED:
                    return
                if "Which module" in ev.data["prompt"]:
                    # Asked many times over, it is still one compaction.
                    acks = [await c.request(CompactContext(id=0, task=sub.task), Ack) for _ in range(20)]
                    state["ack"] = acks[-1]
                    with pytest.raises(RemoteError) as unknown:
                        await c.request(CompactContext(id=0, task="t-no-such-task"), Ack)
                    state["unknown"] = unknown.value
                    await c.request(Answer(id=0, task=sub.task, request_id=ev.data["request_id"],
                                           answer={"value": "mod_b"}), Ack)
                else:  # stopped while the second question waits: the turn is resumable
                    await c.request(TaskControl(id=0, task=sub.task, action=ControlAction.CANCEL), Ack)

            events = await collect_turn(c, sub.task, on_event=on_event)
            with pytest.raises(RemoteError) as idle:
                await c.request(CompactContext(id=0, task=sub.task), Ack)
            state["idle"] = idle.value
            ack = await c.request(TaskControl(id=0, task=sub.task, action=ControlAction.CONTINUE), Ack)
            assert ack.detail == "resumed turn 1 as turn 2"
            return sub.task, events + await collect_turn(c, sub.task, turn=2, after_seq=events[-1].seq)

    _task, events = arun(go(), 120)
    assert state["ack"].detail == "director compacts its context before its next model call"
    assert state["idle"].code == ErrorCode.NOT_RUNNING and "nothing to compact" in str(state["idle"])
    assert state["unknown"].code == ErrorCode.UNKNOWN_TASK
    (compaction,) = of_type(events, EventType.CONTEXT_EMERGENCY_COMPRESSED)
    assert compaction.data["requested"] is True
    stopped, resumed = (e.data for e in of_type(events, EventType.TURN_FINISHED))
    assert stopped["status"] == RunStatus.CANCELLED and resumed["status"] == RunStatus.DONE, resumed
    requests = fake.requests_for("director")
    assert requests[3].body["messages"][-1]["content"] == SUMMARY_REQUEST
    resumed_call = requests[5].body["messages"]
    assert resumed_call[1]["role"] == "user" and resumed_call[1]["content"].startswith(COMPACTED_HEADING)
    assert "SUMMARY-12" in resumed_call[1]["content"] and "mod_a line 199" not in json.dumps(resumed_call)
    assert [m["tool_call_id"] for m in resumed_call if m["role"] == "tool"] == ["c_q2"]
    fake.assert_no_problems()
