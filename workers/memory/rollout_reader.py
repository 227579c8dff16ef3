"""Reading a rollout back for replay: the messages exactly as the run held them, and where it stopped.

The rules, shared by the checkpoint (which digests what this reader rebuilds) and the resume:
- every `response_item` is one message, reasoning, thinking blocks and the full tool output included;
- the newest `compacted` record replaces everything before it with the history it carries;
- tool pairing is repaired last-wins by the engine's own function (`workers.llm.repair_tool_pairing`, via
  `resume_repair.repair_for_resume`):
  a second result for one call id replaces the first, in place; a call with no result gets one saying
  it was interrupted and may be re-issued;
- a torn last line (a crash mid-write) is dropped and reported as a problem; a damaged line anywhere
  else is an error naming file:line, since what follows it cannot be trusted either.
"""

from __future__ import annotations

import errno
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yagent.ipc.state_files import StateFileError, read_state_bytes
from yagent.workers.llm import Message

from .resume_repair import repair_for_resume
from .rollout_records import STOPPED_EVENT, RolloutRecord

# The most of one rollout read back: far past what a run writes (its steps' messages, each tool result cut before the
# model read it, and compactions), so a file past it was blown up by something else and is not read into memory.
MAX_ROLLOUT_BYTES = 256 << 20

__all__ = [
    "MAX_ROLLOUT_BYTES",
    "RolloutContent",
    "RolloutReadError",
    "digest_messages",
    "last_of",
    "read_rollout",
    "rebuild_messages",
    "stop_event",
]

class RolloutReadError(ValueError):
    """A rollout line other than the last is not a record (the file was damaged or edited)."""


@dataclass
class RolloutContent:
    """What one rollout file holds, record by record, before any rule is applied."""

    path: Path
    records: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # what was tolerated (a torn last line)


def _valid(rec: Any) -> bool:
    if not isinstance(rec, dict) or not isinstance(rec.get("payload"), dict):
        return False
    try:
        kind = RolloutRecord(rec.get("type"))
    except ValueError:
        return False
    payload = rec["payload"]
    if kind == RolloutRecord.RESPONSE_ITEM:
        Message.from_dict(payload["message"])
    elif kind == RolloutRecord.COMPACTED:
        if not isinstance(payload.get("messages"), list):
            return False
        for item in payload["messages"]:
            Message.from_dict(item)
    return True


def read_rollout(path: Path) -> RolloutContent:
    """The records of `path`; raises OSError when unreadable (or over `MAX_ROLLOUT_BYTES`), RolloutReadError for a
    damaged middle line."""
    # Never through a link or from a pipe, nor all of a file larger than any run writes: a run may write its task's
    # rollouts directory (`state_files`).
    try:
        data = read_state_bytes(path, MAX_ROLLOUT_BYTES)
    except StateFileError as exc:
        if exc.errno != errno.EFBIG:
            raise
        raise StateFileError(errno.EFBIG, f"{path} is larger than the {MAX_ROLLOUT_BYTES >> 20} MiB a replay reads; "
                                          "move it aside to resume without replay") from None
    # A crash can cut a multi-byte character in two; only the last line can hold such a cut.
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    content = RolloutContent(path)
    last = len(lines) - 1
    while last >= 0 and not lines[last].strip():
        last -= 1
    for index, line in enumerate(lines[:last + 1]):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            ok = _valid(rec)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            ok, why = False, f"{type(exc).__name__}: {exc}"
        else:
            why = "not a rollout record (a type and a payload)"
        if ok:
            content.records.append(rec)
            continue
        if index == last and not text.endswith("\n"):
            content.problems.append(f"{path}:{index + 1}: torn last line dropped (the run stopped mid-write)")
            break
        raise RolloutReadError(
            f"{path}:{index + 1}: damaged rollout line ({why}). The run cannot be replayed from this file; "
            "move it aside to resume without replay (a degraded report is used instead).")
    return content


def rebuild_messages(records: list[dict[str, Any]], *, upto: int | None = None) -> list[Message]:
    """The conversation the records describe (the newest `compacted` rule, then last-wins pairing).

    `upto` limits the rebuild to the first `upto` records (a checkpoint digests what came before it).
    """
    messages: list[Message] = []
    for rec in records[:upto]:
        kind = rec["type"]
        if kind == RolloutRecord.RESPONSE_ITEM:
            messages.append(Message.from_dict(rec["payload"]["message"]))
        elif kind == RolloutRecord.COMPACTED:
            messages = [Message.from_dict(m) for m in rec["payload"]["messages"]]
    return repair_for_resume(messages)


def digest_messages(messages: list[Message]) -> str:
    """sha256 over the messages' stable dict shape (reasoning and thinking blocks included)."""
    h = hashlib.sha256()
    for message in messages:
        h.update(json.dumps(message.to_dict(), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
                 .encode("utf-8", errors="replace"))
        h.update(b"\n")
    return h.hexdigest()


def last_of(records: list[dict[str, Any]], kind: RolloutRecord) -> dict[str, Any] | None:
    for rec in reversed(records):
        if rec["type"] == kind:
            return rec["payload"]
    return None


def stop_event(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    for rec in reversed(records):
        if rec["type"] == RolloutRecord.EVENT_MSG and rec["payload"].get("event") == STOPPED_EVENT:
            return rec["payload"]
    return None
