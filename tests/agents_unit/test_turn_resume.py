"""Picking up a stopped turn: which calls were cut short, replaying delegations, the degraded report."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.memory.rollout_fixtures import write_rollout
from tests.tools.doubles import ScriptedDelegator, make_ctx
from yagent.ipc.messages import RunOutcome
from yagent.ipc.vocabulary import HandoffStatus, RunStatus, StopReason
from yagent.workers.agents.delegation_replay import StoppedRecord, degraded_report
from yagent.workers.agents.turn_resume import interrupted_calls, replay_interrupted_delegations, stopped_turn
from yagent.workers.llm import Message, ToolCall, repair_tool_pairing
from yagent.workers.memory.resume_repair import repair_for_resume
from yagent.workers.tools import build_surface
from yagent.workers.tools.handoff import delegation_status, format_for_parent
from yagent.workers.tools.result import INTERRUPTED_RESULT


def _step(*calls: tuple[str, str, dict]) -> Message:
    return Message.assistant("", tool_calls=[ToolCall(id=i, name=n, arguments=json.dumps(a)) for i, n, a in calls])


def _history() -> list[Message]:
    return [
        Message.user("find the greeting, then fix it"),
        _step(("c0", "delegate_chat", {"task": "a farewell word?"})),
        Message.tool("c0", "goodbye", name="delegate_chat"),  # an earlier step: finished, never replayed
        _step(("c1", "delegate_repo", {"task": "where is the greeting?"}),
              ("c2", "delegate_chat", {"task": "another word?"}),
              ("c3", "read_file", {"path": "app.py"}),
              ("c4", "delegate_chat", {"task": "answered in time"})),
        Message.tool("c1", f"{INTERRUPTED_RESULT} yagentd stopped while delegate_repo was running.",
                     name="delegate_repo"),
        # c2 and c3 have no result at all: the worker was killed before it wrote them
        Message.tool("c4", "a finished answer", name="delegate_chat"),
    ]


def test_only_the_last_steps_calls_without_a_result_of_their_own_are_picked_up() -> None:
    stopped = interrupted_calls(_history())
    assert [(s.call.id, s.answered) for s in stopped] == [("c1", True), ("c2", False), ("c3", False)]
    assert interrupted_calls(_history()[:3]) == []  # a finished last step: nothing to pick up
    assert interrupted_calls([]) == []


def test_delegations_are_replayed_for_the_same_call_ids_and_other_calls_get_an_interrupted_result(
        tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    child = RunOutcome(status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT, agent="repo", output="line 1")
    delegator = ScriptedDelegator(child)
    ctx = make_ctx(project, tmp_path, delegator=delegator)
    messages = repair_for_resume(_history())  # as the Director does before it replays
    replayed = asyncio.run(replay_interrupted_delegations(messages, build_surface("director"), ctx, max_parallel=4))
    assert replayed == 2
    assert [(c["call_id"], c["agent"], c["replay"]) for c in delegator.calls] == [("c1", "repo", True),
                                                                                   ("c2", "chat", True)]
    assert ctx.delegator is delegator  # the run's own delegator is back for the rest of the run
    # What a provider is sent: every call of the step paired with exactly one result, the replay's winning.
    sent = repair_tool_pairing(messages)
    results = {m.tool_call_id: m.content for m in sent if m.role == "tool"}
    assert sum(1 for m in sent if m.role == "tool" and m.tool_call_id == "c1") == 1
    assert "line 1" in results["c1"] and "line 1" in results["c2"]
    assert results["c3"].startswith(INTERRUPTED_RESULT) and results["c4"] == "a finished answer"
    assert results["c0"] == "goodbye"


def test_a_child_cut_short_by_the_daemon_reads_as_an_interruption_never_a_failure() -> None:
    cut = RunOutcome(status=RunStatus.INTERRUPTED, stop_reason=StopReason.INTERRUPTED, agent="repo",
                     error="yagentd exited")
    assert delegation_status(cut) == HandoffStatus.INTERRUPTED
    text = format_for_parent(cut)
    assert text.startswith(INTERRUPTED_RESULT) and "not a failure" in text and "yagent continue" in text


def test_the_degraded_report_says_what_was_done_what_was_not_and_what_next() -> None:
    record = StoppedRecord(finished_calls=["read_file: app.py"], open_plan=["fix the greeting"],
                           last_words="app.py prints hello")
    outcome = degraded_report("repo", "Where is the greeting?\nmore", "the workspace moved since", record)
    assert outcome.status == RunStatus.DONE  # a result the parent builds on, not an error
    assert outcome.handoff["status"] == HandoffStatus.DEGRADED and outcome.handoff["degraded"]
    assert delegation_status(outcome) == HandoffStatus.DEGRADED
    body = outcome.output
    assert body.index("Done:") < body.index("- read_file: app.py") < body.index("Not done:")
    assert body.index("- fix the greeting") < body.index("Next steps:") and "the workspace moved since" in body
    assert "app.py prints hello" in body
    empty = degraded_report("repo", "Where is the greeting?", "no rollout")
    assert "nothing was recorded as finished" in empty.output and "Where is the greeting?" in empty.output
    assert f"status {HandoffStatus.DEGRADED}" in format_for_parent(empty)


def _rollout(task_dir: Path, run: str, messages: list[Message]) -> Path:
    (task_dir / "rollout").mkdir(parents=True, exist_ok=True)
    return write_rollout(task_dir / "rollout" / f"20261203-120000_{run}.jsonl", messages, delegation_id="",
                         parent_run="")


def test_a_resume_takes_the_rollouts_history_only_when_the_memory_is_a_prefix_of_it(tmp_path: Path) -> None:
    turn = [Message.user("go"), _step(("c1", "delegate_repo", {"task": "look"}))]
    recorded = [Message.system("director prompt"), *turn,
                Message.tool("c1", f"{INTERRUPTED_RESULT} stopped", name="delegate_repo")]
    _rollout(tmp_path, "rabc123", recorded)
    ahead = stopped_turn(tmp_path, "rabc123", turn[:1])  # the memory was saved before the call was made
    assert ahead.history == recorded[1:] and not ahead.problem
    assert stopped_turn(tmp_path, "rabc123", recorded[1:]).history == recorded[1:]  # equal: nothing to add
    other = [Message.user("something else")]
    assert stopped_turn(tmp_path, "rabc123", other).history is other  # disagrees with the memory: memory stands
    # An id that is not one names no file, however it is spelt.
    for forged in ("", "../rabc123", "*", "rabc123/../x"):
        assert stopped_turn(tmp_path, forged, other).history is other
    # A rollout damaged in the middle: the memory is used, and the run says why.
    path = tmp_path / "rollout" / "20261203-120000_rabc123.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([lines[0], b"{not json\n", *lines[1:]]))
    damaged = stopped_turn(tmp_path, "rabc123", turn[:1])
    assert damaged.history == turn[:1] and "cannot be read" in damaged.problem


def test_a_resume_learns_which_mcp_servers_the_stopped_turn_held_and_what_it_had_loaded(tmp_path: Path) -> None:
    from yagent.workers.memory import rollout_records as records

    turn = [Message.user("go")]
    later = records.turn_context(model="m", tier="fast", cwd="/p", yolo="none", loaded_tools=["mcp__docs__search"],
                                 mcp_servers=["docs"])
    (tmp_path / "rollout").mkdir()
    write_rollout(tmp_path / "rollout" / "20261203-120000_rmcp1.jsonl", [Message.system("p"), *turn],
                  delegation_id="", parent_run="", extra=[later])
    found = stopped_turn(tmp_path, "rmcp1", turn)
    assert found.mcp_servers == ["docs"] and found.loaded_tools == ["mcp__docs__search"]
    # A rollout from before MCP servers were recorded (or a damaged field) names none.
    old = records.turn_context(model="m", tier="fast", cwd="/p", yolo="none")
    old["payload"].pop("mcp_servers")
    old["payload"]["loaded_tools"] = "not a list"
    write_rollout(tmp_path / "rollout" / "20261203-120001_rmcp2.jsonl", [Message.system("p"), *turn],
                  delegation_id="", parent_run="", extra=[old])
    found = stopped_turn(tmp_path, "rmcp2", turn)
    assert found.mcp_servers == [] and found.loaded_tools == []
