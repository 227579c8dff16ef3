"""Activity-aware clocks for the watchdog.

Idle time is time since the last sign of progress; total time is wall time since start. Both stop
while the task is paused. Waiting for a lease, a user answer or a child delegation stops only the
idle clock: the run is not stuck, it is waiting for someone else. When the last freeze lifts, the
idle clock restarts from that moment — otherwise a run resumed after a long pause would be judged
idle for the whole pause and killed on the next tick.
"""

from __future__ import annotations

from collections import Counter

__all__ = ["RunClock"]

# Freeze reasons that also stop the total clock.
_TOTAL_FREEZES = frozenset({"paused"})


class RunClock:
    __slots__ = ("_frozen", "_idle_frozen_since", "_total_frozen", "_total_frozen_since", "last_activity",
                 "started_at")

    def __init__(self, now: float) -> None:
        self.started_at = now
        self.last_activity = now
        self._frozen: Counter[str] = Counter()
        self._idle_frozen_since: float | None = None
        self._total_frozen = 0.0
        self._total_frozen_since: float | None = None

    def touch(self, now: float) -> None:
        self.last_activity = now

    def freeze(self, reason: str, now: float) -> None:
        if not +self._frozen:
            self._idle_frozen_since = now
        if reason in _TOTAL_FREEZES and not any(self._frozen[r] for r in _TOTAL_FREEZES):
            self._total_frozen_since = now
        self._frozen[reason] += 1

    def unfreeze(self, reason: str, now: float) -> None:
        if self._frozen[reason] <= 0:
            return
        self._frozen[reason] -= 1
        if reason in _TOTAL_FREEZES and not any(self._frozen[r] for r in _TOTAL_FREEZES):
            if self._total_frozen_since is not None:
                self._total_frozen += now - self._total_frozen_since
            self._total_frozen_since = None
        if not +self._frozen:
            self._idle_frozen_since = None
            self.last_activity = now

    def frozen_by(self, reason: str) -> bool:
        return self._frozen[reason] > 0

    @property
    def idle_frozen(self) -> bool:
        return bool(+self._frozen)

    def idle_for(self, now: float) -> float:
        if +self._frozen:
            return 0.0
        return max(0.0, now - self.last_activity)

    def total_for(self, now: float) -> float:
        frozen = self._total_frozen
        if self._total_frozen_since is not None:
            frozen += now - self._total_frozen_since
        return max(0.0, now - self.started_at - frozen)
