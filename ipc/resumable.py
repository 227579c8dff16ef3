"""Which tasks `continue` resumes where they stopped: the one rule the daemon acts on and clients explain."""

from __future__ import annotations

from collections.abc import Iterable

from .vocabulary import StopReason, TaskState

__all__ = ["RESUMABLE_STATES", "stopped_midway"]

# A task whose last turn ended in one of these resumes it (after a daemon restart a paused turn is interrupted).
RESUMABLE_STATES = frozenset({TaskState.INTERRUPTED, TaskState.CANCELLED})


def stopped_midway(state: str, root_stop_reasons: Iterable[str]) -> bool:
    """Interrupted or cancelled, or failed because its root run's worker died (`kill -9`, a crash);
    `root_stop_reasons` are the stop reasons of the last turn's root runs."""
    if state in RESUMABLE_STATES:
        return True
    return state == TaskState.FAILED and any(reason == StopReason.PANIC for reason in root_stop_reasons)
