"""In-memory state of what is alive: tasks with a turn in flight and their runs.

The registry (SQLite) is the durable record; these objects hold what only matters while processes
live — handles, clocks, pools, pending questions — and die with the turn.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from yagent.ipc.messages import Question, RunOutcome, RunResult, RunSpec
from yagent.ipc.vocabulary import RunStatus, StopReason

from .admission import DelegationPool
from .launcher import RunHandle
from .registry import TaskRow
from .run_clock import RunClock

__all__ = ["LiveRun", "LiveTask", "PendingQuestion"]


@dataclass(slots=True)
class PendingQuestion:
    question: Question
    run: LiveRun
    reply_to: int  # the worker's AskUser request id


@dataclass(eq=False, slots=True)
class LiveRun:
    id: str
    task: LiveTask
    turn: int
    agent: str
    spec: RunSpec
    pool: DelegationPool
    parent: LiveRun | None = None
    call_id: str = ""
    reply_to: int | None = None  # the parent's DelegateRequest id
    status: RunStatus = RunStatus.QUEUED
    handle: RunHandle | None = None
    pid: int = 0
    clock: RunClock | None = None
    connected: bool = False
    launched_at: float = 0.0
    children: dict[str, LiveRun] = field(default_factory=dict)
    result: RunResult | None = None
    finished: bool = False
    forced_stop: StopReason | None = None
    forced_detail: str = ""
    stopping: bool = False
    queued_leases: set[int] = field(default_factory=set)  # lease requests still waiting for a slot
    exited: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def is_delegation(self) -> bool:
        return self.parent is not None

    @property
    def waiting_on_children(self) -> bool:
        return any(not child.finished for child in self.children.values())


@dataclass(eq=False, slots=True)
class LiveTask:
    row: TaskRow
    paused: bool = False
    turn: int = 0
    root: LiveRun | None = None
    turn_clock: RunClock | None = None
    runs: dict[str, LiveRun] = field(default_factory=dict)
    questions: dict[str, PendingQuestion] = field(default_factory=dict)
    root_outcome: RunOutcome | None = None  # set when the root run ends; the turn ends with its last run

    @property
    def id(self) -> str:
        return self.row.id

    @property
    def in_flight(self) -> bool:
        """A turn is in flight until its root run and every run it started have finished."""
        if self.root is None:
            return False
        return not self.root.finished or any(not r.finished for r in self.runs.values() if r.turn == self.turn)
