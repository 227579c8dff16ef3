"""The hand-off: what `agent_exit` must hold for the parent, and how a child run's outcome reads to the
agent that delegated it (the text of the delegate tool's result).

The agent loop checks an exit's hand-off with `handoff_problems`; the delegation tool turns the child's
`RunOutcome` into the parent's tool result with `format_for_parent` and `delegation_status`.
"""

from __future__ import annotations

from typing import Any

from yagent.ipc.messages import RunOutcome
from yagent.ipc.vocabulary import WRITABLE_HANDOFF_STATUSES, HandoffStatus, RunStatus, StopReason

from .result import INTERRUPTED_ADVICE, INTERRUPTED_RESULT, TRUNCATION_CAPS
from .spec import Truncation

__all__ = ["BLUEPRINT_ACCOUNT", "PARENT_RESULT_BUDGET", "delegation_status", "format_for_parent", "handoff_problems",
           "handoff_status"]

# `RunOutcome.data` key of a Repo run's blueprint account: what its completion did with its `blueprint[]` entries.
# Shown to the parent and kept in the run's note (one string, two places), never in the hand-off's conclusion.
BLUEPRINT_ACCOUNT = "blueprint_account"

# What one child's result may take of the parent's context: under the delegation tool's cap, with room
# for the truncation marker, so the cap never has to cut it.
PARENT_RESULT_BUDGET = (TRUNCATION_CAPS[Truncation.LATE] or 64_000) - 1_000
_HANDOFF_BUDGET = 12_000  # the hand-off's own share; a hand-off is short, a longer one is cut too
_MIN_REPORT = 2_000

_STOP_ADVICE = {
    StopReason.IDLE_TIMEOUT: "it made no progress for too long and was stopped",
    StopReason.TOTAL_TIMEOUT: "it ran out of its time budget and was stopped",
    StopReason.MAX_STEPS: "it used all its steps before finishing",
    StopReason.CANCELLED: "it was cancelled",
    StopReason.PANIC: "its worker process crashed",
    StopReason.LLM_ERROR: "its model calls kept failing",
    StopReason.CIRCUIT_BREAKER_OPEN: "its model provider is failing repeatedly",
}


