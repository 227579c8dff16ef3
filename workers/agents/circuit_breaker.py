"""Circuit breaker over the Director's model calls.

`allow()` is itself the probe: in half-open state it admits exactly one caller, so every query must
be followed, in the same step, by the call and by `record_success` / `record_failure`. A probe that
never reports (its caller died) expires after `reset_timeout`, so the breaker cannot stay locked.
A threshold of 0 means no breaker at all — the Director must not stall on a network blip.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["CircuitBreaker"]


class CircuitBreaker:
    def __init__(self, threshold: int, reset_timeout: float = 60.0, clock: Callable[[], float] = time.monotonic):
        if threshold <= 0:
            raise ValueError("a breaker needs a positive threshold; use None for no breaker")
        self.threshold = threshold
        self.reset_timeout = reset_timeout
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._probe_at: float | None = None

    @property
    def state(self) -> str:
        if self._opened_at is None:
            return "closed"
        if self._clock() - self._opened_at < self.reset_timeout:
            return "open"
        return "half-open"

    def allow(self) -> bool:
        state = self.state
        if state == "closed":
            return True
        if state == "open":
            return False
        now = self._clock()
        if self._probe_at is not None and now - self._probe_at < self.reset_timeout:
            return False  # one probe is already out
        self._probe_at = now
        return True

    def record_success(self) -> None:
        self._failures = 0
        self._opened_at = None
        self._probe_at = None

    def record_failure(self) -> None:
        self._failures += 1
        if self._opened_at is not None or self._failures >= self.threshold:
            self._opened_at = self._clock()
            self._probe_at = None
