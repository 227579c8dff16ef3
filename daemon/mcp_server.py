"""One MCP server of one project, supervised: its connection from spawn to kill, its state, its tool list, its calls.

`McpServer.run` is the server's whole life and the owner of everything it starts: each connection's tasks
(the process's pipes, the SDK session, tool discovery) belong to a task group inside it, so nothing outlives
the connection and no failure goes unseen. A connection that ends by itself (the server crashed or exited) is
made again after a backoff; `restart` makes it again at once; `stop` ends it for good. A server's failure is
its state (`McpState`, the last error, its stderr), never the daemon's.

Discovery follows `notifications/tools/list_changed` without ever blocking the session's read loop: the
notification only bumps `_wanted` and wakes the discovery task. A listing publishes its tools only if no newer
notification arrived while it ran (else it lists again), so an older list can never overwrite a newer one — a
notification that arrives before the first listing, or during it, is never lost. Every published list bumps
`generation`, which runs compare to know when to ask again.

A call runs under a progress watchdog (`call_timeout` of silence, restarted by each progress notice) and the
caller's own deadline; cancelling it cancels it at the server (the SDK sends `notifications/cancelled`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from yagent.ipc.mcp_schema import normalize_input_schema
from yagent.ipc.mcp_settings import McpServerConfig
from yagent.ipc.mcp_status import render_status_lines
from yagent.ipc.messages import McpServerStatus, McpTool
from yagent.ipc.vocabulary import McpState

from .mcp_errors import McpUnavailable
from .mcp_process import StdioServer

__all__ = ["MAX_RESULT_CHARS", "McpServer", "McpUnavailable", "ServerHooks", "render_result"]

log = logging.getLogger(__name__)

BACKOFF_MIN = 1.0
BACKOFF_MAX = 60.0
STABLE_AFTER = 60.0  # a connection that lasted this long resets the backoff
LIST_RETRY = 30.0  # a degraded server's listing is tried again after this (or at its next list_changed)
MAX_PAGES = 100  # tools/list pages read at most (a server whose cursors never end)
MAX_TOOLS = 500  # tools of one server offered at most
MAX_SCHEMA_BYTES = 64 * 1024
MAX_DESCRIPTION = 4096
MAX_RESULT_CHARS = 512 * 1024  # what one call's result may carry to the worker (the model sees far less)
EXIT_NOTICE = 0.5  # after the session ended: how long the process's exit is awaited to say why it ended
RELIST_WAIT = 10.0  # how long a call that changed the tool list waits for the new list before it returns
STALE_LISTINGS = 5  # listings discarded in a row for newer notifications before one is published anyway
CLIENT_INFO = types.Implementation(name="yagent", version="0.1.0")
HTTP_PING_INTERVAL = 60.0  # a remote server is pinged when it has been quiet this long


@dataclass(slots=True)
class ServerHooks:
    """What a server tells its manager: a process started (record it) or gone, and a new tool list."""

    started: Callable[[McpServer, StdioServer], None]
    gone: Callable[[McpServer, StdioServer], None]
    tools_changed: Callable[[McpServer], None]


class _ConnectionEnded(Exception):
    pass


class McpServer:
    def __init__(self, project_id: str, project_root: Path, config: McpServerConfig, *, environ: Mapping[str, str],
                 hooks: ServerHooks, marker: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.project_id = project_id
        self.project_root = project_root
        self.config = config
        self.name = config.name
        self.marker = marker  # in the server's environment: a later daemon's sweep recognises its processes
        self._environ = environ
        self._hooks = hooks
        self._clock = clock
        self.state = McpState.STARTING if config.enabled else McpState.DISABLED
        self.generation = 0
        self.tools: list[McpTool] = []
        self.withheld: list[str] = []
        self.restarts = 0
        self.last_error = ""
        self.fix = ""
        self.pid = 0
        self.process: StdioServer | None = None
        self.settled = asyncio.Event()  # the state is not STARTING: a waiter for readiness may look now
        self._changed = asyncio.Event()  # replaced at every change of state, tools or restarts (`until`)
        self._ready_since = 0.0
        self._stderr: list[str] = []  # the last connection's tail, kept after its process is gone
        self._session: ClientSession | None = None
        self._tool_names: set[str] = set()
        self._wanted = 0  # list_changed notifications seen (and the first listing)
        self._published_for = -1  # the `_wanted` the last published listing started at
        self._relist = asyncio.Event()
        self._wake = asyncio.Event()  # ends the connection: a restart or a stop
        self._stopping = False
        self._restart_asked = False

    # -- life -----------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Connect, and connect again after a crash (with backoff) or a restart, until `stop`."""
        backoff = BACKOFF_MIN
        while not self._stopping:
            self._wake.clear()
            self._restart_asked = False
            self.fix = ""  # a failure of this attempt says what to do about it
            began = self._clock()
            self._set_state(McpState.STARTING)
            try:
                await self._connect_once()
            except _ConnectionEnded as ended:
                self._offline(str(ended))
            except Exception as exc:  # a server's failure is its state, never the daemon's
                log.warning("MCP server %s of %s failed", self.name, self.project_root, exc_info=True)
                self._offline(_describe(exc))
            if self._stopping:
                break
            self.restarts += 1
            self._touch()
            if self._restart_asked:
                backoff = BACKOFF_MIN
                continue
            if self._clock() - began >= STABLE_AFTER:
                backoff = BACKOFF_MIN
            again = f"yagentd tries again in {backoff:.0f}s; `yagent mcp restart {self.name}` does it now"
            self.fix = f"{self.fix}; {again}" if self.fix else again
            log.warning("MCP %s", render_status_lines([self.status()])[0])
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(backoff):
                    await self._wake.wait()
            backoff = min(backoff * 2, BACKOFF_MAX)
        self._set_state(McpState.DISABLED if not self.config.enabled else McpState.OFFLINE)

    async def until(self, predicate: Callable[[McpServer], bool]) -> None:
        """Wait until `predicate(self)` holds (checked at each change of state, tool list or restart count);
        the caller bounds the wait."""
        while not predicate(self):
            await self._changed.wait()

    def _touch(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def stop(self, why: str = "") -> None:
        """End the server for good (disabled, idle past its TTL, the daemon stopping)."""
        self._stopping = True
        if why:
            self.fix = why
        self._wake.set()

    def restart(self) -> None:
        self._restart_asked = True
        self._wake.set()

    def kill_now(self) -> None:
        """SIGKILL the server's process group at once: the daemon is going away and cannot wait."""
        if self.process is not None:
            self.process.kill_now()

    async def _connect_once(self) -> None:
        if self.config.url:
            await self._connect_http()
            return
        try:
            proc = await StdioServer.start(self.config, self.project_root, self._environ, self.marker)
        except (OSError, ValueError) as exc:
            self.fix = ("check its command and cwd in [[mcp.servers]] (or .mcp.json); `yagent mcp restart "
                        f"{self.name}` tries again")
            raise _ConnectionEnded(f"cannot start {self.config.command!r}: {_describe(exc)}") from None
        self.process, self.pid = proc, proc.pid
        self._hooks.started(self, proc)
        log.info("MCP server %s of %s started (pid %d): %s", self.name, self.project_root, proc.pid,
                 self.config.target())
        read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
        cancelled = False
        ended_by = ""
        try:
            async with asyncio.TaskGroup() as group:
                pump = group.create_task(proc.pump(read_writer, write_reader), name=f"mcp-pump-{self.name}")
                talk = group.create_task(self._talk(read_stream, write_stream), name=f"mcp-session-{self.name}")
                stderr = group.create_task(proc.read_stderr(), name=f"mcp-stderr-{self.name}")
                exited = group.create_task(proc.exited.wait())
                woken = group.create_task(self._wake.wait())
                done, _ = await asyncio.wait({pump, talk, exited, woken}, return_when=asyncio.FIRST_COMPLETED)
                if talk in done and not proc.exited.is_set():  # a crash closes the session a moment before the
                    await asyncio.wait({exited}, timeout=EXIT_NOTICE)  # exit is seen: the exit is the news then
                ended_by = "session" if talk in done and self.last_error and not proc.exited.is_set() else "process"
                for task in (pump, talk, exited, woken):
                    task.cancel()
                if not proc.exited.is_set():
                    await proc.stop()  # its last stderr lines arrive before the reader is let go
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1.0):
                        await asyncio.shield(stderr)
                stderr.cancel()
        except asyncio.CancelledError:
            cancelled = True
            raise
        finally:
            self._session = None
            self._stderr = list(proc.stderr_tail)
            if cancelled:  # the daemon is going away: no await may stand between it and the kill
                proc.kill_now()
                proc.release()
            else:
                await proc.stop()
            self._hooks.gone(self, proc)
            self.process, self.pid = None, 0
        if not self._stopping and not self._restart_asked:
            # When it stopped answering (or answered nonsense), that is the news; else how its process ended.
            raise _ConnectionEnded(self.last_error if ended_by == "session"
                                   else proc.problem or f"the server {proc.exit_text()}")

    async def _connect_http(self) -> None:
        headers = dict(self.config.headers)
        token = self.config.bearer_token
        if self.config.bearer_token_env:
            token = self._environ.get(self.config.bearer_token_env, "")
            if not token:
                self.fix = (f"set {self.config.bearer_token_env} in yagentd's environment (the systemd unit's "
                            "Environment=, or the shell that starts yagentd), then `yagent mcp restart "
                            f"{self.name}`")
                raise _ConnectionEnded(f"bearer_token_env {self.config.bearer_token_env} is not set in yagentd's "
                                       "environment")
        if token:
            headers["Authorization"] = f"Bearer {token}"
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0)) as http, \
                streamable_http_client(self.config.url, http_client=http) as (read_stream, write_stream), \
                asyncio.TaskGroup() as group:
            talk = group.create_task(self._talk(read_stream, write_stream), name=f"mcp-session-{self.name}")
            woken = group.create_task(self._wake.wait())
            await asyncio.wait({talk, woken}, return_when=asyncio.FIRST_COMPLETED)
            talk.cancel()
            woken.cancel()
        if not self._stopping and not self._restart_asked:
            raise _ConnectionEnded(self.last_error or "the connection ended")

    async def _talk(self, read_stream: Any, write_stream: Any) -> None:
        """Initialize, then keep the tool list current until the connection ends. Returns on any failure,
        with `last_error` saying what it was: the connection ends with it."""
        try:
            async with ClientSession(read_stream, write_stream, message_handler=self._on_message,
                                     client_info=CLIENT_INFO) as session:
                try:
                    async with asyncio.timeout(self.config.startup_timeout):
                        await session.initialize()
                except TimeoutError:
                    self.last_error = (f"it did not answer initialize within {self.config.startup_timeout:.0f}s "
                                       "(startup_timeout)")
                    return
                self._session = session
                await self._discover(session)
        except (MCPError, OSError, ValueError, RuntimeError, TimeoutError, anyio.BrokenResourceError,
                anyio.ClosedResourceError, httpx2.HTTPError) as exc:
            self.last_error = _describe(exc)
        except Exception as exc:  # pydantic and anything else the SDK raises on a reply it cannot read
            unreadable = type(exc).__name__ == "ValidationError"
            self.last_error = f"its replies could not be read ({_describe(exc)})" if unreadable else _describe(exc)

    # -- discovery ------------------------------------------------------------------------------------

    async def _on_message(self, message: Any) -> None:
        """The session's notification hook: it must never block, so it only records and wakes."""
        if isinstance(message, types.ToolListChangedNotification):
            self._wanted += 1
            self._relist.set()
        elif isinstance(message, Exception):
            log.info("MCP server %s of %s: %s", self.name, self.project_root, message)

    async def _discover(self, session: ClientSession) -> None:
        stale = 0
        while True:
            self._relist.clear()
            asked = self._wanted
            try:
                async with asyncio.timeout(self.config.startup_timeout):
                    listed = await self._list_all(session)
            except (TimeoutError, MCPError, ValueError) as exc:
                reason = "it did not finish listing its tools within " \
                         f"{self.config.startup_timeout:.0f}s" if isinstance(exc, TimeoutError) else _describe(exc)
                self.last_error = f"tools/list failed: {reason}"
                self.fix = f"it is alive but offers no tools; yagentd lists again in {LIST_RETRY:.0f}s or at its " \
                           f"next list_changed; `yagent mcp restart {self.name}` starts it again"
                self._set_state(McpState.DEGRADED)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(LIST_RETRY):
                        await self._relist.wait()
                continue
            if self._wanted != asked and stale < STALE_LISTINGS:
                stale += 1  # the list changed while it was read: this one may be older than the server's
                continue
            stale = 0
            self._published_for = asked
            self._publish(listed)
            await self._until_relist(session)

    async def _until_relist(self, session: ClientSession) -> None:
        """Wait for the next list_changed. A remote server's end shows no process exit, so it is pinged
        meanwhile: a failed ping ends the connection (and it is made again)."""
        if not self.config.url:
            await self._relist.wait()
            return
        while not self._relist.is_set():
            try:
                async with asyncio.timeout(HTTP_PING_INTERVAL):
                    await self._relist.wait()
            except TimeoutError:
                async with asyncio.timeout(HTTP_PING_INTERVAL):
                    await session.send_ping()

    async def _list_all(self, session: ClientSession) -> list[types.Tool]:
        tools: list[types.Tool] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _page in range(MAX_PAGES):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            result = await session.list_tools(params=params)
            tools.extend(result.tools)
            cursor = result.next_cursor
            if not cursor:
                return tools
            if cursor in seen:
                raise ValueError(f"its tool list repeats the page cursor {cursor[:40]!r}")
            seen.add(cursor)
        raise ValueError(f"its tool list runs past {MAX_PAGES} pages")

    def _publish(self, listed: list[types.Tool]) -> None:
        offered: list[McpTool] = []
        withheld: list[str] = []
        for tool in listed:
            reason = self._withhold_reason(tool, len(offered))
            schema, problem = normalize_input_schema(tool.input_schema) if not reason else (None, "")
            if reason or schema is None:
                withheld.append(f"{tool.name[:80]}: {reason or problem}")
                continue
            read_only = bool(tool.annotations and tool.annotations.read_only_hint is True) \
                or tool.name in self.config.read_only
            offered.append(McpTool(server=self.name, name=tool.name,
                                   description=(tool.description or tool.title or "")[:MAX_DESCRIPTION],
                                   input_schema=schema, write=not read_only))
        self.tools, self.withheld = offered, withheld
        self._tool_names = {t.name for t in offered}
        self.generation += 1
        self.last_error, self.fix = "", ""
        self._set_state(McpState.READY)  # touches: a waiter sees the new generation
        log.info("MCP %s%s", render_status_lines([self.status()])[0],
                 f"; {len(withheld)} tools withheld (`yagent mcp` says why)" if withheld else "")
        self._hooks.tools_changed(self)

    def _withhold_reason(self, tool: types.Tool, offered: int) -> str:
        annotations = tool.annotations
        read_only = bool(annotations and annotations.read_only_hint is True) or tool.name in self.config.read_only
        if not read_only and not self.config.allow_write:
            how = "annotated as writing" if annotations and annotations.read_only_hint is False else \
                "not annotated readOnlyHint"
            return (f"it may change things ({how}); list it in read_only if it only reads, or set allow_write = "
                    "true to offer it (each call then needs your authorisation)")
        if offered >= MAX_TOOLS:
            return f"the server offers more than {MAX_TOOLS} tools"
        try:
            size = len(json.dumps(tool.input_schema))
        except (TypeError, ValueError):
            return "its input schema is not JSON"
        if size > MAX_SCHEMA_BYTES:
            return f"its input schema is {size} bytes, over {MAX_SCHEMA_BYTES}"
        return ""

    # -- calls ----------------------------------------------------------------------------------------

    async def call(self, tool: str, arguments: dict[str, Any], *, timeout: float = 0.0) -> tuple[str, bool]:
        """(the result as text for the model, whether it is an error). `timeout`: the caller's deadline in
        seconds (0: none); the server's own limit is `call_timeout` without a reply or a progress notice."""
        session = self._session
        if self.state is not McpState.READY or session is None:
            raise McpUnavailable(self._unavailable_text())
        if tool not in self._tool_names:
            raise McpUnavailable(f"MCP server {self.name!r} offers no tool {tool!r} now")
        last_progress = self._clock()

        async def moved(_progress: float, _total: float | None, _message: str | None) -> None:
            nonlocal last_progress
            last_progress = self._clock()

        deadline = self._clock() + timeout if timeout > 0 else math.inf
        announced = self._wanted
        call = asyncio.ensure_future(session.call_tool(tool, arguments or None, progress_callback=moved))
        try:
            while True:
                now = self._clock()
                silence_left = last_progress + self.config.call_timeout - now
                if deadline - now <= 0:
                    return (f"{self._label(tool)} did not finish within the {timeout:.0f}s the caller allows; it was "
                            "cancelled at the server", True)
                if silence_left <= 0:
                    return (f"{self._label(tool)} sent no reply and no progress for {self.config.call_timeout:.0f}s "
                            "(call_timeout); it was cancelled at the server", True)
                done, _ = await asyncio.wait({call}, timeout=min(silence_left, deadline - now))
                if done:
                    break
            result = call.result()
        except MCPError as exc:
            return self._failed_call(tool, exc), True
        except Exception as exc:  # a reply the SDK could not read, a transport error
            return f"{self._label(tool)} failed: {_describe(exc)}", True
        finally:
            if not call.done():
                call.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await call
        if not isinstance(result, types.CallToolResult):
            return f"{self._label(tool)} returned a result yagent cannot read ({type(result).__name__})", True
        if self._wanted != announced:  # the call changed the tool list: the caller's next step must see it
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(RELIST_WAIT):
                    await self.until(lambda s: s._published_for >= s._wanted or s.state is not McpState.READY)
        return render_result(result), bool(result.is_error)

    def _failed_call(self, tool: str, exc: MCPError) -> str:
        if exc.code == types.CONNECTION_CLOSED:
            tail = f" (its last stderr line: {self._stderr_tail()[-1]})" if self._stderr_tail() else ""
            return (f"{self._label(tool)} did not complete: the server's connection ended during the call{tail}. "
                    "yagentd starts it again; check whether the call's effects happened before calling it again")
        return f"{self._label(tool)} failed: {exc.message} (MCP error {exc.code})"

    def _label(self, tool: str) -> str:
        return f"MCP tool {tool!r} of server {self.name!r}"

    def _unavailable_text(self) -> str:
        text = f"MCP server {self.name!r} is {self.state.value}"
        if self.last_error:
            text += f" ({self.last_error})"
        return text + (f"; {self.fix}" if self.fix else "")

    # -- state ----------------------------------------------------------------------------------------

    def _set_state(self, state: McpState) -> None:
        if state is McpState.READY and self.state is not McpState.READY:
            self._ready_since = self._clock()
        if state is not McpState.READY:
            self._ready_since = 0.0
        changed = state is not self.state
        leaving_ready = self.state is McpState.READY and state is not McpState.READY
        self.state = state
        if state is McpState.STARTING:
            self.settled.clear()
        else:
            self.settled.set()
        if leaving_ready and self.tools:  # its tools no longer reach runs: they must hear of it
            self.tools, self._tool_names = [], set()
            self.generation += 1
            self._hooks.tools_changed(self)
        if changed:
            log.debug("MCP server %s of %s is %s", self.name, self.project_root, state.value)
        self._touch()

    def _offline(self, why: str) -> None:
        self.last_error = why
        self._set_state(McpState.OFFLINE)
        self._touch()

    def _stderr_tail(self) -> list[str]:
        return list(self.process.stderr_tail) if self.process is not None else list(self._stderr)

    def status(self) -> McpServerStatus:
        uptime = self._clock() - self._ready_since if self.state is McpState.READY and self._ready_since else 0.0
        return McpServerStatus(
            project=str(self.project_root), server=self.name, state=self.state, source=self.config.source,
            transport=self.config.transport, target=self.config.target(), pid=self.pid, tools=len(self.tools),
            uptime=uptime, restarts=self.restarts, last_error=self.last_error, stderr_tail=self._stderr_tail(),
            fix=self.fix, required=self.config.required, withheld=list(self.withheld))


def render_result(result: types.CallToolResult) -> str:
    """A tool result as the text the model reads; binary content is named, never inlined; at most
    `MAX_RESULT_CHARS` (a server may return anything: it is untrusted input)."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            kind = "image" if isinstance(block, types.ImageContent) else "audio"
            parts.append(f"[{kind} {block.mime_type}, {len(block.data) * 3 // 4} bytes: not shown]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource link {block.name}: {block.uri}]")
        elif isinstance(block, types.EmbeddedResource):
            res = block.resource
            if isinstance(res, types.TextResourceContents):
                parts.append(f"[resource {res.uri}]\n{res.text}")
            else:
                parts.append(f"[binary resource {res.uri}: not shown]")
        else:
            parts.append(f"[{type(block).__name__}: not shown]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    text = "\n".join(parts) if parts else "(the tool returned nothing)"
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n… [cut: the result was {len(text)} characters]"
    return text


def _describe(exc: BaseException) -> str:
    if isinstance(exc, MCPError):
        return f"{exc.message} (MCP error {exc.code})"
    if isinstance(exc, ExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions[:3])
    text = str(exc) or type(exc).__name__
    return text[:500]
