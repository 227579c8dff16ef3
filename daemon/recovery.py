"""Turns and runs a daemon left in flight: marked interrupted in the registry, and their followers told.

At start this covers a predecessor that crashed or was killed; at shutdown, whatever did not end in time.
A client following such a task gets the `run_finished` / `turn_finished` events it waits for, so it
never waits forever.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from yagent.ipc.daemon_events import RunFinished, TurnFinished
from yagent.ipc.vocabulary import EventType, RunStatus, StopReason, TaskState

from .event_hub import EventHub
from .registry import Interrupted, Registry

__all__ = ["mark_and_report_interrupted"]

log = logging.getLogger(__name__)


def mark_and_report_interrupted(registry: Registry, hub: EventHub, why: str, *,
                                is_live: Callable[[str], bool]) -> Interrupted:
    """Mark what the registry still has in flight as interrupted and publish its end; `is_live` tells the
    tasks this daemon still holds in memory (their event logs stay open)."""
    interrupted = registry.mark_interrupted()
    touched: set[str] = set()
    for r in interrupted.runs:
        touched.add(r.task_id)
        data = RunFinished(status=RunStatus.INTERRUPTED, stop_reason=StopReason.INTERRUPTED, error=why,
                           parent=r.parent_run, call_id=r.call_id)
        hub.publish(r.task_id, r.id, r.agent, EventType.RUN_FINISHED.value, data.to_wire())
    for t in interrupted.turns:
        touched.add(t.task_id)
        data = TurnFinished(turn=t.turn, state=TaskState.INTERRUPTED, status=RunStatus.INTERRUPTED,
                            stop_reason=StopReason.INTERRUPTED, error=why, run=t.root_run)
        hub.publish(t.task_id, t.root_run, "", EventType.TURN_FINISHED.value, data.to_wire())
    for task_id in touched:
        if not is_live(task_id):
            registry.set_task_last_seq(task_id, hub.last_seq(task_id))
            hub.close_task(task_id)
    return interrupted
