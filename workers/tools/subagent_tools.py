"""Sub-agent tools: start one in the background, follow one up, wait for some, cancel some, read where they stand.

A delegation's child is a continuable sub-agent with an id (`a…`). `send_followup` continues its conversation
in a new worker (when its configuration is still the one the conversation was written under — else the result
says why not and nothing ran); `spawn_agent` starts a delegation without waiting for it, and says what the end
of the turn does with it if it still works then (`TurnEndChoice`: wait, keep, cancel); `wait_agents` waits for
some until a deadline, `agent_status` reads them. Completion is the daemon's news, never polled for.

Any agent that delegates sees its own sub-agents (`agent_status`) and follows one up (`send_followup`); the
background — `spawn_agent`, `wait_agents`, `cancel_agents` and a follow-up in the background — is reserved to the
root run (`root_only`, and refused by `send_followup` itself in a delegated run), since only a turn's end decides
what becomes of work still running then. They go through the `SubagentPort`; a refusal from the daemon (an
unknown or busy id, a bound) is the tool's error result, word for word.
"""

from __future__ import annotations

import math
from typing import Any

from yagent.ipc.errors import RemoteError
from yagent.ipc.messages import RunOutcome, SubagentInfo
from yagent.ipc.vocabulary import HandoffStatus, SubagentState, TurnEndChoice

from .handoff import delegation_status, format_for_parent
from .registry import register
from .result import ToolResult
from .spec import AuthPolicy, Effect, Invocation, ToolSpec, Truncation

__all__ = ["DEFAULT_WAIT_SECONDS", "MAX_WAIT_SECONDS", "describe_subagent", "result_of"]

DEFAULT_WAIT_SECONDS = 300.0
MAX_WAIT_SECONDS = 3600.0
MAX_NAMED = 32  # sub-agents one call may name

_CHOICE = {
    "type": "string",
    "enum": [c.value for c in TurnEndChoice],
    "description": "If it is still working when you give your final answer: wait (you are given its result "
                   "first), keep (it works on after this turn; the next turn gets its result) or cancel.",
}
_IDS = {"type": "array", "items": {"type": "string"},
        "description": "Sub-agent ids (a…) as delegations and agent_status name them; empty: all of yours."}
_UNAVAILABLE = ("this run has no channel to its sub-agents; delegate with delegate_* and wait for the result "
                "instead")
_CHOICE_TEXT = {TurnEndChoice.WAIT: "if it still works when you answer, you are given its result first",
                TurnEndChoice.KEEP: "if it still works when you answer, it works on after this turn and the next "
                                    "turn gets its result",
                TurnEndChoice.CANCEL: "if it still works when you answer, it is cancelled"}


def _choice(value: Any) -> TurnEndChoice:
    return TurnEndChoice(value) if value in {c.value for c in TurnEndChoice} else TurnEndChoice.WAIT


def _ids(value: Any) -> list[str]:
    return [str(v).strip() for v in (value or []) if str(v).strip()]


def _task_and_refs(inv: Invocation, task: str, refs: Any) -> tuple[str, str]:
    board = inv.ctx.board
    if board is None:
        return task, ""
    return board.delegation_task(task, [str(r) for r in refs or [] if isinstance(r, str)])


def result_of(inv: Invocation, outcome: RunOutcome, task: str) -> ToolResult:
    """A sub-agent's ended run as its parent reads it (kept on the board once), like a delegation's result."""
    status = delegation_status(outcome)
    ports = inv.ctx.subagents
    board = inv.ctx.board
    first = ports.read(outcome.run) if ports is not None and outcome.run else True
    record = board.record_delegation(outcome, task) if board is not None and first else None
    data = {"agent": outcome.agent, "status": status, "handoff": outcome.handoff, "stop_reason": outcome.stop_reason,
            "run": outcome.run, "subagent": outcome.subagent}
    content = format_for_parent(record.outcome if record is not None else outcome)
    if record is not None and record.note:
        data["note"] = record.note
        content += f"\n\n[Kept on the board as {record.note}.]"
    if outcome.subagent:
        content += f"\n[Sub-agent {outcome.subagent}: send_followup continues its conversation.]"
    return ToolResult(content=content, is_error=status is HandoffStatus.ERROR, data=data)


async def spawn_agent(inv: Invocation) -> ToolResult:
    port = inv.ctx.subagents
    if port is None:
        return ToolResult.error(f"spawn_agent is unavailable: {_UNAVAILABLE}.")
    agent = str(inv.args["agent"]).strip().removeprefix("delegate_")
    surface = inv.surface
    spec = surface.resolve(f"delegate_{agent}") if surface is not None else None
    if spec is None or spec.delegate_target is None:
        known = sorted(n.removeprefix("delegate_") for n in (surface.names() if surface else [])
                       if n.startswith("delegate_"))
        return ToolResult.error(f"spawn_agent: there is no agent {agent!r} you can start; choose one of "
                                f"{', '.join(known) or '(none)'}. Nothing was started.")
    choice = _choice(inv.args.get("at_turn_end"))
    task, header = _task_and_refs(inv, str(inv.args["task"]), inv.args.get("context_refs"))
    try:
        run, subagent = await port.start(spec.delegate_target, task, inv.call_id, str(inv.args.get("context") or ""),
                                         choice=choice)
    except RemoteError as exc:
        return ToolResult.error(f"spawn_agent: {exc}. Nothing was started.")
    text = (f"Started {agent} as sub-agent {subagent} in the background (run {run}); go on with other work. "
            f"wait_agents([\"{subagent}\"]) gives you its result when it is done, agent_status shows where it "
            f"stands; {_CHOICE_TEXT[choice]}.")
    return ToolResult(content=(header + "\n" + text) if header else text,
                      data={"agent": spec.delegate_target, "subagent": subagent, "run": run, "background": choice})


