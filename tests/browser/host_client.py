"""A browser host process driven as the daemon drives it (framed messages over its stdin and stdout), synchronous
for tests: every read has a deadline."""

from __future__ import annotations

import itertools
import os
import select
import subprocess
import sys
import time
from pathlib import Path

from yagent.ipc.messages import BrowserHostCall, BrowserHostReady, BrowserHostReply, BrowserRelease
from yagent.ipc.pipe_frames import FrameReader, framed
from yagent.ipc.records import Message

__all__ = ["HostClient"]


class HostClient:
    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "yagent.workers.browser", *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                     env=env)
        self._frames = FrameReader()
        self._pending: list[Message] = []
        self._ids = itertools.count(1)

    def read(self, timeout: float) -> Message:
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        while not self._pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"the browser host said nothing within {timeout} s")
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if ready:
                data = os.read(self.proc.stdout.fileno(), 65536)
                if not data:
                    raise EOFError(f"the browser host ended (status {self.proc.wait(10)})")
                self._pending += self._frames.feed(data)
        return self._pending.pop(0)

    def ready(self, timeout: float = 60.0) -> BrowserHostReady:
        msg = self.read(timeout)
        assert isinstance(msg, BrowserHostReady), msg
        return msg

    def send(self, msg: Message) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(framed(msg))
        self.proc.stdin.flush()

    def call(self, tool: str, session: str = "run-a", downloads: Path | None = None, timeout: float = 30.0,
             **arguments: object) -> BrowserHostReply:
        request_id = next(self._ids)
        self.send(BrowserHostCall(id=request_id, session=session, tool=tool, arguments=arguments,
                                  downloads=str(downloads or ""), timeout=timeout))
        reply = self.read(timeout + 10)
        assert isinstance(reply, BrowserHostReply) and reply.id == request_id, reply
        return reply

    def release(self, session: str) -> None:
        self.send(BrowserRelease(session=session))

    def close(self) -> int:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                return self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                return self.proc.wait(10)
        return self.proc.returncode
