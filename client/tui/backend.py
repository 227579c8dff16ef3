"""The TUI's one edge to the daemon: a narrow interface and its ZeroMQ implementation.

The controller only ever talks to a `Backend`, so the whole client can be driven by an in-memory
double in unit tests (tests/client/doubles.py) and by a real yagentd end to end.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol

from yagent.ipc import DaemonClient, EventStream, daemon_listening
from yagent.ipc.messages import (
    Ack,
    Answer,
    BlueprintShown,
    CompactContext,
    Event,
    ListTasks,
    McpStatusReply,
    McpStatusRequest,
    ShowBlueprint,
    Submit,
    Submitted,
    TaskControl,
    TaskDetail,
    TaskDiff,
    TaskDiffReply,
    TaskInfo,
    TaskList,
    TaskSummary,
    TaskUndo,
    TaskUndoReply,
)

from ..answerer import answerer

__all__ = ["Backend", "DaemonBackend", "TaskEvents"]


class TaskEvents(Protocol):
    """One task's events: what the daemon already has, then everything new, in seq order."""

    async def __aenter__(self) -> TaskEvents: ...

    async def __aexit__(self, *exc: object) -> None: ...

    async def backlog(self) -> list[Event]: ...

    def events(self) -> AsyncIterator[Event]: ...


class Backend(Protocol):
    async def connect(self) -> None: ...

    async def close(self) -> None: ...

    async def alive(self) -> bool: ...

    async def task_info(self, task: str) -> TaskDetail: ...

    async def list_tasks(self, project: str | None, limit: int = 50) -> list[TaskSummary]: ...

    async def submit(self, project: str, text: str, *, task: str | None, agent: str, yolo: str,
                     options: dict[str, Any], env: dict[str, str]) -> Submitted: ...

    async def control(self, task: str, action: str, env: dict[str, str] | None = None) -> Ack: ...

    async def compact(self, task: str) -> Ack: ...

    async def answer(self, task: str, request_id: str, value: str) -> Ack: ...

    async def mcp_status(self, project: str) -> McpStatusReply: ...

    async def task_diff(self, task: str) -> TaskDiffReply: ...

    async def blueprint(self, project: str, module: str) -> BlueprintShown: ...

    async def task_undo(self, task: str, *, to: int, apply: bool, force: bool) -> TaskUndoReply: ...

    def stream(self, task: str, after_seq: int) -> TaskEvents: ...


class DaemonBackend:
    """A `DaemonClient` on control.sock plus `EventStream`s on events.sock.

    Requests time out after `timeout` seconds so that a daemon that stopped answering shows up as
    an error on screen instead of a frozen client.
    """

    def __init__(self, runtime_dir: Path | None = None, *, timeout: float = 5.0, idle_poll: float = 1.0) -> None:
        self.runtime_dir = runtime_dir
        self.timeout = timeout
        self.idle_poll = idle_poll
        self.client: DaemonClient | None = None

    async def connect(self) -> None:
        await self.close()
        client = DaemonClient(self.runtime_dir, timeout=self.timeout, connect_timeout=self.timeout)
        await client.connect()
        self.client = client

    async def close(self) -> None:
        if self.client is not None:
            client, self.client = self.client, None
            await client.close()

    def _c(self) -> DaemonClient:
        if self.client is None:
            raise RuntimeError("DaemonBackend used before connect()")
        return self.client

    async def alive(self) -> bool:
        client = self.client
        if client is None or client.paths is None:
            return False
        # A plain Unix connect: refused at once when the daemon is gone, no ZeroMQ retry loop.
        return await asyncio.to_thread(daemon_listening, client.paths)

    async def task_info(self, task: str) -> TaskDetail:
        return await self._c().request(TaskInfo(id=0, task=task), TaskDetail)

    async def list_tasks(self, project: str | None, limit: int = 50) -> list[TaskSummary]:
        reply = await self._c().request(ListTasks(id=0, project=project, limit=limit), TaskList)
        return list(reply.tasks)

    async def mcp_status(self, project: str) -> McpStatusReply:
        return await self._c().request(McpStatusRequest(id=0, project=project), McpStatusReply)

    async def blueprint(self, project: str, module: str) -> BlueprintShown:
        return await self._c().request(ShowBlueprint(id=0, project=project, module=module), BlueprintShown)

    async def task_diff(self, task: str) -> TaskDiffReply:
        return await self._c().request(TaskDiff(id=0, task=task), TaskDiffReply)

    async def task_undo(self, task: str, *, to: int, apply: bool, force: bool) -> TaskUndoReply:
        return await self._c().request(TaskUndo(id=0, task=task, to=to, apply=apply, force=force), TaskUndoReply)

    async def submit(self, project: str, text: str, *, task: str | None, agent: str, yolo: str,
                     options: dict[str, Any], env: dict[str, str]) -> Submitted:
        return await self._c().request(Submit(id=0, project=project, text=text, task=task, agent=agent, yolo=yolo,
                                              options=options, env=env), Submitted)

    async def control(self, task: str, action: str, env: dict[str, str] | None = None) -> Ack:
        return await self._c().request(TaskControl(id=0, task=task, action=action, env=env or {}), Ack)

    async def compact(self, task: str) -> Ack:
        return await self._c().request(CompactContext(id=0, task=task), Ack)

    async def answer(self, task: str, request_id: str, value: str) -> Ack:
        return await self._c().request(Answer(id=0, task=task, request_id=request_id, answer={"value": value},
                                              by=answerer("yagent")), Ack)

    def stream(self, task: str, after_seq: int) -> TaskEvents:
        return EventStream(self._c(), task, after_seq=after_seq, idle_poll=self.idle_poll)
