"""What the parts below the arbiter share of the daemon: one object handed down, so that run supervisors
and turn controllers never import the arbiter (and the arbiter can be replaced in a test)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yagent.ipc.config import Settings
from yagent.ipc.daemon_events import DaemonEvent
from yagent.ipc.messages import Question
from yagent.ipc.records import Message
from yagent.ipc.vocabulary import EventType

from .admission import WorkerSlots
from .event_hub import EventHub
from .launcher import Launcher
from .leases import LeaseManager
from .registry import Registry
from .schedule import Scheduler
from .settings_source import SettingsSource
from .task_scope import TaskScope

if TYPE_CHECKING:
    from .run_supervisor import RunSupervisor

__all__ = ["RunServices"]


@dataclass(eq=False)
class RunServices:
    config: SettingsSource
    clock: Callable[[], float]
    registry: Registry
    hub: EventHub
    leases: LeaseManager
    slots: WorkerSlots
    launcher: Launcher
    scheduler: Scheduler
    scope: TaskScope  # owner of background work a run starts (stop escalations, tree sweeps)
    workers_endpoint: str
    home: Path
    send_worker: Callable[[str, Message], None]  # (run id, message): never blocks
    is_shutting_down: Callable[[], bool]
    # Every run with a queue place or a live process, by id; a run leaves when its process is gone.
    runs: dict[str, RunSupervisor] = field(default_factory=dict)
    on_runs_empty: Callable[[], None] = lambda: None
    runs_started: int = 0

    @property
    def settings(self) -> Settings:
        return self.config.current

    def publish(self, task_id: str, data: DaemonEvent, run: RunSupervisor | None = None) -> int:
        return self._publish(task_id, data.event, data.to_wire(), run)

    def publish_question(self, task_id: str, question: Question, run: RunSupervisor) -> int:
        return self._publish(task_id, EventType.USER_HELP_NEEDED, question.to_wire(), run)

    def _publish(self, task_id: str, type_: EventType, data: dict[str, Any], run: RunSupervisor | None) -> int:
        return self.hub.publish(task_id, run.id if run else "", run.agent if run else "", type_.value, data)

    def forget_run(self, run_id: str) -> None:
        if self.runs.pop(run_id, None) is not None and not self.runs:
            self.on_runs_empty()
