"""A stdio MCP server's process, started by the daemon itself, and its pipes as the SDK's session streams.

The daemon spawns the program (not the SDK's `stdio_client`) so that it owns what the SDK cannot keep across a
`kill -9` of its host: the process in a session and process group of its own, its pid and start time recorded
(`McpServer` writes them to state.db), and a kill of the whole group. The environment is the configured one plus
what programs need to start (PATH, HOME, user, locale, TMPDIR) and a marker naming the instance, never the
daemon's own environment (which holds provider keys).

Reading is bounded: a line on stdout longer than `MAX_LINE` ends the connection (a reply that large cannot be
handed on anyway), stderr keeps only its last lines, each cut short (`stderr_tail.py`). A line that
is not JSON-RPC reaches the session as an exception (a server printing to stdout costs a log line, not the
connection). Writing never blocks the loop: a server that does not read its stdin stalls only the writer task,
and the caller's deadline still ends the call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Mapping
from pathlib import Path

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from yagent.ipc.mcp_settings import McpServerConfig
from yagent.ipc.records import MAX_FRAME_BYTES

from .mcp_leftovers import MARKER_ENV
from .process_identity import start_time
from .stderr_tail import StderrTail

__all__ = ["INHERITED_ENV", "MARKER_ENV", "MAX_LINE", "StdioServer", "server_environment"]

log = logging.getLogger(__name__)

# What a program needs to start and to find the user's tools; the rest of the daemon's environment stays out.
INHERITED_ENV = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "LANG", "LANGUAGE")
MAX_LINE = MAX_FRAME_BYTES
TERM_GRACE = 2.0  # after stdin closes, then after SIGTERM, before SIGKILL
EXIT_STATUS_WAIT = 1.0  # for the exit status of a process asyncio reaped first (its pipes close with it)


def server_environment(config: McpServerConfig, environ: Mapping[str, str], marker: str) -> dict[str, str]:
    """The server's environment: PATH, HOME, user and locale from `environ`, then the configured `env`."""
    env = {k: environ[k] for k in INHERITED_ENV if k in environ}
    env.update({k: v for k, v in environ.items() if k.startswith("LC_")})
    env.update(config.env)
    env[MARKER_ENV] = marker
    return env


