"""The daemon channel as a run built in a test sees it: a lease gate that admits at once, events kept in a list."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

__all__ = ["RecordingChannel"]


class RecordingChannel:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    @contextlib.asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        yield

    def emit(self, type_: str, data: dict) -> None:
        self.events.append((type_, data))

    def heartbeat(self) -> None:
        pass

    def take_compaction_request(self) -> bool:
        return False

    async def pause_gate(self) -> None:
        pass

    def warnings(self) -> list[str]:
        """The messages of the warning log events emitted so far."""
        return [d["message"] for t, d in self.events if t == "log" and d.get("level") == "warning"]
