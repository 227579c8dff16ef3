"""The in-flight gate: how many provider requests may be outstanding at once.

In production the worker's daemon channel implements it (the daemon grants leases fairly across
projects). One logical request holds one slot from before its timeout starts until it ends, across
its retries and its whole stream, and gives it back on every path — only once its last response is
over at the provider (read to its end, or closed by us), so the limit holds as the provider counts.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol, runtime_checkable

__all__ = ["UNLIMITED_GATE", "InFlightGate", "SemaphoreGate", "UnlimitedGate"]


@runtime_checkable
class InFlightGate(Protocol):
    def hold(self) -> AbstractAsyncContextManager[None]:
        """Wait for a slot (cancellable), keep it for the body of the `async with`, release it on exit."""
        ...


class UnlimitedGate:
    """No limit: every request proceeds at once."""

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        yield


class SemaphoreGate:
    """An in-process limit, for tools and scripts that run engines without a daemon."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("SemaphoreGate needs a limit of at least 1; use UnlimitedGate for no limit")
        self._sem = asyncio.Semaphore(limit)

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        async with self._sem:
            yield


UNLIMITED_GATE = UnlimitedGate()
