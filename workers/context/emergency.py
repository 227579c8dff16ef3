"""The second compression tier's text: the one user message a run goes on from after a summary.

Everything but the system prompt and the last `KEEP_LAST` messages is summarised by the run's own model (the
caller makes that call, `SUMMARY_REQUEST` is what it asks); the conversation is then rewritten to the system
prompt and one user message holding, in this order: the summary, the thinklink digest (goal, the item in
progress, the plan), the project instructions, the request being worked on word for word, and the last
messages word for word. What the run must not forget after a compaction — its goal, its active plan item, the
user's latest request, the project's instructions — is put back by the program, not left to the summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .thinklink import ThinkLink
from .thought import ThoughtPlan

__all__ = ["COMPACTED_HEADING", "KEEP_LAST", "SUMMARY_REQUEST", "compacted_text", "plan_digest", "render_messages"]

KEEP_LAST = 3
COMPACTED_HEADING = "# Context compacted"
SUMMARY_REQUEST = (
    "The conversation above is about to be replaced by a summary, because it no longer fits the model's context "
    "window. Write that summary now, as plain text, without calling any tool: what was asked; what has been done "
    "and found (files by path, commands and their results, decisions and why); notes and artifacts by their "
    "references (note:…, artifact:…); what failed or is still open; and what the next step was going to be. "
    "Be complete about facts and brief in wording. Your goal, your plan, the project instructions and the latest "
    "request are kept separately, word for word; do not repeat them."
)
_STATUS_MARK = {"done": "[x]", "doing": "[>]", "todo": "[ ]"}


def _plan_lines(plan: ThoughtPlan) -> list[str]:
    return [f"- {_STATUS_MARK.get(status, '[ ]')} {text}" for status, text in plan.plan]


def plan_digest(thinklink: ThinkLink) -> str:
    """The goal, the item in progress and the plan of the latest thought block recorded."""
    plan = thinklink.latest_plan()
    if plan is None:
        return "No thought block was recorded before this point."
    doing = [text for status, text in plan.plan if status == "doing"]
    lines = [f"goal: {plan.goal or '(not stated)'}",
             f"current item: [>] {doing[0]}" if doing else "current item: (no item was marked [>])"]
    if plan.step:
        lines.append(f"last step: {plan.step}")
    if plan.plan:
        lines += ["plan:", *_plan_lines(plan)]
    return "\n".join(lines)


def render_messages(messages: Sequence[Any]) -> str:
    """Messages as text, each under its role: the words, the tool calls with their arguments, the results."""
    blocks = []
    for message in messages:
        if message.role == "tool":
            head = f"### tool result ({message.name or 'tool'}, call {message.tool_call_id})"
        else:
            head = f"### {message.role}"
        body = message.content or ""
        calls = "\n".join(f"calls {call.name}({call.arguments})" for call in getattr(message, "tool_calls", ()) or ())
        blocks.append("\n".join(part for part in (head, body, calls) if part))
    return "\n\n".join(blocks)


def compacted_text(*, summary: str, digest: str, instructions: str, request_heading: str, request: str,
                   tail: Sequence[Any]) -> str:
    """The user message the conversation is rewritten to (after the system prompt)."""
    parts = [
        COMPACTED_HEADING,
        "The conversation before this point was summarised by yagent to fit the model's context window. The "
        "summary, your goal and plan, the project instructions, the request and the last messages follow. Go on "
        "from where the work stands; do not start over.",
        f"## Summary of the conversation so far\n\n{summary.strip()}",
        f"## Your goal and plan (from your last thought block)\n\n{digest}",
    ]
    if instructions:
        parts.append(instructions)
    parts.append(f"## {request_heading} (word for word)\n\n{request}")
    if tail:
        parts.append(f"## The last messages before the summary (word for word)\n\n{render_messages(tail)}")
    return "\n\n".join(parts)
