"""Test doubles for the engines' seams: a fake clock, a recording sleep, a recording in-flight gate."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class FakeClock:
    """Monotonic time that only moves when told to (or when RecordingSleep sleeps)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class RecordingSleep:
    """Records each requested delay and advances the fake clock instead of waiting."""

    def __init__(self, clock: FakeClock | None = None) -> None:
        self.delays: list[float] = []
        self.clock = clock

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        if self.clock is not None:
            self.clock.advance(seconds)
        await asyncio.sleep(0)


class RecordingGate:
    """Counts acquisitions and releases; `advance_on_acquire` simulates a long wait for a slot."""

    def __init__(self, clock: FakeClock | None = None, advance_on_acquire: float = 0.0) -> None:
        self.acquired = 0
        self.released = 0
        self.clock = clock
        self.advance_on_acquire = advance_on_acquire

    @property
    def held(self) -> int:
        return self.acquired - self.released

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        if self.clock is not None:
            self.clock.advance(self.advance_on_acquire)
        self.acquired += 1
        try:
            yield
        finally:
            self.released += 1
