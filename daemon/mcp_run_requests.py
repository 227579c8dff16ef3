"""What one run asks of its project's MCP servers: their tools, a call, a cancel — answered off the loop.

Each request is a task of the daemon's scope, kept by request id so that the worker's `mcp_cancel` and the
run's end cancel it (a cancelled run cancels its calls at the server). The project is the run's own — a worker
never names one — so a run reaches only its project's servers. While a run waits for a listing (a required
server coming up) or a call, its idle clock is frozen: the server's progress watchdog and the caller's deadline
judge the call, and waiting on a server is not the agent being stuck.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, Protocol

from yagent.ipc.messages import (
    ErrorReply,
    McpCall,
    McpCallResult,
    McpCancel,
    McpToolsReply,
    McpToolsRequest,
)
from yagent.ipc.records import Message
from yagent.ipc.vocabulary import ErrorCode

from .mcp_manager import McpManager, McpUnavailable
from .task_scope import TaskScope

__all__ = ["MAX_CALLS_IN_FLIGHT", "McpRunRequests", "McpRunner"]

log = logging.getLogger(__name__)

MAX_CALLS_IN_FLIGHT = 64  # per run: a worker flooding calls is refused, never queued without bound
MAX_CALL_TIMEOUT = 30 * 86400.0  # a deadline further off than this is none (and inf, nan never reach a timer)


class McpRunner(Protocol):
    """What the requests need of their run (`RunSupervisor`)."""

    id: str

    @property
    def project_id(self) -> str: ...

    def send(self, msg: Message) -> None: ...

    def time_left(self) -> float: ...  # before the run's own timeout stops it; 0: none

    def wait_began(self, reason: str) -> None: ...

    def wait_ended(self, reason: str) -> None: ...


class McpRunRequests:
    def __init__(self, run: McpRunner, manager: McpManager | None, scope: TaskScope) -> None:
        self._run = run
        self._manager = manager
        self._scope = scope
        self._in_flight: dict[int, asyncio.Task[Any]] = {}
        self._closed = False

    def __len__(self) -> int:
        return len(self._in_flight)

    def list_tools(self, msg: McpToolsRequest) -> None:
        if self._refused(msg.id):
            return
        manager = self._manager
        assert manager is not None
        wait_for = [w for w in msg.wait_for if isinstance(w, str)][:64]

        async def answer() -> Message:
            try:
                found = await manager.tools_for(self._run.project_id, wait_for)
            except McpUnavailable as exc:
                return ErrorReply(id=msg.id, code=ErrorCode.MCP_UNAVAILABLE, message=str(exc))
            return McpToolsReply(id=msg.id, generation=found.generation, tools=found.tools, servers=found.servers)

        self._spawn(msg.id, "mcp-tools", answer())

    def call(self, msg: McpCall) -> None:
        if self._refused(msg.id):
            return
        manager = self._manager
        assert manager is not None
        if not msg.server or not msg.tool:
            self._run.send(ErrorReply(id=msg.id, code=ErrorCode.BAD_REQUEST,
                                      message="mcp_call names a server and a tool"))
            return
        # The caller's deadline: what the worker asks (nan, negative or 0: nothing), bounded by the run's own.
        asked = msg.timeout if 0 < msg.timeout < MAX_CALL_TIMEOUT else 0.0
        limits = [t for t in (asked, self._run.time_left()) if t > 0]
        timeout = min(limits) if limits else 0.0

        async def answer() -> Message:
            try:
                content, is_error = await manager.call(self._run.project_id, msg.server, msg.tool, msg.arguments,
                                                       timeout=timeout)
            except McpUnavailable as exc:
                return McpCallResult(id=msg.id, content=str(exc), is_error=True)
            return McpCallResult(id=msg.id, content=content, is_error=is_error)

        self._spawn(msg.id, f"mcp-call-{msg.server}-{msg.tool}"[:80], answer())

    def cancel(self, msg: McpCancel) -> None:
        task = self._in_flight.get(msg.call)
        if task is not None:
            task.cancel()

    def close(self) -> None:
        """The run ended: every request it had in flight is cancelled (calls at their servers too)."""
        self._closed = True
        for task in list(self._in_flight.values()):
            task.cancel()

    def _refused(self, request_id: int) -> bool:
        why = ""
        if self._manager is None:
            why = "MCP servers are not available in this daemon"
        elif self._closed:
            why = "the run is ending"
        elif request_id in self._in_flight:
            why = f"request id {request_id} is already in flight"
        elif len(self._in_flight) >= MAX_CALLS_IN_FLIGHT:
            why = f"this run already has {MAX_CALLS_IN_FLIGHT} MCP requests in flight; wait for their results"
        if why:
            code = ErrorCode.MCP_UNAVAILABLE if self._manager is None else ErrorCode.BAD_REQUEST
            self._run.send(ErrorReply(id=request_id, code=code, message=why))
        return bool(why)

    def _spawn(self, request_id: int, name: str, work: Coroutine[Any, Any, Message]) -> None:
        async def answered() -> None:
            self._run.wait_began("mcp")
            try:
                reply = await work
            except asyncio.CancelledError:
                return  # withdrawn, or the run ended: nobody waits for a reply
            except Exception as exc:  # a bug: the worker must still hear back, or it waits forever
                log.exception("MCP request %s of run %s failed", name, self._run.id)
                reply = ErrorReply(id=request_id, code=ErrorCode.INTERNAL,
                                   message=f"yagentd failed to handle the MCP request: {exc}; see the daemon log")
            finally:
                self._in_flight.pop(request_id, None)
                self._run.wait_ended("mcp")
            self._run.send(reply)

        task = self._scope.spawn(name, answered())
        task.add_done_callback(lambda _t: work.close())  # cancelled before its first step: never awaited
        self._in_flight[request_id] = task
