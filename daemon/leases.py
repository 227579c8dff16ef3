"""In-flight LLM leases: at most `limit` provider requests in flight across all workers.

Waiting requests are served round-robin across projects and FIFO within a project, so one busy
project cannot starve another. A worker that dies loses its leases at once (`drop_run`).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["LeaseManager"]


@dataclass(slots=True)
class _Waiter:
    run: str
    lease_id: int
    grant: Callable[[], None]


class LeaseManager:
    def __init__(self, limit: int) -> None:
        self.limit = limit  # 0 = unlimited
        self.in_use = 0
        self.peak = 0
        self.granted_total = 0
        self._held: dict[str, set[int]] = {}
        self._queues: OrderedDict[str, deque[_Waiter]] = OrderedDict()  # project -> waiters, in turn order
        self._run_project: dict[str, str] = {}

    @property
    def waiting(self) -> int:
        return sum(len(q) for q in self._queues.values())

    def stats(self) -> dict[str, int]:
        return {"limit": self.limit, "in_use": self.in_use, "peak": self.peak, "waiting": self.waiting,
                "granted_total": self.granted_total}

    def request(self, project: str, run: str, lease_id: int, grant: Callable[[], None]) -> bool:
        """Grant now (returns True, `grant` already called) or queue the request (returns False)."""
        self._run_project[run] = project
        if not self._queues and (self.limit == 0 or self.in_use < self.limit):
            self._grant(_Waiter(run, lease_id, grant))
            return True
        self._queues.setdefault(project, deque()).append(_Waiter(run, lease_id, grant))
        self._pump()
        return False

    def set_limit(self, limit: int) -> None:
        """A new limit from a reloaded configuration; a raised one admits waiters at once."""
        self.limit = limit
        self._pump()

    def release(self, run: str, lease_id: int) -> bool:
        """Return a held lease, or withdraw a request still waiting (its requester gave up)."""
        held = self._held.get(run)
        if not held or lease_id not in held:
            return self._withdraw(run, lease_id)
        held.discard(lease_id)
        if not held:
            del self._held[run]
        self.in_use -= 1
        self._pump()
        return True

    def _withdraw(self, run: str, lease_id: int) -> bool:
        project = self._run_project.get(run)
        queue = self._queues.get(project) if project else None
        if not queue:
            return False
        kept = deque(w for w in queue if not (w.run == run and w.lease_id == lease_id))
        if len(kept) == len(queue):
            return False
        if kept:
            self._queues[project] = kept
        else:
            del self._queues[project]
        return True

    def drop_run(self, run: str) -> int:
        """Forget a finished or dead run: its held leases return to the pool; returns how many."""
        project = self._run_project.pop(run, None)
        if project is not None and project in self._queues:
            queue = deque(w for w in self._queues[project] if w.run != run)
            if queue:
                self._queues[project] = queue
            else:
                del self._queues[project]
        reclaimed = len(self._held.pop(run, ()))
        self.in_use -= reclaimed
        self._pump()
        return reclaimed

    def _grant(self, waiter: _Waiter) -> None:
        self._held.setdefault(waiter.run, set()).add(waiter.lease_id)
        self.in_use += 1
        self.granted_total += 1
        self.peak = max(self.peak, self.in_use)
        waiter.grant()

    def _pump(self) -> None:
        while self._queues and (self.limit == 0 or self.in_use < self.limit):
            project, queue = next(iter(self._queues.items()))
            waiter = queue.popleft()
            # Rotate: the project just served goes to the back of the line.
            del self._queues[project]
            if queue:
                self._queues[project] = queue
            self._grant(waiter)
