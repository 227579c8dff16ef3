"""Background tasks of a client surface, each with an owner that reads how it ended.

A task that raises is reported through `report` — one line for the user, never a traceback on their
terminal — the moment it ends; closing cancels the rest and waits for them. Nothing is left for the
garbage collector to complain about ("Task exception was never retrieved").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["OwnedTasks"]

log = logging.getLogger(__name__)


class OwnedTasks:
    def __init__(self, report: Callable[[str], None]) -> None:
        self._report = report
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, name: str, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._ended)
        return task

    def _ended(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            return
        log.debug("background task %s failed", task.get_name(), exc_info=exc)  # the traceback, for a log file
        try:
            self._report(f"internal error in {task.get_name()}: {type(exc).__name__}: {exc}")
        except Exception:  # a reporter that fails must not hide the first failure
            log.exception("reporting the failure of %s failed", task.get_name())

    async def aclose(self) -> None:
        """Cancel every task still running and wait until each has ended (failures are still reported)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
