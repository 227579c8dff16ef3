"""Admission of runs into existence: per-parent delegation pools and the global live-worker cap.

A delegation pool belongs to one parent run, so a nested delegation (Repo → DevOps) queues in the
child's own pool and a parent holding a slot can never deadlock its child. The global cap bounds
live worker processes; it yields only when every live run is itself waiting for a delegation —
admitting nothing then would deadlock the whole tree.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["DelegationPool", "WorkerSlots"]


@dataclass(slots=True)
class _Pending:
    key: str
    start: Callable[[], None]


class DelegationPool:
    """At most `limit` concurrent delegations of one parent run; the rest wait in FIFO order."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.active: set[str] = set()
        self.queue: deque[_Pending] = deque()
        self.peak = 0

    def submit(self, run: str, start: Callable[[], None]) -> bool:
        if len(self.active) < self.limit:
            self._admit(_Pending(run, start))
            return True
        self.queue.append(_Pending(run, start))
        return False

    def done(self, run: str) -> None:
        if run in self.active:
            self.active.discard(run)
        else:
            self.queue = deque(p for p in self.queue if p.key != run)
        while self.queue and len(self.active) < self.limit:
            self._admit(self.queue.popleft())

    def _admit(self, pending: _Pending) -> None:
        self.active.add(pending.key)
        self.peak = max(self.peak, len(self.active))
        pending.start()


class WorkerSlots:
    """The global cap on live worker processes. Delegations are served before new turns."""

    def __init__(self, limit: int, all_blocked: Callable[[], bool]) -> None:
        self.limit = max(1, limit)
        self.live: set[str] = set()
        self._delegations: deque[_Pending] = deque()
        self._roots: deque[_Pending] = deque()
        self._all_blocked = all_blocked
        self.peak = 0

    @property
    def waiting(self) -> int:
        return len(self._delegations) + len(self._roots)

    def acquire(self, run: str, start: Callable[[], None], *, delegation: bool) -> bool:
        (self._delegations if delegation else self._roots).append(_Pending(run, start))
        return self.pump(run)

    def set_limit(self, limit: int) -> None:
        """A new cap from a reloaded configuration; live workers above a lowered one are left to finish."""
        self.limit = max(1, limit)
        self.pump()

    def release(self, run: str) -> None:
        if run in self.live:
            self.live.discard(run)
        else:
            self._delegations = deque(p for p in self._delegations if p.key != run)
            self._roots = deque(p for p in self._roots if p.key != run)
        self.pump()

    def pump(self, watch: str | None = None) -> bool:
        """Admit what fits; returns whether `watch` is live afterwards."""
        while self._delegations or self._roots:
            if len(self.live) >= self.limit and not (self._delegations and self._all_blocked()):
                break
            queue = self._delegations if self._delegations else self._roots
            pending = queue.popleft()
            self.live.add(pending.key)
            self.peak = max(self.peak, len(self.live))
            pending.start()
        return watch in self.live if watch else False
