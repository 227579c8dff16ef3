"""Background tasks with an owner: named, their failures logged, and awaitable at shutdown.

A bare `create_task` whose exception nobody retrieves is a failure nobody sees. Everything the daemon
starts in the background goes through a scope, and `drain` reports by name what did not finish.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

__all__ = ["TaskScope"]

log = logging.getLogger(__name__)


class TaskScope:
    def __init__(self, name: str) -> None:
        self.name = name
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, name: str, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(self._guard(name, coro), name=f"{self.name}:{name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        # Cancelled before its first step, the task never awaits `coro`: close it, or Python warns at exit.
        task.add_done_callback(lambda _t: coro.close())
        return task

    async def _guard(self, name: str, coro: Coroutine[Any, Any, Any]) -> Any:
        try:
            return await coro
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("background task %s:%s failed", self.name, name)
            return None

    def __len__(self) -> int:
        return len(self._tasks)

    async def drain(self, timeout: float) -> list[str]:
        """Cancel everything and wait up to `timeout`; returns the names that did not finish."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if not tasks:
            return []
        _done, pending = await asyncio.wait(tasks, timeout=timeout)
        return sorted(t.get_name() for t in pending)
