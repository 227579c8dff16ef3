"""Through a real daemon: a Director turn with a delegation leaves a Director rollout and a child rollout that
names its parent run and the delegation id."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent_harness import MARKERS, run_turn
from tests.daemon_harness import of_type
from tests.fake_provider import Step, ToolCallSpec
from yagent.ipc.state_layout import rollout_dir
from yagent.ipc.vocabulary import EventType, StopReason
from yagent.workers.memory.replay import ReplayVerdict, assess_replay, find_child_rollout, load_for_replay

pytestmark = pytest.mark.e2e


def test_a_director_turn_with_a_delegation_leaves_linked_rollouts(fake, agent_daemon, project: Path) -> None:
    fake.script("director", MARKERS["director"], [
        Step(reasoning="ask the repo agent", tool_calls=[
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
