"""The data of an event the daemon stamps itself (turn_*, run_*, task_*, user_help_response, llm_slot_wait),
read as its `yagent.ipc.daemon_events` record: every client surface reads these fields one way."""

from __future__ import annotations

from typing import TypeVar

from yagent.ipc.daemon_events import DaemonEvent
from yagent.ipc.messages import Event

__all__ = ["stamped_data"]

D = TypeVar("D", bound=DaemonEvent)


def stamped_data(ev: Event, cls: type[D]) -> D:
    """`ev.data` as `cls`; a field that is missing or unreadable (an event of another version) takes its
    default, so a surface never fails on an old event log."""
    data = cls.read(ev.data)
    return data if isinstance(data, cls) else cls()
