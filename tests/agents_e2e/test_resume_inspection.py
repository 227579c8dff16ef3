"""`yagent resume` says, per interrupted delegation, what `continue` will do — and `continue` then does it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agent_harness import MARKERS, run_turn, tool_messages
from tests.agents_e2e.test_resume import _continue, _start_and_stop_mid_delegation
from tests.daemon_harness import of_type
from tests.fake_provider import Failure, Step
from yagent.ipc.confinement import landlock_abi
from yagent.ipc.vocabulary import EventType, HandoffStatus, ReplayVerdict, RunStatus, StopReason, TaskState, Unconfined

pytestmark = pytest.mark.e2e


def _listed(agent_daemon) -> list[dict]:
    done = agent_daemon.cli("resume", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_resume_says_the_interrupted_child_is_replayable_and_continue_replays_it(
        agent_daemon, fake, project: Path) -> None:
    task = _start_and_stop_mid_delegation(agent_daemon, fake, project, stop="daemon-stop")
    agent_daemon.start()

    (listed,) = _listed(agent_daemon)
    assert listed["task"] == task and listed["uninspected"] == "" and listed["problem"] == ""
    # Confined where the kernel can; where it cannot, the listing says so rather than staying silent.
    assert listed["unconfined"] == ("" if landlock_abi() >= 1 else Unconfined.LANDLOCK_MISSING)
    (child,) = listed["children"]
    assert (child["call_id"], child["agent"], child["verdict"], child["depth"]) == (
        "call_repo", "repo", ReplayVerdict.REPLAYABLE, 1)
    assert child["step"] == 2  # its first step finished; the one in flight is asked again
    text = agent_daemon.cli("resume").stdout
    assert "repo (call call_repo): replayable from step 2" in text

    _, events = _continue(agent_daemon, task)
    assert of_type(events, EventType.TURN_FINISHED)[-1].data["status"] == RunStatus.DONE
    repo = fake.requests_for("repo")
    assert len(repo) == 3  # replayed: two before the stop, the step in flight once more
    (result,) = [m for m in tool_messages(fake.requests_for("director")[1]) if m["tool_call_id"] == "call_repo"]
    assert f"status {HandoffStatus.DEGRADED}" not in result["content"]
    assert "app.py line 1 prints the greeting." in result["content"]


def _delete(path: Path) -> None:
    path.unlink()


def _damage_the_middle(path: Path) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    middle = len(lines) // 2
    lines[middle] = b'{"type": "response_item", "payload": {"mess\xff\n'
    path.write_bytes(b"".join(lines))


@pytest.mark.parametrize(("harm", "verdict", "words"), [
    (_delete, ReplayVerdict.NO_CHILD_ROLLOUT, "no rollout"),
    (_damage_the_middle, ReplayVerdict.UNREADABLE, "cannot be read"),
], ids=["deleted", "damaged"])
def test_resume_says_a_child_with_a_lost_record_is_not_replayable_and_continue_gives_the_degraded_report(
        agent_daemon, fake, project: Path, harm, verdict: ReplayVerdict, words: str) -> None:
    task = _start_and_stop_mid_delegation(agent_daemon, fake, project, stop="daemon-stop")
    rollouts = agent_daemon.home / "tasks" / task / "rollout"
    (child_rollout,) = [p for p in rollouts.iterdir() if p.name.endswith("_repo.jsonl")]
    harm(child_rollout)
    agent_daemon.start()

    (listed,) = _listed(agent_daemon)
    (child,) = listed["children"]
    assert (child["call_id"], child["verdict"], child["step"]) == ("call_repo", verdict, 0)
    assert words in child["reason"]
    assert f"repo (call call_repo): not replayed — {child['reason']}; gets a degraded report" in \
        agent_daemon.cli("resume").stdout

    _, events = _continue(agent_daemon, task)
    assert of_type(events, EventType.TURN_FINISHED)[-1].data["status"] == RunStatus.DONE
    (result,) = [m for m in tool_messages(fake.requests_for("director")[1]) if m["tool_call_id"] == "call_repo"]
    assert f"status {HandoffStatus.DEGRADED}" in result["content"] and words in result["content"]
    assert len(fake.requests_for("repo")) == 2  # the degraded report asked the model nothing


def test_a_failed_turn_is_listed_as_one_continue_does_not_pick_up_not_left_out(agent_daemon, fake,
                                                                               project: Path) -> None:
    fake.script("director", MARKERS["director"], [Step(failure=Failure.http(401, message="bad key"))])
    task, events = run_turn(agent_daemon, project, "Say hello.")
    assert of_type(events, EventType.TURN_FINISHED)[-1].data["state"] == TaskState.FAILED
    asked = len(fake.requests_for("director"))

    (listed,) = _listed(agent_daemon)
    assert (listed["task"], listed["resumable"], listed["children"]) == (task, False, [])
    assert StopReason.LLM_ERROR in listed["reason"] and "send it a new message" in listed["reason"]
    text = agent_daemon.cli("resume").stdout
    assert task in text and f"yagent continue {task}" not in text
    assert len(fake.requests_for("director")) == asked  # listing asks the model nothing
    assert agent_daemon.cli("continue", task).returncode != 0  # and indeed `continue` does not pick it up
