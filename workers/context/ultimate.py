"""The third compression tier's text: a run rebuilt from its thinklink when even a summary does not fit.

The conversation is rewritten to the system prompt and one user message built from what the thinklink
recorded: the requests made, the last `keep_plans` thought blocks (0 = every one), the project instructions
and the request being worked on. Then it is cut hard to the budget, least needed first: the oldest plans,
the oldest requests, and finally the middle of what is left, so the goal, the latest plan and the request
stay whole as long as anything can.
"""

from __future__ import annotations

from collections.abc import Callable

from .emergency import plan_digest
from .thinklink import ThinkLink, ThinkLinkEntry
from .tokens import count_tokens

__all__ = ["REBUILT_HEADING", "rebuilt_text"]

REBUILT_HEADING = "# Context rebuilt"
_INTRO = (
    "The conversation could not be kept within the model's context window even as a summary, so yagent rebuilt "
    "it from your recorded goal and plans and the requests made. Go on from where the plan stands; re-read "
    "files or notes you need again rather than guessing their content."
)
_CHARS_PER_TOKEN = 4


def _plan_text(entry: ThinkLinkEntry) -> str:
    plan = entry.plan
    assert plan is not None
    lines = [f"goal: {plan.goal}"] if plan.goal else []
    if plan.step:
        lines.append(f"step: {plan.step}")
    marks = {"done": "[x]", "doing": "[>]", "todo": "[ ]"}
    lines += [f"- {marks.get(status, '[ ]')} {text}" for status, text in plan.plan]
    return "\n".join(lines)


def _cut_middle(text: str, budget_tokens: int, count: Callable[[str], int]) -> str:
    if count(text) <= budget_tokens:
        return text
    keep = max(0, budget_tokens * _CHARS_PER_TOKEN)
    head, tail = text[:keep // 2], text[len(text) - keep // 2:] if keep else ""
    return f"{head}\n… [yagent: {len(text) - len(head) - len(tail):,} characters cut here to fit the budget]\n{tail}"


def rebuilt_text(thinklink: ThinkLink, *, keep_plans: int, instructions: str, request_heading: str, request: str,
                 budget_tokens: int, count: Callable[[str], int] = count_tokens) -> str:
    """The user message of the rebuilt run, at most about `budget_tokens` long."""
    plans = thinklink.plans()
    if keep_plans > 0:
        plans = plans[-keep_plans:]
    inputs = [text for text in thinklink.inputs() if text.strip() != request.strip()]
    fixed = [REBUILT_HEADING, _INTRO, f"## Where the work stands\n\n{plan_digest(thinklink)}"]
    if instructions:
        fixed.append(instructions)
    ending = f"## {request_heading} (word for word)\n\n{request}"
    used = count("\n\n".join([*fixed, ending]))
    # Newest first while they fit; shown oldest first.
    kept_plans: list[str] = []
    for entry in reversed(plans[:-1]):
        text = _plan_text(entry)
        cost = count(text) + 4
        if used + cost > budget_tokens:
            break
        kept_plans.insert(0, text)
        used += cost
    kept_inputs: list[str] = []
    for text in reversed(inputs):
        cost = count(text) + 4
        if used + cost > budget_tokens:
            break
        kept_inputs.insert(0, f"- {text}")
        used += cost
    parts = list(fixed)
    if kept_inputs:
        parts.append("## Requests made earlier (oldest first)\n\n" + "\n".join(kept_inputs))
    if kept_plans:
        parts.append("## Earlier thought blocks (oldest first)\n\n" + "\n\n".join(kept_plans))
    dropped = (len(plans) - 1 - len(kept_plans) if plans else 0) + len(inputs) - len(kept_inputs)
    if dropped > 0:
        parts.append(f"({dropped} older requests and thought blocks were left out to fit the budget.)")
    parts.append(ending)
    return _cut_middle("\n\n".join(parts), budget_tokens, count)
