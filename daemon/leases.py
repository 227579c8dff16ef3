"""In-flight LLM leases: at most `limit` provider requests in flight across all workers.

Waiting requests are served round-robin across projects and FIFO within a project, so one busy
project cannot starve another. A worker that dies loses its leases at once (`drop_run`).

A slot may also be handed over ahead, with the message that lets a run go on (`grant_if_free`), so that its next
call need not ask: only when one is free, and only lent until a call takes it — recalled as soon as anyone waits.
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
    granted: bool = False


def _granted_with_a_message() -> None:
    pass  # the message that carries the slot tells the worker: there is nothing else to send


class LeaseManager:
    def __init__(self, limit: int) -> None:
        self.limit = limit  # 0 = unlimited
        self.in_use = 0
        self.peak = 0
        self.granted_total = 0  # slots granted for model calls: one handed over ahead counts when it comes back used
        self.handed_total = 0  # of those, the slots handed over ahead with a message (`grant_if_free`)
        self._held: dict[str, set[int]] = {}
        # Handed over ahead and not given back yet, each with how to recall it (None once recalled): until a call
        # takes it the slot is only lent, and a run that would wait for a slot asks for it back.
        self._handed: dict[tuple[str, int], Callable[[], None] | None] = {}
        self._queues: OrderedDict[str, deque[_Waiter]] = OrderedDict()  # project -> waiters, in turn order
        self._run_project: dict[str, str] = {}

    @property
    def waiting(self) -> int:
        return sum(len(q) for q in self._queues.values())

    def stats(self) -> dict[str, int]:
        return {"limit": self.limit, "in_use": self.in_use, "peak": self.peak, "waiting": self.waiting,
                "granted_total": self.granted_total, "handed_total": self.handed_total}

    def request(self, project: str, run: str, lease_id: int, grant: Callable[[], None]) -> bool:
        """Grant now (returns True, `grant` already called) or queue the request (returns False). A request
        under an id the run holds already is granted again without taking a second slot, and one under an id
        that already waits stays one request: a repeated frame must not leak a slot nobody can give back."""
        self._run_project[run] = project
        if lease_id in self._held.get(run, ()):
            grant()
            return True
        if any(w.run == run and w.lease_id == lease_id for w in self._queues.get(project, ())):
            return False
        if not self._queues and (self.limit == 0 or self.in_use < self.limit):
            self._grant(_Waiter(run, lease_id, grant))
            return True
        waiter = _Waiter(run, lease_id, grant)
        self._queues.setdefault(project, deque()).append(waiter)
        self._pump()
        if self._queues:
            self._recall_lent()
        return waiter.granted  # True only if a recall gave a slot back within this call (not through the network)

    def grant_if_free(self, project: str, run: str, lease_id: int, recall: Callable[[], None]) -> bool:
        """Grant at once when a slot is free and nobody waits for one (True); else change nothing (False). For a
        slot handed over with a message that lets the run go on, before it asks: never ahead of a waiter, and
        recalled (`recall` is called, once) as soon as another run has to wait."""
        # A free slot means nobody waits (`_pump` hands each out as it frees): this never overtakes a waiter.
        if not (self.limit == 0 or self.in_use < self.limit):
            return False
        self._run_project[run] = project
        self._handed[(run, lease_id)] = recall
        self._grant(_Waiter(run, lease_id, _granted_with_a_message), counted=False)
        return True

    def set_limit(self, limit: int) -> None:
        """A new limit from a reloaded configuration; a raised one admits waiters at once."""
        self.limit = limit
        self._pump()

    def release(self, run: str, lease_id: int, *, unused: bool = False) -> bool:
        """Return a held lease, or withdraw a request still waiting (its requester gave up). `unused`: a slot
        handed over ahead comes back without a model call having taken it (it does not count as granted)."""
        held = self._held.get(run)
        if not held or lease_id not in held:
            return self._withdraw(run, lease_id)
        if (run, lease_id) in self._handed:
            del self._handed[(run, lease_id)]
            if not unused:
                self.granted_total += 1
                self.handed_total += 1
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
        held = self._held.pop(run, ())
        for lease_id in held:
            self._handed.pop((run, lease_id), None)
        reclaimed = len(held)
        self.in_use -= reclaimed
        self._pump()
        return reclaimed

    def _grant(self, waiter: _Waiter, *, counted: bool = True) -> None:
        self._held.setdefault(waiter.run, set()).add(waiter.lease_id)
        self.in_use += 1
        self.granted_total += counted
        self.peak = max(self.peak, self.in_use)
        waiter.granted = True
        waiter.grant()

    def _recall_lent(self) -> None:
        """Ask every slot handed over ahead back (each once): one no call has taken yet comes back unused."""
        recalls = [recall for recall in self._handed.values() if recall is not None]
        # All marked first: a recall that ends its run changes the table.
        self._handed = dict.fromkeys(self._handed)
        for recall in recalls:
            recall()

    def _pump(self) -> None:
        while self._queues and (self.limit == 0 or self.in_use < self.limit):
            project, queue = next(iter(self._queues.items()))
            waiter = queue.popleft()
            # Rotate: the project just served goes to the back of the line.
            del self._queues[project]
            if queue:
                self._queues[project] = queue
            self._grant(waiter)
