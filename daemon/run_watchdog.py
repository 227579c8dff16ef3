"""A delegation's idle and total timeouts, as one timer instead of a poll.

The timer is set for the earlier of the two deadlines the run's clock gives now. Activity only moves the
idle deadline later, so a timer that fires early just looks again and sets itself for the new deadline;
whatever can move a deadline earlier (a freeze lifting, a reloaded configuration) calls `arm` again.
"""

from __future__ import annotations

from collections.abc import Callable

from yagent.ipc.config import Settings
from yagent.ipc.vocabulary import StopReason

from .run_clock import RunClock
from .schedule import Scheduler, Timer

__all__ = ["RunWatchdog"]

# Past the deadline by this much when the timer fires, so the clock reads it as passed.
_MARGIN = 0.01


class RunWatchdog:
    def __init__(self, name: str, scheduler: Scheduler, settings: Callable[[], Settings],
                 now: Callable[[], float], expired: Callable[[StopReason, str], None]) -> None:
        self._name = name
        self._scheduler = scheduler
        self._settings = settings
        self._now = now
        self._expired = expired
        self._clock: RunClock | None = None
        self._timer: Timer | None = None

    def arm(self, clock: RunClock) -> None:
        """Watch `clock`; schedule the next look at the deadlines it gives now."""
        self._clock = clock
        self.cancel()
        settings, now = self._settings(), self._now()
        due = []
        if settings.delegate_idle_timeout > 0 and not clock.idle_frozen:
            due.append(settings.delegate_idle_timeout - clock.idle_for(now))
        if settings.delegate_total_timeout > 0 and not clock.frozen_by("paused"):
            due.append(settings.delegate_total_timeout - clock.total_for(now))
        if due:
            self._timer = self._scheduler.after(min(due) + _MARGIN, self._look, f"watchdog-{self._name}")

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _look(self) -> None:
        self._timer = None
        clock = self._clock
        if clock is None:
            return
        settings, now = self._settings(), self._now()
        if settings.delegate_idle_timeout > 0 and clock.idle_for(now) > settings.delegate_idle_timeout:
            self._expired(StopReason.IDLE_TIMEOUT,
                          f"no progress for {settings.delegate_idle_timeout:g}s ([agent] delegate_idle_timeout)")
        elif settings.delegate_total_timeout > 0 and clock.total_for(now) > settings.delegate_total_timeout:
            self._expired(StopReason.TOTAL_TIMEOUT,
                          f"ran longer than {settings.delegate_total_timeout:g}s ([agent] delegate_total_timeout)")
        else:
            self.arm(clock)  # activity moved the deadline: look again then
