"""The data of every event the daemon stamps itself, declared once: the daemon builds these records to
publish, clients read them back with `read` (lenient: an event log written by another version yields
defaults for what it lacks, never an exception).

Events agents emit inside workers are built by the functions in `event_data`; a question waiting for
the user (`user_help_needed`) carries a `messages.Question`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from typing import Any, ClassVar, TypeVar

from .messages import Question, SubagentInfo
from .records import Record, record
from .vocabulary import EventType, RunStatus, StopReason, TaskState, TurnEndChoice

__all__ = [
    "DAEMON_EVENT_DATA",
    "RUN_INPUT_PREVIEW",
    "BackgroundWork",
    "DaemonEvent",
    "LlmSlotWait",
    "RunFinished",
    "RunQueued",
    "RunStarted",
    "TaskPaused",
    "TaskResumed",
    "TurnFinished",
    "TurnStarted",
    "UserHelpResponse",
    "read_daemon_event",
]

# How much of a run's input its run_started event repeats.
RUN_INPUT_PREVIEW = 2000


class DaemonEvent(Record):
    """Event data the daemon stamps; `event` is the type it is published as."""

    __slots__ = ()
    event: ClassVar[EventType]


D = TypeVar("D", bound=type[DaemonEvent])
DAEMON_EVENT_DATA: dict[EventType, type[Record]] = {EventType.USER_HELP_NEEDED: Question}


def _daemon_event(event: EventType) -> Callable[[D], D]:
    def register(cls: D) -> D:
        cls.event = event
        cls = record(cls)
        DAEMON_EVENT_DATA[event] = cls
        return cls

    return register


@_daemon_event(EventType.TURN_STARTED)
class TurnStarted(DaemonEvent):
    turn: int = 0
    text: str = ""
    agent: str = ""
    project: str = ""
    resumes: int = 0  # the interrupted turn this one continues (`yagent continue`); 0 for a new message


@_daemon_event(EventType.TURN_FINISHED)
class TurnFinished(DaemonEvent):
    """A turn ended: its root run and every run it started have ended. `run` is the root run."""

    turn: int = 0
    state: TaskState = TaskState.FAILED
    status: RunStatus = RunStatus.FAILED
    stop_reason: StopReason = StopReason.UNACCOUNTED
    output: str = ""
    error: str = ""
    run: str = ""


@_daemon_event(EventType.RUN_QUEUED)
class RunQueued(DaemonEvent):
    """A delegation was admitted and waits for a slot; published under the parent run."""

    agent: str = ""
    parent: str = ""
    call_id: str = ""
    run: str = ""  # the new child run
    subagent: str = ""  # the sub-agent it is a run of
    followup: bool = False  # it continues that sub-agent's conversation (if its configuration still matches)
    background: TurnEndChoice | None = None  # started in the background, and what the turn's end does with it


@_daemon_event(EventType.RUN_STARTED)
class RunStarted(DaemonEvent):
    agent: str = ""
    parent: str | None = None
    call_id: str = ""
    pid: int = 0
    depth: int = 0
    input: str = ""  # the first RUN_INPUT_PREVIEW characters of the task
    unconfined: str = ""  # an `Unconfined` reason when the kernel does not confine the run ("" when it does)
    subagent: str = ""  # the sub-agent it is a run of ("" for a root run)
    # Where its start went, in milliseconds: queued for a slot, then from the launch to the pid and to the hello.
    queued_ms: float = 0.0
    forked_ms: float = 0.0
    hello_ms: float = 0.0
    warm: bool = False  # its worker was forked before the run wanted it
    prefaulted: int = 0  # pages its warm worker copied on write before the run (`yagent.workers.page_warmth`)
    rules_ahead: int = 0  # Landlock rules its warm worker added to its ruleset before the run


@_daemon_event(EventType.RUN_FINISHED)
class RunFinished(DaemonEvent):
    status: RunStatus = RunStatus.FAILED
    stop_reason: StopReason = StopReason.UNACCOUNTED
    error: str = ""
    output: str = ""
    parent: str | None = None
    call_id: str = ""
    cpu_seconds: float = 0.0


@_daemon_event(EventType.BACKGROUND_WORK)
class BackgroundWork(DaemonEvent):
    """The sub-agents a finished turn left working in the background, published whenever that set changes;
    empty once they have all ended, and the task is then in `state`."""

    running: list[SubagentInfo] = field(default_factory=list)
    state: TaskState = TaskState.BACKGROUND


@_daemon_event(EventType.TASK_PAUSED)
class TaskPaused(DaemonEvent):
    turn: int = 0


@_daemon_event(EventType.TASK_RESUMED)
class TaskResumed(DaemonEvent):
    turn: int = 0


@_daemon_event(EventType.USER_HELP_RESPONSE)
class UserHelpResponse(DaemonEvent):
    """A question closed: answered by a client, or withdrawn by the daemon (`answer` = {"cancelled": True})."""

    request_id: str = ""
    answer: dict = field(default_factory=dict)
    by: str = ""

    @classmethod
    def withdrawn(cls, request_id: str) -> UserHelpResponse:
        """The question's run ended before anyone answered."""
        return cls(request_id=request_id, answer={"cancelled": True}, by="daemon")

    @property
    def cancelled(self) -> bool:
        return bool(self.answer.get("cancelled"))


@_daemon_event(EventType.LLM_SLOT_WAIT)
class LlmSlotWait(DaemonEvent):
    """A run queues for an in-flight request slot (`waiting`), or its wait is over."""

    waiting: bool = False
    limit: int = 0


def read_daemon_event(type_: str, data: Any) -> Record | None:
    """The typed data of a daemon-stamped event; None for other types or unreadable data."""
    cls = DAEMON_EVENT_DATA.get(type_)  # type: ignore[call-overload]
    return cls.read(data) if cls is not None else None
