"""A project's browser host, the process: `python -m yagent.workers.browser` in a session and process group of its
own, its stdin and stdout carrying framed messages (`ipc.pipe_frames`), its stderr's last lines kept.

The host's environment is what programs need to start (PATH, HOME, user, locale, a display for headful mode), the
interpreter's PYTHONPATH and the instance's marker (`mcp_leftovers.MARKER_ENV`, shared with MCP servers: the sweep of
a starting daemon kills whatever carries one it recorded) — never the daemon's own environment, which holds provider
keys. Chromium inherits it from the host, so the marker reaches it too, although Playwright's driver starts Chromium
in a session of its own: `stop` kills both groups.

Reading is bounded by the frame cap; a host that writes what is not a frame is ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path

from yagent.ipc.errors import IpcError
from yagent.ipc.messages import BrowserHostReady, BrowserHostReply
from yagent.ipc.pipe_frames import FrameReader, framed
from yagent.ipc.records import Message

from .mcp_leftovers import MARKER_ENV
from .process_identity import start_time
from .stderr_tail import StderrTail

__all__ = ["HOST_ENV", "BrowserProcess", "host_environment"]

log = logging.getLogger(__name__)

HOST_ENV = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TMPDIR", "LANG", "LANGUAGE", "PYTHONPATH", "DISPLAY",
            "WAYLAND_DISPLAY", "XAUTHORITY", "XDG_RUNTIME_DIR")
TERM_GRACE = 2.0


def host_environment(environ: Mapping[str, str], marker: str) -> dict[str, str]:
    env = {k: environ[k] for k in HOST_ENV if environ.get(k)}
    env.update({k: v for k, v in environ.items() if k.startswith("LC_")})
    env[MARKER_ENV] = marker
    return env


class BrowserProcess:
    """One started host: its pid and start time, Chromium's once it reported it, its replies, its end."""

    def __init__(self, proc: asyncio.subprocess.Process, marker: str) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.started_at = start_time(proc.pid)
        self.marker = marker
        self.browser_pid = 0
        self.browser_started_at = 0.0
        self.ready: asyncio.Future[BrowserHostReady] = asyncio.get_running_loop().create_future()
        self.replies: dict[int, asyncio.Future[BrowserHostReply]] = {}
        self._stderr = StderrTail()
        self.stderr_tail = self._stderr.lines  # its last lines, for the status and errors
        self.exited = asyncio.Event()
        self.problem = ""  # why we ended the conversation, if we did

    @classmethod
    async def start(cls, args: list[str], environ: Mapping[str, str], marker: str, cwd: Path) -> BrowserProcess:
        """Spawn the host in a new session; OSError when it cannot be started."""
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "yagent.workers.browser", *args, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=host_environment(environ, marker),
            cwd=str(cwd), start_new_session=True)
        return cls(proc, marker)

    async def talk(self) -> None:
        """Read the host until its stdout ends; then every reply still awaited fails. Owned by the manager's group."""
        async with asyncio.TaskGroup() as group:
            group.create_task(self._read_stderr())
            try:
                await self._read_stdout()
            finally:
                await self.proc.wait()
                self.exited.set()
                why = self.end_text()
                if not self.ready.done():
                    self.ready.set_exception(ConnectionError(why))
                for future in self.replies.values():
                    if not future.done():
                        future.set_exception(ConnectionError(why))
                self.replies.clear()

    async def _read_stdout(self) -> None:
        stdout = self.proc.stdout
        assert stdout is not None
        frames = FrameReader()
        while True:
            try:
                data = await stdout.read(65536)
            except (ConnectionError, OSError):
                return
            if not data:
                return
            try:
                messages = frames.feed(data)
            except IpcError as exc:
                self.problem = f"it wrote what is not a message ({exc}); it was stopped"
                log.warning("browser host pid %d: %s", self.pid, self.problem)
                self.kill_now()
                return
            for msg in messages:
                self._on_message(msg)

    def _on_message(self, msg: Message) -> None:
        if isinstance(msg, BrowserHostReady):
            if not self.ready.done():
                self.ready.set_result(msg)
        elif isinstance(msg, BrowserHostReply):
            future = self.replies.pop(msg.id, None)
            if future is not None and not future.done():
                future.set_result(msg)

    async def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        await self._stderr.read(self.proc.stderr)

    def send(self, msg: Message) -> bool:
        stdin = self.proc.stdin
        if stdin is None or stdin.is_closing() or self.exited.is_set():
            return False
        try:
            stdin.write(framed(msg))
        except (ConnectionError, OSError, IpcError):
            return False
        return True

    def expect(self, request_id: int) -> asyncio.Future[BrowserHostReply]:
        future: asyncio.Future[BrowserHostReply] = asyncio.get_running_loop().create_future()
        self.replies[request_id] = future
        return future

    def note_browser(self, pid: int, host_descendants: set[int]) -> None:
        """Record Chromium's pid as the host reported it — only if it is really one of the host's descendants."""
        if pid in host_descendants:
            self.browser_pid = pid
            self.browser_started_at = start_time(pid)

    def end_text(self) -> str:
        if self.problem:
            return self.problem
        code = self.proc.returncode
        if code is None:
            return "it is ending"
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"it was killed by {signal.Signals(-code).name}"
        return f"it exited with status {code}"

    async def stop(self, grace: float = TERM_GRACE) -> None:
        """End the host: stdin closed (it closes Chromium and exits), then SIGTERM, then SIGKILL to its group and to
        Chromium's (Playwright starts Chromium in a session of its own)."""
        stdin = self.proc.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(grace):
                    await self.exited.wait()
            if self.exited.is_set():
                break
            self._signal_groups(sig)
        self._signal_groups(signal.SIGKILL)  # what is left of either group

    def kill_now(self) -> None:
        self._signal_groups(signal.SIGKILL)
        stdin = self.proc.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()

    def _signal_groups(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)
        # Chromium leads its own group; while any member lives the kernel hands its number to no other process, so
        # the group is Chromium's even once its leader is gone.
        if self.browser_pid:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.browser_pid, sig)
