"""Timers and periodic jobs on the daemon's loop, in place of a tick loop that polls.

A one-shot timer (`after`) is a `call_later` whose callback failures are logged with the timer's name. A
periodic job (`every`) runs from `run()`, which the daemon awaits in its task group beside its socket
loops: one failing pass is logged and the job goes on (the systemd watchdog must outlive a bad pass),
while `run()` itself ending would end the daemon. The job marked as the lag probe also reports when the
event loop was blocked: it wakes up late. A job given `only_while` runs while that event is set and costs
no wake-up while it is clear (worker pings with no worker alive).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Scheduler", "Timer"]

log = logging.getLogger(__name__)

# Lateness of the lag probe worth a warning: the loop did nothing else for this long.
BLOCKED_WARNING = 1.0


class Timer:
    """A pending one-shot callback; `cancel` is safe to call at any time, also after it fired."""

    __slots__ = ("_handle",)

    def __init__(self, handle: asyncio.TimerHandle) -> None:
        self._handle = handle

    def cancel(self) -> None:
        self._handle.cancel()

    @property
    def when(self) -> float:
        return self._handle.when()


@dataclass(slots=True)
class _Job:
    name: str
    interval: Callable[[], float]  # read before every wait: a reloaded configuration takes effect
    fn: Callable[[], None]
    lag_probe: bool
    only_while: asyncio.Event | None


class Scheduler:
    def __init__(self) -> None:
        self._jobs: list[_Job] = []

    def after(self, delay: float, fn: Callable[[], None], name: str) -> Timer:
        def fire() -> None:
            try:
                fn()
            except Exception:
                log.exception("timer %s failed", name)

        return Timer(asyncio.get_running_loop().call_later(max(0.0, delay), fire))

    def every(self, name: str, interval: Callable[[], float], fn: Callable[[], None], *,
              lag_probe: bool = False, only_while: asyncio.Event | None = None) -> None:
        """Register a job run every `interval()` seconds once `run` starts (while `only_while` is set, if given)."""
        self._jobs.append(_Job(name, interval, fn, lag_probe, only_while))

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            for job in self._jobs:
                group.create_task(self._repeat(job), name=f"job:{job.name}")

    async def _repeat(self, job: _Job) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time()
        gate = job.only_while
        while True:
            if gate is not None and not gate.is_set():
                await gate.wait()
                due = loop.time()  # a pass one interval after the gate opened, not a burst for the time closed
            interval = max(0.01, job.interval())
            due += interval
            await asyncio.sleep(max(0.0, due - loop.time()))
            late = loop.time() - due
            if job.lag_probe and late > BLOCKED_WARNING:
                log.warning("the daemon's event loop was blocked for %.1fs", late)
            if late > interval:  # do not fire a burst of passes to catch up
                due = loop.time()
            if gate is not None and not gate.is_set():
                continue  # closed while it slept
            try:
                job.fn()
            except Exception:
                log.exception("periodic job %s failed", job.name)
