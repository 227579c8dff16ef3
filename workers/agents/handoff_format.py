"""How a child run's outcome reads to the agent that delegated it (the delegate tool's result)."""

from __future__ import annotations

from typing import Any

from yagent.ipc.messages import RunOutcome
from yagent.ipc.vocabulary import RunStatus, StopReason

__all__ = ["format_for_parent"]

_STOP_ADVICE = {
    StopReason.IDLE_TIMEOUT: "it made no progress for too long and was stopped",
    StopReason.TOTAL_TIMEOUT: "it ran out of its time budget and was stopped",
    StopReason.MAX_STEPS: "it used all its steps before finishing",
    StopReason.CANCELLED: "it was cancelled",
    StopReason.INTERRUPTED: "it was interrupted (the daemon stopped)",
    StopReason.PANIC: "its worker process crashed",
    StopReason.LLM_ERROR: "its model calls kept failing",
    StopReason.CIRCUIT_BREAKER_OPEN: "its model provider is failing repeatedly",
}


def _handoff_lines(handoff: dict[str, Any]) -> list[str]:
    lines = []
    if handoff.get("conclusion"):
        lines.append(f"Conclusion: {handoff['conclusion']}")
    facts = handoff.get("facts") or []
    if isinstance(facts, list) and facts:
        lines.append("Facts:")
        for fact in facts:
            if isinstance(fact, dict):
                where = f" ({fact.get('where')})" if fact.get("where") else ""
                lines.append(f"- {fact.get('claim', '')}{where}")
    questions = handoff.get("open_questions") or []
    if isinstance(questions, list) and questions:
        lines.append("Open questions:")
        lines.extend(f"- {q}" for q in questions)
    return lines


def format_for_parent(outcome: RunOutcome) -> str:
    handoff = outcome.data.get("handoff") if isinstance(outcome.data.get("handoff"), dict) else {}
    if outcome.status == RunStatus.DONE:
        status = (handoff or {}).get("status", "ok")
        head = f"[{outcome.agent} finished ({outcome.stop_reason}), status {status}]"
    else:
        why = _STOP_ADVICE.get(outcome.stop_reason, outcome.stop_reason)
        head = f"[{outcome.agent} did not finish: {outcome.stop_reason} — {why}]"
        if outcome.error:
            head += f"\nDetail: {outcome.error}"
    parts = [head]
    if outcome.output:
        parts.append(outcome.output if outcome.status == RunStatus.DONE else f"Partial output:\n{outcome.output}")
    elif outcome.status == RunStatus.DONE:
        parts.append("(the agent returned no text)")
    extra = _handoff_lines(handoff or {})
    if extra:
        parts.append("\n".join(extra))
    return "\n\n".join(parts)