async def send_followup(inv: Invocation) -> ToolResult:
    port = inv.ctx.subagents
    if port is None:
        return ToolResult.error(f"send_followup is unavailable: {_UNAVAILABLE}.")
    subagent = str(inv.args["agent_id"]).strip()
    message, header = _task_and_refs(inv, str(inv.args["message"]), inv.args.get("context_refs"))
    context = str(inv.args.get("context") or "")
    if inv.args.get("background") and inv.ctx.delegated:
        return ToolResult.error("send_followup: only the agent that talks to the user sends a follow-up in the "
                                "background; call it again without background and wait for the answer. Nothing "
                                "was sent.")
    try:
        if inv.args.get("background"):
            choice = _choice(inv.args.get("at_turn_end"))
            run, _ = await port.start("", message, inv.call_id, context, choice=choice, subagent=subagent)
            text = (f"Sent the follow-up to sub-agent {subagent}; it works on it in the background (run {run}). "
                    f"wait_agents([\"{subagent}\"]) gives you its answer; {_CHOICE_TEXT[choice]}.")
            return ToolResult(content=text, data={"subagent": subagent, "run": run, "background": choice})
        outcome = await port.follow_up(subagent, message, inv.call_id, context)
    except RemoteError as exc:
        return ToolResult.error(f"send_followup: {exc}. Nothing was sent.")
    result = result_of(inv, outcome, message)
    return ToolResult(content=(header + "\n" + result.content) if header else result.content,
                      is_error=result.is_error, data=result.data)


async def wait_agents(inv: Invocation) -> ToolResult:
    port = inv.ctx.subagents
    if port is None:
        return ToolResult.error(f"wait_agents is unavailable: {_UNAVAILABLE}.")
    ids = _ids(inv.args.get("agent_ids"))
    timeout = inv.args.get("timeout_seconds", DEFAULT_WAIT_SECONDS)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not math.isfinite(timeout) \
            or timeout <= 0:
        return ToolResult.error(f"wait_agents: timeout_seconds must be a number of seconds above 0 and at most "
                                f"{MAX_WAIT_SECONDS:g} (got {timeout!r}). Nothing was waited for.")
    if len(ids) > MAX_NAMED:
        return ToolResult.error(f"wait_agents: name at most {MAX_NAMED} sub-agents at once.")
    try:
        reply = await port.ask(ids, wait=True, timeout=min(float(timeout), MAX_WAIT_SECONDS))
    except RemoteError as exc:
        return ToolResult.error(f"wait_agents: {exc}.")
    if not reply.subagents:
        return ToolResult(content="No sub-agent of yours works in the background: there is nothing to wait for.",
                          data={"subagents": []})
    parts, errors = [], 0
    for info in reply.subagents:
        if info.state == SubagentState.WORKING or info.outcome is None:
            parts.append(f"## {describe_subagent(info)}\nStill working.")
            continue
        result = result_of(inv, info.outcome, info.task)
        errors += result.is_error
        parts.append(f"## Sub-agent {info.subagent} ({info.agent})\n{result.content}")
    head = (f"The deadline ({float(timeout):g}s) came first: some are still working; wait again or go on."
            if reply.timed_out else "Every sub-agent you waited for has ended.")
    return ToolResult(content=head + "\n\n" + "\n\n".join(parts),
                      data={"subagents": [i.subagent for i in reply.subagents], "timed_out": reply.timed_out},
                      is_error=bool(reply.subagents) and errors == len(reply.subagents))


async def cancel_agents(inv: Invocation) -> ToolResult:
    port = inv.ctx.subagents
    if port is None:
        return ToolResult.error(f"cancel_agents is unavailable: {_UNAVAILABLE}.")
    ids = _ids(inv.args.get("agent_ids"))
    if not ids or len(ids) > MAX_NAMED:
        return ToolResult.error(f"cancel_agents: name 1 to {MAX_NAMED} sub-agents to cancel. Nothing was cancelled.")
    try:
        reply = await port.ask(ids, cancel=True)
    except RemoteError as exc:
        return ToolResult.error(f"cancel_agents: {exc}. Nothing was cancelled.")
    lines = [f"- {info.subagent} ({info.agent}): " + ("being cancelled" if info.state == SubagentState.WORKING
                                                      else f"had already ended ({info.state.value}); nothing to do")
             for info in reply.subagents]
    return ToolResult(content="Cancelled:\n" + "\n".join(lines), data={"subagents": ids})