class StdioServer:
    """One started server process: its pid, start time and group; its streams; its stderr tail; its kill."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.started_at = start_time(proc.pid)  # with the pid, what names this process to a later daemon
        self._stderr = StderrTail(lambda line: log.debug("MCP server pid %d stderr: %s", self.pid, line))
        self.stderr_tail = self._stderr.lines  # its last lines, for the status and errors
        self.problem = ""  # why the connection ended from our side (a line over the cap), if it did
        self.exit_status = ""  # how it ended ("exited with status 3", "was killed by SIGKILL"), once it has
        self.exited = asyncio.Event()
        self._pidfd: int | None = None
        try:
            self._pidfd = os.pidfd_open(proc.pid)
        except OSError:  # gone already, or a kernel before 5.3: the child watcher's wait() reports instead
            pass
        loop = asyncio.get_running_loop()
        if self._pidfd is not None:
            loop.add_reader(self._pidfd, self._on_exit)
        else:
            self._waiter = loop.create_task(self._wait_exit())

    @classmethod
    async def start(cls, config: McpServerConfig, project_root: Path, environ: Mapping[str, str],
                    marker: str) -> StdioServer:
        """Spawn the server in a new session (its own process group); OSError when it cannot be started."""
        cwd = project_root / config.cwd if config.cwd else project_root
        env = server_environment(config, environ, marker)
        proc = await asyncio.create_subprocess_exec(
            config.command, *config.args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=env, cwd=str(cwd), start_new_session=True, limit=MAX_LINE)
        return cls(proc)

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def _on_exit(self) -> None:
        assert self._pidfd is not None
        asyncio.get_running_loop().remove_reader(self._pidfd)
        try:  # read how it ended without reaping it: reaping is the child watcher's
            info = os.waitid(os.P_PIDFD, self._pidfd, os.WEXITED | os.WNOWAIT)
        except (OSError, AttributeError):
            info = None
        if info is not None:
            if info.si_code == os.CLD_EXITED:
                self.exit_status = f"exited with status {info.si_status}"
            else:
                with contextlib.suppress(ValueError):
                    self.exit_status = f"was killed by {signal.Signals(info.si_status).name}"
        os.close(self._pidfd)
        self._pidfd = None
        self.exited.set()

    async def _wait_exit(self) -> None:
        await self.proc.wait()
        self.exited.set()

    def exit_text(self) -> str:
        code = self.proc.returncode
        if code is None:
            return self.exit_status or "exited"
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"was killed by {signal.Signals(-code).name}"
        return f"exited with status {code}"

    async def pump(self, read_writer: MemoryObjectSendStream[SessionMessage | Exception],
                   write_reader: MemoryObjectReceiveStream[SessionMessage]) -> None:
        """Carry messages between the pipes and the session's streams until the server's stdout ends (or is
        given up on: a line over the cap). Its stderr is read by `read_stderr`, a task of its own."""
        async with asyncio.TaskGroup() as group:
            writer = group.create_task(self._write_stdin(write_reader))
            try:
                await self._read_stdout(read_writer)
            finally:
                writer.cancel()

    async def _read_stdout(self, out: MemoryObjectSendStream[SessionMessage | Exception]) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        async with out:
            while True:
                try:
                    line = await stdout.readuntil(b"\n")
                except asyncio.IncompleteReadError as end:
                    line = end.partial
                    if not line.strip():
                        return
                except asyncio.LimitOverrunError:
                    self.problem = (f"it wrote a message over {MAX_LINE // 1024} KiB on stdout, more than yagentd "
                                    "takes; the connection was closed")
                    log.warning("MCP server pid %d: %s", self.pid, self.problem)
                    return
                except (ConnectionError, OSError):
                    return
                if not line.strip():
                    continue
                try:
                    item: SessionMessage | Exception = SessionMessage(
                        types.jsonrpc_message_adapter.validate_json(line, by_name=False))
                except ValueError as exc:  # not JSON-RPC (a stray print): the session logs it and goes on
                    item = ValueError(f"the server wrote a line that is not a JSON-RPC message: {str(exc)[:200]}")
                try:
                    await out.send(item)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return

    async def _write_stdin(self, source: MemoryObjectReceiveStream[SessionMessage]) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        try:
            async with source:
                async for message in source:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    stdin.write(data.encode() + b"\n")
                    await stdin.drain()
        except (ConnectionError, OSError, anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    async def read_stderr(self) -> None:
        assert self.proc.stderr is not None
        await self._stderr.read(self.proc.stderr)

    def close_stdin(self) -> None:
        stdin = self.proc.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()

    def signal_group(self, sig: int) -> None:
        """`sig` to the server's whole process group (it leads its own session: pgid = pid)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)

    async def stop(self, grace: float = TERM_GRACE) -> None:
        """End the server: stdin closed (the polite way), SIGTERM to its group, then SIGKILL; its whole group
        goes even when the leader has already exited."""
        self.close_stdin()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if not self.exited.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(grace):
                        await self.exited.wait()
            if self.exited.is_set():
                break
            self.signal_group(sig)
        if not self.exited.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(grace):
                    await self.exited.wait()
        self.signal_group(signal.SIGKILL)  # what the leader left in its group (children it did not reap)
        if self.exited.is_set() and self.proc.returncode is None and not self.exit_status:
            # Reaped by asyncio's child watcher before our pidfd was read: its status comes with the transport.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(EXIT_STATUS_WAIT):
                    await self.proc.wait()
        self.release()

    def kill_now(self) -> None:
        """SIGKILL the group at once (the daemon is going away); synchronous, so nothing can interrupt it."""
        self.signal_group(signal.SIGKILL)
        self.close_stdin()

    def release(self) -> None:
        """Let go of the process's descriptors: its pidfd, and its pipes — asyncio keeps a transport open while
        any pipe is (a grandchild may hold one), so every restart would leak three descriptors otherwise."""
        if self._pidfd is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        transport = getattr(self.proc, "_transport", None)  # no public way to close it: as the SDK does
        if transport is not None:
            with contextlib.suppress(Exception):
                transport.close()