def _filled(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def handoff_problems(handoff: Any) -> list[str]:
    """What keeps a hand-off from the shape the parent relies on; empty when it is fine.

    The shape: `conclusion` (text), `status` (ok, partial or error), `facts` (each an object with a
    `claim` and the `where` it can be checked), `open_questions` (texts). The `agent_exit` schema checks
    only that `handoff` is an object; this is the reading of its inside the agent loop applies at the exit.
    """
    if not isinstance(handoff, dict):
        return ["handoff must be an object"]
    problems = []
    if not _filled(handoff.get("conclusion")):
        problems.append("handoff.conclusion must be a non-empty text")
    status = handoff.get("status")
    if status not in WRITABLE_HANDOFF_STATUSES:
        problems.append(f"handoff.status must be one of {', '.join(WRITABLE_HANDOFF_STATUSES)} (got {status!r})")
    facts = handoff.get("facts", [])
    if not isinstance(facts, list):
        problems.append("handoff.facts must be a list of {claim, where} objects")
    else:
        for i, fact in enumerate(facts):
            if not isinstance(fact, dict) or not _filled(fact.get("claim")) or not _filled(fact.get("where")):
                problems.append(f"handoff.facts[{i}] must be an object with a non-empty claim and where "
                                "(file:line, command or URL)")
    questions = handoff.get("open_questions", [])
    if not isinstance(questions, list) or not all(isinstance(q, str) for q in questions):
        problems.append("handoff.open_questions must be a list of texts")
    return problems


def handoff_status(handoff: dict[str, Any] | None) -> HandoffStatus:
    """The hand-off's status for the parent; a missing hand-off is ok, an unreadable status is partial."""
    if not handoff or "status" not in handoff:
        return HandoffStatus.OK
    status = handoff.get("status")
    if status == HandoffStatus.DEGRADED:  # written by yagent's replay side, never accepted from a model
        return HandoffStatus.DEGRADED
    return HandoffStatus(status) if status in WRITABLE_HANDOFF_STATUSES else HandoffStatus.PARTIAL


def delegation_status(outcome: RunOutcome) -> HandoffStatus:
    """How the parent reads a child's result: a finished child by its own hand-off, a failed one as an error,
    one the daemon stopped (timeout, cancel) as stopped, one cut short by the daemon stopping as interrupted."""
    if outcome.status == RunStatus.DONE:
        return handoff_status(outcome.handoff)
    if outcome.status == RunStatus.INTERRUPTED:
        return HandoffStatus.INTERRUPTED
    return HandoffStatus.ERROR if outcome.status == RunStatus.FAILED else HandoffStatus.STOPPED


def _handoff_lines(handoff: dict[str, Any]) -> list[str]:
    # Lenient on purpose: a hand-off that slipped through malformed still shows every fact it holds.
    lines = []
    if handoff.get("conclusion"):
        lines.append(f"Conclusion: {handoff['conclusion']}")
    facts = handoff.get("facts") or []
    facts = facts if isinstance(facts, list) else [facts]
    if facts:
        lines.append("Facts:")
        for fact in facts:
            claim, where = (fact.get("claim", ""), fact.get("where")) if isinstance(fact, dict) else (fact, None)
            lines.append(f"- {claim} ({where})" if _filled(where) else f"- {claim} (no location given)")
    questions = handoff.get("open_questions") or []
    questions = questions if isinstance(questions, list) else [questions]
    if questions:
        lines.append("Open questions:")
        lines.extend(f"- {q}" for q in questions)
    return lines


def _shorten(text: str, budget: int, what: str) -> str:
    """`text` within `budget` characters: head and tail kept (on line boundaries), the middle left out."""
    if len(text) <= budget:
        return text
    keep = max(budget - 200, 0)
    head, tail = text[: keep * 2 // 3], text[len(text) - keep // 3:]
    head = head[: head.rfind("\n") + 1] or head
    tail = tail[tail.find("\n") + 1:] if "\n" in tail else tail
    left_out = len(text) - len(head) - len(tail)
    return f"{head}\n[… {left_out} characters of the {what} left out here …]\n\n{tail}"


def format_for_parent(outcome: RunOutcome) -> str:
    handoff = outcome.handoff or {}
    if outcome.status == RunStatus.DONE:
        status = handoff_status(handoff)
        raw = (handoff or {}).get("status", status)
        shown = status if raw == status else f"{status} — status unclear ({raw!r})"
        head = f"[{outcome.agent} finished ({outcome.stop_reason}), status {shown}]"
    elif outcome.status == RunStatus.INTERRUPTED:
        head = f"{INTERRUPTED_RESULT} yagentd stopped while {outcome.agent} was working. {INTERRUPTED_ADVICE}"
        if outcome.error:
            head += f"\nDetail: {outcome.error}"
    else:
        why = _STOP_ADVICE.get(outcome.stop_reason, outcome.stop_reason)
        head = f"[{outcome.agent} did not finish: {outcome.stop_reason} — {why}]"
        if outcome.error:
            head += f"\nDetail: {outcome.error}"
    head = _shorten(head, _MIN_REPORT, "error detail")
    extra = _shorten("\n".join(_handoff_lines(handoff or {})), _HANDOFF_BUDGET, "hand-off")
    room = max(PARENT_RESULT_BUDGET - len(head) - len(extra) - 20, _MIN_REPORT)
    parts = [head]
    if outcome.output:
        if outcome.status == RunStatus.DONE:
            parts.append(_shorten(outcome.output, room, "report"))
        else:
            parts.append("Partial output:\n" + _shorten(outcome.output, room - 16, "output"))
    elif outcome.status == RunStatus.DONE:
        parts.append("(the agent returned no text)")
    if extra:
        parts.append(extra)
    account = outcome.data.get(BLUEPRINT_ACCOUNT) if isinstance(outcome.data, dict) else None
    if isinstance(account, str) and account:
        parts.append(f"> [blueprint] {account}")
    return "\n\n".join(parts)
