"""The record types of a rollout file: one JSON object per line, `{"type": ..., "ts": ..., "payload": {...}}`.

What a resume restores is written as typed records from the start, never rebuilt from messages:
- `session_meta`: who this run is (run, task, agent, the parent's run id and the delegation id — the
  parent's tool call id), the board id (the task id) and the project's git identity;
- `turn_context`: model, tier, working directory, yolo level, plan, loaded tools, the sub-agent roster, the
  skills `use_skill` loaded (name, digest of the file, pages);
  MCP servers whose tools the run holds (a resume waits for them before restoring loaded tools);
- `response_item`: one conversation message exactly as the loop holds it (reasoning, thinking blocks
  and the full tool output included);
- `event_msg`: something that happened; the terminal one carries `stop_reason`;
- `compacted`: the whole replacement history after a compression (a reader drops everything before it);
- `agent_checkpoint`: where the run stopped (written on termination paths only, never per step).
"""

from __future__ import annotations

import math
import time
from enum import StrEnum
from typing import Any

from yagent.ipc.vocabulary import StopReason
from yagent.workers.llm import Message

from .git_identity import GitIdentity

__all__ = [
    "STOPPED_EVENT",
    "RolloutRecord",
    "agent_checkpoint",
    "compacted",
    "event_msg",
    "json_safe",
    "record",
    "response_item",
    "session_meta",
    "stopped",
    "turn_context",
]

STOPPED_EVENT = "run_stopped"  # the event_msg that ends a rollout; its payload has `stop_reason`


class RolloutRecord(StrEnum):
    SESSION_META = "session_meta"
    TURN_CONTEXT = "turn_context"
    RESPONSE_ITEM = "response_item"
    EVENT_MSG = "event_msg"
    COMPACTED = "compacted"
    AGENT_CHECKPOINT = "agent_checkpoint"


_MAX_DEPTH = 64
_MAX_INT_BITS = 10_000  # about 3000 decimal digits, under Python's default int-to-text limit


def json_safe(value: Any, depth: int = 0) -> Any:
    """`value` as strict JSON can carry it: non-finite floats and unknown objects become text, deep nesting is cut."""
    if depth > _MAX_DEPTH:
        return "[nested too deep]"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > _MAX_INT_BITS:
        return f"[an integer of {value.bit_length()} bits]"  # past what int-to-text conversion allows
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, dict):
        return {str(k): json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_safe(v, depth + 1) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def record(kind: RolloutRecord, payload: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind.value, "ts": round(time.time(), 6), "payload": payload}


def session_meta(*, run: str, task: str, agent: str, turn: int, parent_run: str | None, delegation_id: str | None,
                 depth: int, project_root: str, git: GitIdentity) -> dict[str, Any]:
    return record(RolloutRecord.SESSION_META, {
        "run": run, "task": task, "agent": agent, "turn": turn, "parent_session_id": parent_run or "",
        "delegation_id": delegation_id or "", "depth": depth, "board": task, "project_root": project_root,
        "git": git.to_dict()})


def turn_context(*, model: str, tier: str, cwd: str, yolo: str, plan: list[str] | None = None,
                 loaded_tools: list[str] | None = None, roster: list[dict[str, Any]] | None = None,
                 loaded_skills: list[dict[str, Any]] | None = None, mcp_servers: list[str] | None = None
                 ) -> dict[str, Any]:
    return record(RolloutRecord.TURN_CONTEXT, {
        "model": model, "tier": tier, "cwd": cwd, "yolo": yolo, "plan": list(plan or []),
        "loaded_tools": list(loaded_tools or []), "roster": list(roster or []),
        "loaded_skills": list(loaded_skills or []), "mcp_servers": list(mcp_servers or [])})


def response_item(message: Message, step: int) -> dict[str, Any]:
    return record(RolloutRecord.RESPONSE_ITEM, {"step": step, "message": message.to_dict()})


def event_msg(event: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    return record(RolloutRecord.EVENT_MSG, {"event": event, **json_safe(data or {})})


def stopped(reason: StopReason, step: int, error: str = "") -> dict[str, Any]:
    return event_msg(STOPPED_EVENT, {"stop_reason": reason.value, "step": step, "error": error})


def compacted(messages: list[Message], step: int) -> dict[str, Any]:
    return record(RolloutRecord.COMPACTED, {"step": step, "messages": [m.to_dict() for m in messages]})


def agent_checkpoint(*, step: int, digest: str, message_count: int, model: str, tier: str, git: GitIdentity,
                     delegation_id: str | None, stop_reason: StopReason) -> dict[str, Any]:
    return record(RolloutRecord.AGENT_CHECKPOINT, {
        "step": step, "digest": digest, "message_count": message_count, "model": model, "tier": tier,
        "git": git.to_dict(), "delegation_id": delegation_id or "", "stop_reason": stop_reason.value})
