"""Checkpoints digested by the reader's rules, and every reason a replay is refused, each its own verdict."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from tests.memory.rollout_fixtures import GIT, SlowDisk, conversation, write_rollout
from yagent.ipc.messages import RunOutcome
from yagent.ipc.resume_switch import RESUME_ENV
from yagent.ipc.state_layout import rollout_dir, rollout_name, task_dir
from yagent.ipc.vocabulary import RunStatus, StopReason
from yagent.workers.llm import Message, ToolCall
from yagent.workers.memory import rollout_records as records
from yagent.workers.memory.git_identity import GitIdentity
from yagent.workers.memory.replay import (
    ReplayBudget,
    ReplayVerdict,
    assess_replay,
    find_child_rollout,
    latest_root_rollout,
    load_for_replay,
    rollout_of_run,
)
from yagent.workers.memory.resume_repair import INTERRUPTED_TOOL_RESULT, pairing_problems, repair_for_resume
from yagent.workers.memory.rollout_checkpoint import CheckpointFacts, write_checkpoint
from yagent.workers.memory.rollout_reader import digest_messages, read_rollout
from yagent.workers.memory.rollout_recorder import RunRecorder
from yagent.workers.memory.rollout_writer import RolloutWriter, wait_for_writer


def test_the_checkpoint_digest_is_the_readers_after_a_drain_even_on_a_slow_disk(tmp_path: Path) -> None:
    disk = SlowDisk()
    path = tmp_path / "r.jsonl"
    writer = RolloutWriter(path, open_file=disk.open)
    summary = [Message.system("sys"), Message.user("summary")]
    for message in conversation():
        writer.enqueue(records.response_item(message, 1))
    writer.enqueue(records.compacted(summary, 2))  # the reader's rules, not the writer's memory, are digested
    writer.enqueue(records.response_item(Message.assistant("after"), 2))
    assert disk.entered.wait(10)  # the writer is stuck in its first batch: nothing is readable yet
    drain = writer.drain

    def released_drain(timeout: float | None = None) -> bool:  # the disk comes back once the drain is asked for
        disk.release.set()
        return drain(timeout)

    writer.drain = released_drain  # type: ignore[method-assign]
    facts = CheckpointFacts(step=2, model="m", tier="", git=GIT, delegation_id="c", stop_reason=StopReason.PAUSED)
    assert write_checkpoint(writer, facts) == ""
    writer.close(10)
    replay = load_for_replay(path)
    assert replay.messages == [*summary, Message.assistant("after")]
    assert replay.checkpoint is not None
    assert replay.checkpoint["digest"] == digest_messages(replay.messages)
    assert replay.checkpoint["message_count"] == 3


def test_the_digest_covers_reasoning() -> None:
    plain = [Message.assistant("a")]
    assert digest_messages(plain) != digest_messages([Message.assistant("a", reasoning="why")])


def _child(home: Path, *, delegation_id: str = "call_repo", name: str = "20260101-000000_run-child_repo.jsonl",
           **kw) -> Path:
    directory = rollout_dir(home, "t1")
    directory.mkdir(parents=True, exist_ok=True)
    return write_rollout(directory / name, conversation(), delegation_id=delegation_id, **kw)


def _assess(home: Path, *, delegation_id: str = "call_repo", workspace: GitIdentity = GIT, **kw):
    return assess_replay(task_dir(home, "t1"), delegation_id, project_root=home, max_steps=50,
                         workspace=workspace, **kw)


def test_a_clean_stop_is_replayable_and_the_child_is_found_by_its_delegation_id(tmp_path: Path) -> None:
    _child(tmp_path, delegation_id="other", name="20260101-000000_run-other_repo.jsonl")
    path = _child(tmp_path)
    assert find_child_rollout(task_dir(tmp_path, "t1"), "call_repo") == path
    verdict = _assess(tmp_path)
    assert verdict.replayable and verdict.verdict == ReplayVerdict.REPLAYABLE
    assert verdict.replay is not None and verdict.replay.messages == conversation()


def test_two_runs_sharing_a_delegation_id_are_told_apart_by_their_parent(tmp_path: Path) -> None:
    meta = _child(tmp_path, name="20260101-000000_run-meta_meta.jsonl", parent_run="run-director")
    custom = _child(tmp_path, name="20260101-000001_run-custom_custom-rev.jsonl", parent_run="run-meta")
    assert find_child_rollout(task_dir(tmp_path, "t1"), "call_repo") == custom  # the newest
    assert find_child_rollout(task_dir(tmp_path, "t1"), "call_repo", "run-director") == meta
    assert _assess(tmp_path, parent_run="run-nobody").verdict == ReplayVerdict.NO_CHILD_ROLLOUT


def test_a_pipe_or_a_link_planted_among_the_rollouts_is_passed_over(tmp_path: Path) -> None:
    # A run may write its task's rollouts directory: a pipe there must not hang a resume, and a link must not
    # make another file (here a rollout of some other task) one of this task's.
    path = _child(tmp_path)
    directory = path.parent
    os.mkfifo(directory / "20270101-000000_run-pipe_repo.jsonl")  # newest by name, and nobody ever writes it
    (tmp_path / "elsewhere").mkdir()
    elsewhere = write_rollout(tmp_path / "elsewhere" / "20260101-000000_run-far_repo.jsonl", conversation())
    (directory / "20270101-000001_run-link_repo.jsonl").symlink_to(elsewhere)
    assert find_child_rollout(task_dir(tmp_path, "t1"), "call_repo") == path
    with pytest.raises(OSError, match="symbolic link"):
        read_rollout(directory / "20270101-000001_run-link_repo.jsonl")
    with pytest.raises(OSError, match="named pipe"):
        read_rollout(directory / "20270101-000000_run-pipe_repo.jsonl")


def test_a_link_in_place_of_the_rollouts_directory_hands_a_resume_nothing(tmp_path: Path) -> None:
    # Another task's rollouts, reached through a link planted where this task's rollouts directory goes.
    path = _child(tmp_path)
    root = write_rollout(path.parent / "20260101-000001_r1_director.jsonl", conversation(), agent="director",
                         parent_run="", delegation_id="", run="r1")
    task = task_dir(tmp_path, "t1")
    assert find_child_rollout(task, "call_repo") == path
    assert rollout_of_run(task, "r1") == root and latest_root_rollout(task) == root
    path.parent.rename(tmp_path / "other-task-rollouts")
    path.parent.symlink_to(tmp_path / "other-task-rollouts", target_is_directory=True)
    assert find_child_rollout(task, "call_repo") is None
    assert rollout_of_run(task, "r1") is None and latest_root_rollout(task) is None
    assert _assess(tmp_path).verdict == ReplayVerdict.NO_CHILD_ROLLOUT


def _damage(path: Path) -> None:
    lines = path.read_text().splitlines()
    lines[3] = "{broken"
    path.write_text("\n".join(lines) + "\n")


def _edit_message(path: Path) -> None:
    lines = path.read_text().splitlines()
    rec = json.loads(lines[3])
    rec["payload"]["message"]["content"] = "edited after the stop"
    lines[3] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n")


def _append_message(path: Path) -> None:
    with path.open("a") as fh:
        fh.write(json.dumps(records.response_item(Message.user("added after the stop"), 9)) + "\n")


CASES = {
    ReplayVerdict.NO_CHILD_ROLLOUT: ({}, None, {"delegation_id": "call_nobody"}),
    ReplayVerdict.UNREADABLE: ({}, _damage, {}),
    ReplayVerdict.NO_CHECKPOINT: ({"stop": None}, None, {}),
    ReplayVerdict.DIGEST_MISMATCH: ({}, _edit_message, {}),
    ReplayVerdict.MESSAGE_COUNT_MISMATCH: ({}, _append_message, {}),
    ReplayVerdict.OVER_BUDGET: ({"step": 40}, None, {"budget": ReplayBudget(max_steps=30)}),
    ReplayVerdict.WORKSPACE_MOVED: ({}, None, {"workspace": GitIdentity(sha="b" * 40, branch="main", dirty=False)}),
    ReplayVerdict.BROWSER_DELEGATION: ({"agent": "browser"}, None, {}),
    ReplayVerdict.MAX_STEPS_REACHED: ({"step": 50}, None, {}),
    ReplayVerdict.TIMED_OUT: ({"stop": StopReason.IDLE_TIMEOUT}, None, {}),
    ReplayVerdict.NOT_RESUMABLE_STOP: ({"stop": StopReason.LLM_ERROR}, None, {}),
}


@pytest.mark.parametrize("expected", list(CASES))
def test_each_unsafe_replay_has_its_own_verdict_and_reason(tmp_path: Path, expected: ReplayVerdict) -> None:
    written, damage, asked = CASES[expected]
    path = _child(tmp_path, **written)
    if damage is not None:
        damage(path)
    verdict = _assess(tmp_path, **asked)
    assert not verdict.replayable
    assert verdict.verdict == expected, verdict.reason
    assert verdict.reason


def test_the_reasons_are_all_distinct(tmp_path: Path) -> None:
    reasons = set()
    for index, (expected, (written, damage, asked)) in enumerate(CASES.items()):
        home = tmp_path / str(index)
        path = _child(home, **written)
        if damage is not None:
            damage(path)
        verdict = _assess(home, **asked)
        assert verdict.verdict == expected
        reasons.add(verdict.reason)
    assert len(reasons) == len(CASES)


def test_a_dirty_flag_that_changed_is_a_moved_workspace(tmp_path: Path) -> None:
    _child(tmp_path)
    moved = _assess(tmp_path, workspace=GitIdentity(sha=GIT.sha, branch="main", dirty=True))
    assert moved.verdict == ReplayVerdict.WORKSPACE_MOVED


def test_resume_switched_off_writes_and_replays_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from yagent.workers.memory.rollout_recorder import open_recorder

    _child(tmp_path)
    monkeypatch.setenv(RESUME_ENV, "0")
    assert find_child_rollout(task_dir(tmp_path, "t1"), "call_repo") is None
    assert _assess(tmp_path).verdict == ReplayVerdict.RESUME_DISABLED
    recorder, _ = open_recorder(home=tmp_path, task="t2", run="r", agent="repo", turn=1, parent_run=None,
                                delegation_id=None, depth=0, project_root=tmp_path, yolo="none", model=lambda: "m",
                                tier=lambda: "", stop_reason_of_cancel=lambda: StopReason.CANCELLED)
    assert recorder is None and not rollout_dir(tmp_path, "t2").exists()
    monkeypatch.setenv(RESUME_ENV, "1")
    assert _assess(tmp_path).replayable


def test_a_child_rollout_name_carries_the_agent_suffix() -> None:
    assert rollout_name("20260101-000000", "run1") == "20260101-000000_run1.jsonl"
    assert rollout_name("20260101-000000", "run1", "custom:rev") == "20260101-000000_run1_custom-rev.jsonl"


def test_resume_repair_answers_a_dangling_call_as_interrupted_and_checks_order() -> None:
    history = [Message.user("q"), Message.assistant("", tool_calls=(ToolCall("x", "run_bash", "{}"),
                                                                      ToolCall("y", "read_file", "{}"))),
               Message.tool("y", "y done")]
    repaired = repair_for_resume(history)
    assert [(m.role, m.tool_call_id) for m in repaired] == [("user", ""), ("assistant", ""), ("tool", "x"),
                                                            ("tool", "y")]
    assert repaired[2].content == INTERRUPTED_TOOL_RESULT and "interrupted" in repaired[2].content
    assert pairing_problems(repaired) == []
    assert pairing_problems(history)  # the checker itself sees the dangling call
    assert repair_for_resume(repaired) == repaired


def _recorder(path: Path) -> RunRecorder:
    return RunRecorder(RolloutWriter(path), project_root=path.parent, delegation_id="call_c", model=lambda: "m",
                       tier=lambda: "", stop_reason_of_cancel=lambda: StopReason.CANCELLED)


def test_a_run_that_returns_has_its_rollouts_end_written_when_asked_after_its_result(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    recorder = _recorder(path)
    recorder.end_after_result()
    recorder.begin(records.turn_context(model="m", tier="", cwd=str(tmp_path), yolo="none"), [Message.user("go")])
    recorder.appended(Message.assistant("the answer"), 1)
    recorder.finished(1, RunOutcome(status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT, output="the answer"))
    assert recorder.writer.drain(10)
    replay = load_for_replay(path)
    assert replay.checkpoint is None and replay.stop_reason is None  # its end waits for the result to be out
    assert asyncio.run(wait_for_writer(path, 0)) is False  # and a follow-up waits for it
    recorder.finish_returned()
    replay = load_for_replay(path)
    assert replay.stop_reason == StopReason.AGENT_EXIT and replay.checkpoint is not None
    assert replay.checkpoint["digest"] == digest_messages(replay.messages) and recorder.checkpoints == 1
    assert asyncio.run(wait_for_writer(path, 0)) is True
    recorder.finish_returned()  # once only
    assert [r["type"] for r in read_rollout(path).records].count(records.RolloutRecord.AGENT_CHECKPOINT) == 1


def test_a_run_that_did_not_return_ends_its_rollout_at_once_even_when_its_end_was_left_for_later(
        tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    recorder = _recorder(path)
    recorder.end_after_result()
    recorder.begin(records.turn_context(model="m", tier="", cwd=str(tmp_path), yolo="none"), [Message.user("go")])
    recorder.finished(1, None, RuntimeError("the loop broke"))
    assert asyncio.run(wait_for_writer(path, 0)) is True  # closed: nothing is left for after a result
    assert load_for_replay(path).stop_reason == StopReason.PANIC
    recorder.finish_returned()  # nothing was left for it
    assert [r["type"] for r in read_rollout(path).records].count(records.RolloutRecord.AGENT_CHECKPOINT) == 1
