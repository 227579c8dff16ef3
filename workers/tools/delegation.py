"""Delegation tools: `delegate_<agent>` runs a child through the `Delegator` port and hands its outcome back.

`execute_delegation` is the one place a child's `RunOutcome` becomes the parent's tool result: the text the
parent model reads is `format_for_parent`'s, and the data keeps agent, status, hand-off, stop reason and run.

Whether a delegation may run beside others is split between two declarations: the spec says whether the
delegation is read-only (`mutates`: does the target agent write or run commands?), and the holder's
profile says whether it fans out delegations at all (`parallel_delegations`, the Director only). A Repo
run calling `delegate_devops` is therefore serial, while the Director may run `delegate_repo` and
`delegate_chat` side by side.
"""

from __future__ import annotations

import re

from yagent.ipc.vocabulary import HandoffStatus

from .handoff import delegation_status, format_for_parent
from .registry import register
from .result import ToolResult
from .spec import AuthPolicy, Effect, Frequency, Invocation, ToolSpec, Truncation
from .validation import CUSTOM_TARGET_PREFIX

_PARAMETERS = {
    "type": "object",
    "properties": {
        "task": {
            "type": "string",
            "description": "The task, self-contained: goal, scope, what to hand back. The agent sees only this.",
        },
        "context": {
            "type": "string",
            "description": "Facts already established that the agent should build on (paths, decisions).",
        },
        "context_refs": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Board notes or artifacts to hand over in full (note:repo/STEM, agent:repo for its "
                           "newest note, artifact:ID). The agent sees the board's index anyway; use this to stress.",
        },
    },
    "required": ["task"],
    "additionalProperties": False,
}


async def execute_delegation(inv: Invocation) -> ToolResult:
    delegator = inv.ctx.delegator
    target = inv.spec.delegate_target
    if delegator is None or target is None:
        return ToolResult.error(
            f"{inv.spec.name} is unavailable: this run has no channel to start other agents. Do the work "
            "with your own tools or report what is needed."
        )
    task = str(inv.args["task"])
    board = inv.ctx.board
    refs = inv.args.get("context_refs") or []
    child_task, refs_header = task, ""
    if board is not None:
        child_task, refs_header = board.delegation_task(task, [str(r) for r in refs if isinstance(r, str)])
    outcome = await delegator.run_child(target, child_task, inv.call_id, str(inv.args.get("context") or ""))
    status = delegation_status(outcome)
    record = board.record_delegation(outcome, task) if board is not None else None
    data = {"agent": target, "status": status, "handoff": outcome.handoff, "stop_reason": outcome.stop_reason,
            "run": outcome.run}
    content = format_for_parent(record.outcome if record is not None else outcome)
    if record is not None and record.note:
        data["note"] = record.note
        content += f"\n\n[Kept on the board as {record.note}.]"
        if record.artifact:
            data["artifact"] = record.artifact
    if outcome.subagent:
        data["subagent"] = outcome.subagent
        if inv.surface is not None and inv.surface.resolve("send_followup") is not None:
            content += f"\n[Sub-agent {outcome.subagent}: send_followup continues its conversation.]"
    if refs_header:
        content = refs_header + "\n" + content
    return ToolResult(content=content, is_error=status is HandoffStatus.ERROR, data=data)


def _delegation(
    agent: str,
    description: str,
    *,
    audience: set[str],
    read_only: bool,
    frequency: Frequency = Frequency.HOT,
    target: str | None = None,
) -> ToolSpec:
    return ToolSpec(
        name=f"delegate_{agent}",
        description=description,
        parameters=_PARAMETERS,
        effects=Effect.DELEGATE,
        executor=execute_delegation,
        frequency=frequency,
        mutates=not read_only,
        serial=not read_only,
        # The child run's own tools ask for whatever authorisation they need.
        auth=AuthPolicy.NEVER,
        audience=frozenset(audience),
        delegate_target=target or agent,
        truncation=Truncation.LATE,
    )


register(_delegation(
    "repo",
    "Ask the Repo agent to analyse the codebase read-only: architecture, where something is implemented, "
    "how parts interact, what a change would affect. It reports findings with file references.",
    audience={"director"}, read_only=True,
))
register(_delegation(
    "coding",
    "Ask the Coding agent to change the code: implement, fix, refactor, write tests and run them. Give it "
    "the goal, the relevant files and how to verify the result.",
    audience={"director"}, read_only=False,
))
register(_delegation(
    "chat",
    "Ask the Chat agent a general question that needs no access to the project's files: explanations, "
    "wording, general programming knowledge.",
    audience={"director"}, read_only=True,
))
register(_delegation(
    "devops",
    "Ask the DevOps agent to inspect or operate the environment with shell commands: builds, services, "
    "packages, logs, git state. It can read files but does not edit them.",
    audience={"director", "repo"}, read_only=False,
))
register(_delegation(
    "browser",
    "Ask the Browser agent to work in a real browser (headless Chromium): check a web app or page (a dev server "
    "of the project, a site), fill and submit forms, read documentation that needs JavaScript, reproduce a UI bug, "
    "take screenshots. Give it the URL, what to do and what to report. It does not read or edit files.",
    audience={"director", "coding"}, read_only=False,
))
register(_delegation(
    "meta",
    "Ask the Meta agent to design a new specialised agent for a recurring kind of task; the new agent then "
    "becomes available as its own delegate tool for the rest of this task.",
    audience={"director"}, read_only=False, frequency=Frequency.COLD,
))


def custom_delegate_spec(name: str, description: str) -> ToolSpec:
    """The dynamic `delegate_<name>` tool for a custom agent the Meta agent designed.

    It is never registered statically; hand it to the Director's surface with `Surface.join`. Custom agents
    pick from a read-only palette, so delegating to one is read-only.
    """
    snake = re.sub(r"[^a-z0-9]+", "_", name.strip().lower()).strip("_")
    return _delegation(
        snake,
        description.strip() or f"Delegate a task to the custom agent {name}.",
        audience={"director"},
        read_only=True,
        target=f"{CUSTOM_TARGET_PREFIX}{snake}",
    )
