"""An in-memory daemon for the TUI's unit tests, speaking the `Backend` interface.

It keeps tasks, events with daemon-style seq numbers, pending questions, and records what the client
asked for. Events emitted while a stream is open reach it through a queue, as PUB would deliver them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from prompt_toolkit.data_structures import Size
from prompt_toolkit.output import DummyOutput

from yagent.ipc.errors import DaemonNotRunning, RemoteError
from yagent.ipc.messages import (
    Ack,
    BlueprintShown,
    Event,
    McpServerStatus,
    McpStatusReply,
    Question,
    Submitted,
    TaskDetail,
    TaskDiffReply,
    TaskSummary,
    TaskUndoReply,
    TurnSummary,
)
from yagent.ipc.vocabulary import ErrorCode, EventType


class SizedOutput(DummyOutput):
    """prompt_toolkit's DummyOutput with a terminal size the test chooses (and may change)."""

    def __init__(self, columns: int = 80, rows: int = 24) -> None:
        self.size = Size(rows=rows, columns=columns)
        self.mouse_reported = False  # whether the terminal was asked to report the mouse (the wheel)

    def get_size(self) -> Size:
        return self.size

    def enable_mouse_support(self) -> None:
        self.mouse_reported = True

    def disable_mouse_support(self) -> None:
        self.mouse_reported = False


class FakeStream:
    def __init__(self, backend: FakeBackend, task: str, after_seq: int) -> None:
        self.backend = backend
        self.task = task
        self.delivered = after_seq
        self.queue: asyncio.Queue[Event] = asyncio.Queue()

    async def __aenter__(self) -> FakeStream:
        self.backend.streams.append(self)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.backend.streams.remove(self)

    async def backlog(self) -> list[Event]:
        out = [e for e in self.backend.events.get(self.task, []) if e.seq > self.delivered]
        if out:
            self.delivered = out[-1].seq
        return out

    async def events(self) -> AsyncIterator[Event]:
        for ev in await self.backlog():
            yield ev
        while True:
            ev = await self.queue.get()
            if ev.seq > self.delivered:
                self.delivered = ev.seq
                yield ev


