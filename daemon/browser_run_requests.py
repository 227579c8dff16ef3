"""What one run asks of its project's browser: a call, a cancel — answered off the loop — and, when the run ends,
its tabs closed.

The project is the run's own and so is the browser session (the run id): a worker names neither, so a run reaches
only its project's browser and only its own tabs. Downloads go to the run's scratch directory, which the daemon
names, never the worker. While a call runs the run's idle clock is frozen (a page that takes its time is not the
agent being stuck); the call's deadline is the worker's, bounded by the run's own time left and
`[browser] command_timeout`.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, Protocol

from yagent.ipc.messages import BrowserCall, BrowserCallResult, BrowserCancel, ErrorReply, RunSpec
from yagent.ipc.records import Message
from yagent.ipc.state_layout import scratch_dir
from yagent.ipc.vocabulary import ErrorCode

from .browser_manager import BrowserManager
from .task_scope import TaskScope

__all__ = ["MAX_BROWSER_CALLS_IN_FLIGHT", "BrowserRunRequests"]

log = logging.getLogger(__name__)

MAX_BROWSER_CALLS_IN_FLIGHT = 8  # per run: its calls are serial at the browser anyway
MAX_CALL_TIMEOUT = 30 * 86400.0


class BrowserRunner(Protocol):
    id: str
    spec: RunSpec

    @property
    def project_id(self) -> str: ...

    def send(self, msg: Message) -> None: ...

    def time_left(self) -> float: ...

    def wait_began(self, reason: str) -> None: ...

    def wait_ended(self, reason: str) -> None: ...


class BrowserRunRequests:
    def __init__(self, run: BrowserRunner, manager: BrowserManager | None, scope: TaskScope, home: Path) -> None:
        self._run = run
        self._manager = manager
        self._scope = scope
        self._home = home
        self._in_flight: dict[int, asyncio.Task[Any]] = {}
        self._closed = False
        self._used = False

    def call(self, msg: BrowserCall) -> None:
        why = ""
        if self._manager is None:
            why = "this daemon runs no browsers"
        elif self._closed:
            why = "the run is ending"
        elif msg.id in self._in_flight:
            why = f"request id {msg.id} is already in flight"
        elif len(self._in_flight) >= MAX_BROWSER_CALLS_IN_FLIGHT:
            why = f"this run already has {MAX_BROWSER_CALLS_IN_FLIGHT} browser calls in flight"
        elif not msg.tool.startswith("browser_"):
            why = f"{msg.tool[:80]!r} is not a browser tool"
        if why:
            self._run.send(ErrorReply(id=msg.id, code=ErrorCode.BAD_REQUEST, message=why))
            return
        manager = self._manager
        assert manager is not None
        asked = msg.timeout if 0 < msg.timeout < MAX_CALL_TIMEOUT else 0.0
        limits = [t for t in (asked, self._run.time_left()) if t > 0]
        timeout = min(limits) if limits else 0.0
        self._used = True

        async def answered() -> None:
            self._run.wait_began("browser")
            try:
                reply = await manager.call(self._run.project_id, self._run.spec.project_root, self._run.id, msg.tool,
                                           msg.arguments, downloads=str(scratch_dir(self._home, self._run.id)),
                                           timeout=timeout)
                answer: Message = BrowserCallResult(id=msg.id, content=reply.content, is_error=reply.is_error,
                                                    image=reply.image, url=reply.url)
            except asyncio.CancelledError:
                return
            except Exception as exc:  # a bug: the worker must still hear back
                log.exception("browser call %s of run %s failed", msg.tool, self._run.id)
                answer = ErrorReply(id=msg.id, code=ErrorCode.INTERNAL,
                                    message=f"yagentd failed to handle the browser call: {exc}; see the daemon log")
            finally:
                self._in_flight.pop(msg.id, None)
                self._run.wait_ended("browser")
            self._run.send(answer)

        self._in_flight[msg.id] = self._scope.spawn(f"browser-{msg.tool}"[:80], answered())

    def cancel(self, msg: BrowserCancel) -> None:
        task = self._in_flight.get(msg.call)
        if task is not None:
            task.cancel()

    def close(self) -> None:
        """The run ended: its calls are withdrawn and its tabs closed."""
        if self._closed:
            return
        self._closed = True
        for task in list(self._in_flight.values()):
            task.cancel()
        if self._used and self._manager is not None:
            self._manager.release(self._run.project_id, self._run.id)