async def agent_status(inv: Invocation) -> ToolResult:
    port = inv.ctx.subagents
    if port is None:
        return ToolResult.error(f"agent_status is unavailable: {_UNAVAILABLE}.")
    ids = _ids(inv.args.get("agent_ids"))
    if len(ids) > MAX_NAMED:
        return ToolResult.error(f"agent_status: name at most {MAX_NAMED} sub-agents at once.")
    try:
        reply = await port.ask(ids)
    except RemoteError as exc:
        return ToolResult.error(f"agent_status: {exc}.")
    if not reply.subagents:
        return ToolResult(content="You have no sub-agents in this task yet: every delegation starts one.",
                          data={"subagents": []})
    lines = [f"- {describe_subagent(info)}" for info in reply.subagents]
    return ToolResult(content="Your sub-agents (send_followup continues an idle or stopped one):\n" + "\n".join(lines),
                      data={"subagents": [i.subagent for i in reply.subagents]})


def describe_subagent(info: SubagentInfo) -> str:
    """One line: id, agent, state (and background choice), its first task, its last conclusion."""
    state = info.state.value + (f", background: {info.background.value}" if info.background
                                and info.state == SubagentState.WORKING else "")
    line = f"{info.subagent} {info.agent} [{state}]"
    if info.task:
        line += f" — task: {info.task}"
    if info.conclusion:
        line += f" — last conclusion: {info.conclusion}"
    return line


_TASK = {"type": "string", "description": "The task, self-contained: goal, scope, what to hand back. The agent sees "
                                          "only this."}
_CONTEXT = {"type": "string", "description": "Facts already established that the agent should build on."}
_REFS = {"type": "array", "items": {"type": "string"},
         "description": "Board notes or artifacts to hand over in full (note:repo/STEM, agent:repo, artifact:ID)."}


def _spec(name: str, description: str, properties: dict[str, Any], required: list[str], *, serial: bool,
          truncation: Truncation = Truncation.LATE, root_only: bool = True) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description,
        parameters={"type": "object", "properties": properties, "required": required, "additionalProperties": False},
        effects=Effect.ORCHESTRATE,
        executor={"spawn_agent": spawn_agent, "send_followup": send_followup, "wait_agents": wait_agents,
                  "agent_status": agent_status, "cancel_agents": cancel_agents}[name],
        mutates=serial,
        serial=serial,
        auth=AuthPolicy.NEVER,  # the sub-agents' own tools ask for what they need
        truncation=truncation,
        root_only=root_only,
    )


register(_spec(
    "spawn_agent",
    "Start a delegation in the background and go on at once: the agent (repo, coding, chat, devops, or a custom "
    "one) works on the task while you do other things. Use it for independent work you want in parallel; "
    "collect the result with wait_agents. Two agents that change files at once can get in each other's way: "
    "give writing agents separate files.",
    {"agent": {"type": "string", "description": "Which agent: the name after delegate_ (repo, coding, ...)."},
     "task": _TASK, "context": _CONTEXT, "context_refs": _REFS, "at_turn_end": _CHOICE},
    ["agent", "task"], serial=True, truncation=Truncation.NEVER,
))
register(_spec(
    "send_followup",
    "Continue a sub-agent you delegated to before (its id is in that delegation's result and in agent_status): "
    "it goes on from its own earlier conversation, so refer to what it did without repeating it. Faster and "
    "cheaper than delegating anew when the same agent should do more on the same subject.",
    {"agent_id": {"type": "string", "description": "The sub-agent's id (a…)."},
     "message": {"type": "string", "description": "What it should do next."},
     "context": _CONTEXT, "context_refs": _REFS,
     "background": {"type": "boolean", "description": "Do not wait for it: go on at once (default false)."},
     "at_turn_end": _CHOICE},
    ["agent_id", "message"], serial=True, root_only=False,
))
register(_spec(
    "wait_agents",
    "Wait for sub-agents working in the background until each has ended or the deadline passes, and read the "
    "results of those that ended.",
    {"agent_ids": _IDS,
     "timeout_seconds": {"type": "number", "description": f"The most to wait, in seconds (default "
                                                          f"{DEFAULT_WAIT_SECONDS:g}, at most {MAX_WAIT_SECONDS:g})."}},
    [], serial=True,
))
register(_spec(
    "cancel_agents",
    "Cancel sub-agents working in the background that are no longer needed (one that has ended already needs "
    "nothing). A cancelled sub-agent can still be followed up later.",
    {"agent_ids": {"type": "array", "items": {"type": "string"}, "description": "The sub-agents to cancel."}},
    ["agent_ids"], serial=True,
))
register(_spec(
    "agent_status",
    "List your sub-agents: id, agent, state (working, idle, stopped, retired), the task each started with and "
    "its last conclusion.",
    {"agent_ids": _IDS},
    [], serial=False, truncation=Truncation.EARLY, root_only=False,
))
