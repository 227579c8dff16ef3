"""What the parts below the arbiter share of the daemon: one object handed down, so that turn controllers
and run supervisors never import the arbiter (and a test can build them without one)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from yagent.ipc import event_data
from yagent.ipc.config import Settings
from yagent.ipc.daemon_events import DaemonEvent
from yagent.ipc.messages import Question
from yagent.ipc.records import Message
from yagent.ipc.vocabulary import EventType

from .admission import WorkerSlots
from .browser_manager import BrowserManager
from .event_hub import EventHub
from .launcher import Launcher
from .leases import LeaseManager
from .mcp_manager import McpManager
from .registry import Registry
from .schedule import Scheduler
from .settings_source import SettingsSource
from .spending import DailySpend
from .task_scope import TaskScope

if TYPE_CHECKING:
    from .checkpoints import CheckpointService

__all__ = ["RunIdentity", "RunServices"]


class RunIdentity(Protocol):
    """What an event names of the run it comes from."""

    id: str
    agent: str


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
    send_worker: Callable[[bytes, Message], None]  # (the worker's bound connection, message): never blocks
    is_shutting_down: Callable[[], bool]
    spend: DailySpend = field(default_factory=DailySpend)  # today's dollars over every task
    runtime_dir: Path | None = None  # kept out of every confined worker's reach
    landlock_abi: int = 0  # the kernel's Landlock ABI as probed at start (0: none, runs are not confined)
    user_namespaces: bool = False  # as probed at start: a run that writes the project gets a read-only .git view
    runs_started: int = 0
    mcp: McpManager | None = None  # the MCP servers of every project; None where MCP is not served
    browser: BrowserManager | None = None  # the browsers of every project; None where none are served

    def browser_unavailable(self) -> str:
        """Why runs cannot use a browser now ("" when they can), for `RunSettings.browser`."""
        if self.settings.run_settings.browser:
            return self.settings.run_settings.browser
        return self.browser.unavailable() if self.browser is not None else "this daemon runs no browsers"
    checkpoints: CheckpointService | None = None  # git checkpoints of Coding sub-tasks; None: none are made

    @property
    def settings(self) -> Settings:
        return self.config.current

    def publish(self, task_id: str, data: DaemonEvent, run: RunIdentity | None = None) -> int:
        return self._publish(task_id, data.event, data.to_wire(), run)

    def publish_question(self, task_id: str, question: Question, run: RunIdentity | None) -> int:
        return self._publish(task_id, EventType.USER_HELP_NEEDED, question.to_wire(), run)

    def publish_log(self, task_id: str, level: str, text: str, run: RunIdentity | None = None) -> int:
        """A line of the daemon's own for the task's clients (what it could not do for a run, say)."""
        return self._publish(task_id, EventType.LOG, event_data.log(level, text), run)

    def _publish(self, task_id: str, type_: EventType, data: dict[str, Any], run: RunIdentity | None) -> int:
        return self.hub.publish(task_id, run.id if run else "", run.agent if run else "", type_.value, data)