class FakeBackend:
    def __init__(self, project: str = "/work/project") -> None:
        self.project = project
        self.tasks: dict[str, TaskSummary] = {}
        self.turns: dict[str, list[TurnSummary]] = {}
        self.events: dict[str, list[Event]] = {}
        self.streams: list[FakeStream] = []
        self.submitted: list[dict[str, Any]] = []
        self.answers: list[tuple[str, str, str]] = []
        self.controls: list[tuple[str, str]] = []
        self.compactions: list[str] = []
        self.mcp_servers: list[McpServerStatus] = []
        self.diff_reply: TaskDiffReply | None = None  # what `task_diff` answers (default: nothing changed)
        self.undo_replies: list[TaskUndoReply] = []  # what each `task_undo` answers, in turn
        self.undos: list[dict[str, Any]] = []
        self.connected = False
        self.alive_flag = True
        self.busy = False
        self.connects = 0
        self.notice = ""  # what a submit's reply says of a provider picked from the environment

    # -- scripting ---------------------------------------------------------------------------------

    def add_task(self, task: str, *, state: str = "idle", title: str = "a task", updated: float = 0.0) -> TaskSummary:
        summary = TaskSummary(task=task, project=self.project, title=title, state=state, created_at=updated or 1.0,
                              updated_at=updated or time.time())
        self.tasks[task] = summary
        self.events.setdefault(task, [])
        self.turns.setdefault(task, [])
        return summary

    def emit(self, task: str, type_: str, data: dict[str, Any] | None = None, *, run: str = "r1",
             agent: str = "director", ts: float | None = None) -> Event:
        events = self.events.setdefault(task, [])
        ev = Event(len(events) + 1, task, run, agent, type_, ts if ts is not None else time.time(), data or {})
        events.append(ev)
        for stream in self.streams:
            if stream.task == task:
                stream.queue.put_nowait(ev)
        return ev

    def ask(self, task: str, request_id: str, kind: str, prompt: str, *, options: list[str] | None = None,
            run: str = "r1", agent: str = "director", details: dict[str, Any] | None = None) -> Question:
        q = Question(request_id=request_id, kind=kind, prompt=prompt, options=options or [], task=task, run=run,
                     agent=agent, asked_at=time.time(), details=details or {})
        self.tasks[task].questions.append(q)
        self.emit(task, EventType.USER_HELP_NEEDED, q.to_wire(), run=run, agent=agent)
        return q

    def respond(self, task: str, request_id: str, value: str, by: str = "client") -> None:
        summary = self.tasks[task]
        summary.questions = [q for q in summary.questions if q.request_id != request_id]
        self.emit(task, EventType.USER_HELP_RESPONSE, {"request_id": request_id, "answer": {"value": value}, "by": by})

    # -- Backend -----------------------------------------------------------------------------------

    async def connect(self) -> None:
        if not self.alive_flag:
            raise DaemonNotRunning("/tmp/fake")
        self.connected = True
        self.connects += 1

    async def close(self) -> None:
        self.connected = False

    async def alive(self) -> bool:
        return self.alive_flag

    async def task_info(self, task: str) -> TaskDetail:
        if task not in self.tasks:
            raise RemoteError(ErrorCode.UNKNOWN_TASK, f"no task {task!r}; `yagent ps` lists tasks")
        return TaskDetail(id=0, task=self.tasks[task], turns=list(self.turns[task]))

    async def mcp_status(self, project: str) -> McpStatusReply:
        return McpStatusReply(id=0, servers=list(self.mcp_servers))

    async def blueprint(self, project: str, module: str) -> BlueprintShown:
        return BlueprintShown(id=0, project=project, text=f"{project}: 3 modules, 9 source files, 2 import edges")

    async def task_diff(self, task: str) -> TaskDiffReply:
        return self.diff_reply or TaskDiffReply(id=0, task=task, note="no Coding sub-task has changed the project yet")

    async def task_undo(self, task: str, *, to: int, apply: bool, force: bool) -> TaskUndoReply:
        self.undos.append({"task": task, "to": to, "apply": apply, "force": force})
        return self.undo_replies.pop(0)

    async def list_tasks(self, project: str | None, limit: int = 50) -> list[TaskSummary]:
        rows = [t for t in self.tasks.values() if project is None or t.project == project]
        return sorted(rows, key=lambda t: t.updated_at, reverse=True)[:limit]

    async def submit(self, project: str, text: str, *, task: str | None, agent: str, yolo: str,
                     options: dict[str, Any], env: dict[str, str]) -> Submitted:
        if self.busy:
            raise RemoteError("busy", f"task {task} is still working on turn 1; wait for it to finish")
        self.submitted.append({"project": project, "text": text, "task": task, "agent": agent, "yolo": yolo,
                               "options": dict(options), "env": dict(env)})
        if task is None:
            task = f"t{len(self.tasks) + 1:04d}"
            self.add_task(task, state="running", title=text[:40])
        turn = len(self.turns[task]) + 1
        self.turns[task].append(TurnSummary(turn=turn, text=text, state="running"))
        self.emit(task, EventType.TURN_STARTED, {"turn": turn, "text": text, "agent": agent, "project": project},
                  run=f"{task}.r{turn}", agent=agent)
        return Submitted(id=0, task=task, turn=turn, run=f"{task}.r{turn}", project=project, notice=self.notice)

    async def control(self, task: str, action: str, env: dict[str, str] | None = None) -> Ack:
        self.controls.append((task, action))
        return Ack(id=0, task=task, state="running", detail=action)

    async def compact(self, task: str) -> Ack:
        """Like yagentd: a task with no turn running has nothing to compact."""
        if self.tasks[task].state not in ("running", "waiting", "paused"):
            raise RemoteError(ErrorCode.NOT_RUNNING, f"task {task} has no turn in progress")
        self.compactions.append(task)
        return Ack(id=0, task=task, state="running", detail="director compacts its context before its next model call")

    async def answer(self, task: str, request_id: str, value: str) -> Ack:
        self.answers.append((task, request_id, value))
        if not any(q.request_id == request_id for q in self.tasks[task].questions):
            raise RemoteError(ErrorCode.NO_QUESTION, f"question {request_id!r} of task {task} is not pending")
        self.respond(task, request_id, value)
        return Ack(id=0, task=task, state="running", detail="answered")

    def stream(self, task: str, after_seq: int) -> FakeStream:
        return FakeStream(self, task, after_seq)
