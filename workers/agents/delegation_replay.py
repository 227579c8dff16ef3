"""A delegation asked for again by a resumed parent (`REPLAY_OPTION`): pick the interrupted child up where it
stopped, or — when that is not safe — hand back a report the program writes from what was recorded.

Picking up (a replay) needs the interrupted child's record: its rollout, with a checkpoint that matches
what the reader rebuilds and a workspace that has not moved since. Any doubt makes it a degraded hand-off
report instead: what was done, what was not, what to do next, from the record alone and without a model
call. A degraded report is a result the parent builds on, not an error; its hand-off says `degraded` and
why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yagent.ipc.messages import RunOutcome
from yagent.ipc.run_settings import RunSettings
from yagent.ipc.state_layout import task_dir
from yagent.ipc.vocabulary import HandoffStatus, RunStatus, StopReason
from yagent.workers.context.thought import parse_thought, strip_thought
from yagent.workers.llm import Message
from yagent.workers.memory.replay import ReplayAssessment, ReplayBudget, assess_replay
from yagent.workers.tools.result import INTERRUPTED_RESULT

__all__ = ["ReplayStart", "StoppedRecord", "assess_delegation", "degraded_report", "finished_steps", "stopped_record"]

_BRIEF_KEYS = ("path", "command", "pattern", "query", "task", "url")


@dataclass(frozen=True, slots=True)
class ReplayStart:
    """Where a replayed child starts: the rebuilt history and the step it had reached."""

    messages: list[Message]
    step: int
    loaded_tools: list[str] = field(default_factory=list)  # what its surface offered, cold tools it loaded too
    loaded_skills: list[Any] = field(default_factory=list)  # what its use_skill calls had loaded (the record)
    mcp_servers: list[str] = field(default_factory=list)  # the MCP servers whose tools its stopped run held


def assess_delegation(home: Path, task: str, call_id: str, *, parent_run: str | None, project_root: Path,
                      settings: RunSettings, role: str) -> ReplayAssessment:
    """Whether the interrupted delegation `call_id` of run `parent_run` replays, judged with the limits a replay of
    `role` runs under (its max steps, the `[resume]` budget): one call for the replay and the resume inspection."""
    return assess_replay(task_dir(home, task), call_id, project_root=project_root,
                         max_steps=settings.max_steps_for(role), parent_run=parent_run,
                         budget=ReplayBudget(settings.replay_max_steps, settings.replay_max_messages))


def finished_steps(messages: list[Message], compacted_at: int = 0) -> int:
    """The steps a rebuilt history finished, where its replay goes on: one model reply each (the checkpoint's
    step may be one whose call never returned), plus the steps before a compaction at step `compacted_at`,
    whose replies the compacted history no longer holds."""
    return max(0, compacted_at - 1) + sum(1 for m in messages if m.role == "assistant")


@dataclass(slots=True)
class StoppedRecord:
    """What the interrupted child's record says it did (empty when there is no record)."""

    finished_calls: list[str] = field(default_factory=list)  # "tool: brief" of calls that returned a result
    open_plan: list[str] = field(default_factory=list)  # plan items not yet done, from its last thought block
    last_words: str = ""  # the last text it wrote


def stopped_record(messages: list[Message]) -> StoppedRecord:
    """What a rebuilt history says was done: each call answered by a result that is not an interruption, the
    plan items its last thought block left open, and its last words."""
    answered = {m.tool_call_id for m in messages
                if m.role == "tool" and m.tool_call_id and not m.content.startswith(INTERRUPTED_RESULT)}
    record = StoppedRecord()
    for message in messages:
        if message.role != "assistant":
            continue
        for call in message.tool_calls:
            if call.id in answered and call.name != "agent_exit":
                record.finished_calls.append(f"{call.name}: {_brief(call.arguments)}".rstrip(": "))
        plan = parse_thought(message.content)
        if plan is not None and plan.plan:
            record.open_plan = [text for status, text in plan.plan if status != "done" and text]
        words = strip_thought(message.content).strip()
        if words:
            record.last_words = words[:2000]
    return record


def _brief(arguments: str) -> str:
    try:
        args = json.loads(arguments)
    except ValueError:
        return ""
    if not isinstance(args, dict):
        return ""
    for key in _BRIEF_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return _first_line(value)
    return ""


def degraded_report(agent: str, task: str, reason: str, record: StoppedRecord | None = None) -> RunOutcome:
    """The program-written hand-off of an interrupted delegation that cannot be replayed (`reason`)."""
    record = record or StoppedRecord()
    done = [f"- {c}" for c in record.finished_calls] or ["- nothing was recorded as finished"]
    not_done = [f"- {p}" for p in record.open_plan] or [f"- the task itself: {_first_line(task)}"]
    next_steps = [
        f"- delegate the remaining work to {agent} again, with the finished steps above as context",
        "- check the workspace first: a step in flight when it stopped may have been partly applied",
    ]
    body = "\n".join([
        f"[{agent} was interrupted and could not be picked up where it stopped: {reason}. This report is "
        "written by yagent from the run's record, not by the agent.]",
        "", "Done:", *done, "", "Not done:", *not_done, "", "Next steps:", *next_steps,
    ])
    if record.last_words:
        body += f"\n\nIts last words before it stopped:\n{record.last_words}"
    handoff = {
        "conclusion": f"{agent} was interrupted before it finished; not replayable ({reason})",
        "facts": [],
        "open_questions": [p for p in record.open_plan],
        "status": HandoffStatus.DEGRADED.value,
        "degraded": reason,
    }
    return RunOutcome(status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT, output=body, handoff=handoff,
                      data={"degraded": reason})


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 200 else line[:199] + "…"
