"""The last lines a child process of the daemon wrote to stderr, kept bounded for its status and errors.

A child owned by the daemon (an MCP server, the browser host) may write anything, or write forever: only its last
`STDERR_TAIL` lines are kept, each cut to `STDERR_LINE_CHARS`, and a line that never ends is kept by its start.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable

__all__ = ["STDERR_LINE_CHARS", "STDERR_TAIL", "StderrTail"]

STDERR_TAIL = 20
STDERR_LINE_CHARS = 400


class StderrTail:
    """Reads a child's stderr to its end, keeping its last lines in `lines`."""

    def __init__(self, on_line: Callable[[str], None] | None = None) -> None:
        self.lines: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)
        self._on_line = on_line  # told of every kept line (e.g. to log it)

    async def read(self, stream: asyncio.StreamReader) -> None:
        """Until EOF or a broken pipe; never raises for what the child wrote."""
        pending = b""
        skipping = False  # inside a line whose start was kept: the rest of it is dropped
        while True:
            try:
                chunk = await stream.read(65536)
            except (ConnectionError, OSError):
                return
            if not chunk:
                if pending.strip():
                    self.keep(pending)
                return
            if skipping:
                end = chunk.find(b"\n")
                if end < 0:
                    continue
                chunk, skipping = chunk[end + 1:], False
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                self.keep(line)
            if len(pending) > STDERR_LINE_CHARS * 4:  # a line that never ends: keep its start, drop the rest
                self.keep(pending)
                pending, skipping = b"", True

    def keep(self, raw: bytes) -> None:
        text = raw.decode("utf-8", "replace").rstrip()[:STDERR_LINE_CHARS]
        if text:
            self.lines.append(text)
            if self._on_line is not None:
                self._on_line(text)
