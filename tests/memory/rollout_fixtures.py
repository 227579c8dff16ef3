"""Rollouts written through the real writer, for the reader, checkpoint and replay tests."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import BinaryIO

from yagent.ipc.vocabulary import StopReason
from yagent.workers.llm import Message, ThinkingBlock, ToolCall
from yagent.workers.memory import rollout_records as records
from yagent.workers.memory.git_identity import GitIdentity
from yagent.workers.memory.rollout_checkpoint import CheckpointFacts, write_checkpoint
from yagent.workers.memory.rollout_writer import RolloutWriter

GIT = GitIdentity(sha="a" * 40, branch="main", dirty=False)


def conversation() -> list[Message]:
    """A run's messages with everything a replay must keep: reasoning, thinking blocks, long tool output."""
    return [
        Message.system("You are the yagent Repo agent (test)"),
        Message.user("find the greeting"),
        Message.assistant("looking", reasoning="I should read app.py",
                          thinking_blocks=(ThinkingBlock("I should read app.py", "sig-1"),),
                          tool_calls=(ToolCall("c1", "read_file", '{"path": "app.py"}'),)),
        Message.tool("c1", "print('hello')\n" * 2000, name="read_file"),
        Message.assistant("it is in app.py"),
    ]


def write_rollout(path: Path, messages: list[Message], *, agent: str = "repo", delegation_id: str = "call_repo",
                  parent_run: str = "run-parent", stop: StopReason | None = StopReason.CANCELLED, step: int = 2,
                  git: GitIdentity = GIT, extra: list[dict] | None = None, run: str = "run-child") -> Path:
    writer = RolloutWriter(path)
    writer.enqueue(records.session_meta(run=run, task="t1", agent=agent, turn=1, parent_run=parent_run,
                                        delegation_id=delegation_id, depth=1, project_root="/p", git=git))
    writer.enqueue(records.turn_context(model="m", tier="fast", cwd="/p", yolo="none"))
    for message in messages:
        writer.enqueue(records.response_item(message, 1))
    for rec in extra or []:
        writer.enqueue(rec)
    if stop is not None:
        assert write_checkpoint(writer, CheckpointFacts(step=step, model="m", tier="fast", git=git,
                                                        delegation_id=delegation_id, stop_reason=stop)) == ""
        writer.enqueue(records.stopped(stop, step))
    assert writer.close(10)
    assert writer.error == ""
    return path


class SlowDisk:
    """A file whose writes wait until `release` is set: the disk seam the writer takes as `open_file`."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.writes: list[bytes] = []
        self.fh: BinaryIO | None = None

    def open(self, path: Path) -> SlowDisk:
        self.fh = path.open("ab")
        return self

    def write(self, data: bytes) -> int:
        self.entered.set()
        assert self.release.wait(30), "the test never released the slow disk"
        self.writes.append(bytes(data))
        assert self.fh is not None
        return self.fh.write(data)

    def flush(self) -> None:
        assert self.fh is not None
        self.fh.flush()

    def fileno(self) -> int:
        assert self.fh is not None
        return self.fh.fileno()

    def close(self) -> None:
        assert self.fh is not None
        self.fh.close()
