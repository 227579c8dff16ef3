"""One run's requests for a model slot: granted at once, waiting for a slot, or held back by a spending limit.

The daemon-wide fairness and the in-flight limit are the `LeaseManager`'s; this part keeps, for one run, which
requests still wait and since when (the time shows as the run's slot wait), and says when the run starts and
stops waiting, so a run that waits its turn never just looks stuck.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from .run_accounting import RunUsage
from .run_services import RunServices

__all__ = ["BudgetGate", "LeaseHolder", "RunLeases"]


class LeaseHolder(Protocol):
    """What a run's lease requests need of the run (`RunSupervisor`)."""

    @property
    def id(self) -> str: ...

    @property
    def ended(self) -> bool: ...

    def lease_granted(self, lease_id: int) -> None: ...  # tell the worker; its idle clock runs again

    def recall_lease(self, lease_id: int) -> None: ...  # ask the worker for a slot handed over ahead back

    def slot_wait_changed(self, *, waiting: bool) -> None: ...  # publish that the run waits, or no longer does


class BudgetGate(Protocol):
    """The task's spending limit as the run sees it (`TurnController`)."""

    @property
    def project_id(self) -> str: ...  # leases are shared fairly between projects

    @property
    def over_budget(self) -> bool: ...  # a spending limit was reached and the user has not answered yet

    def after_budget(self, resume: Callable[[], None]) -> None: ...  # called once the limit is raised


class RunLeases:
    def __init__(self, holder: LeaseHolder, services: RunServices, budget: BudgetGate, usage: RunUsage) -> None:
        self._holder = holder
        self._services = services
        self._budget = budget
        self._usage = usage
        self.waiting: dict[int, float] = {}  # requests not granted yet: since when
        self._held: set[int] = set()  # of those, the ones a spending limit holds back
        self._last_ahead_id = 0  # slots granted ahead count down from -1: a worker's own requests count up from 1

    def request(self, lease_id: int) -> None:
        if self._budget.over_budget:  # no new model call past a spending limit until the user says so
            self._start_waiting(lease_id)
            self._held.add(lease_id)
            self._budget.after_budget(lambda: self._limit_raised(lease_id))
            return
        self._ask(lease_id)

    def grant_ahead(self) -> int:
        """A slot for the run's next model call, granted now to go with the message that lets the run go on (its
        start, its child's result), so that the call need not ask: its id, or 0 when none is free, another run
        waits for one, or a spending limit stands."""
        if self._budget.over_budget:
            return 0
        lease_id = self._last_ahead_id - 1
        if not self._services.leases.grant_if_free(self._budget.project_id, self._holder.id, lease_id,
                                                   lambda: self._holder.recall_lease(lease_id)):
            return 0
        self._last_ahead_id = lease_id
        return lease_id

    def release(self, lease_id: int, *, unused: bool = False) -> bool:
        """The worker gave the lease back (`unused`: one granted ahead that no call took), or withdrew its
        request; True when it had still been waiting."""
        self._held.discard(lease_id)
        self._services.leases.release(self._holder.id, lease_id, unused=unused)
        if lease_id not in self.waiting:
            return False
        self._stop_waiting(lease_id)
        return True

    def _limit_raised(self, lease_id: int) -> None:
        if lease_id in self._held:  # not withdrawn meanwhile
            self._held.discard(lease_id)
            if not self._holder.ended:
                self._ask(lease_id)

    def _ask(self, lease_id: int) -> None:
        def grant() -> None:
            self._holder.lease_granted(lease_id)
            self._stop_waiting(lease_id)

        # A request that is not granted at once has not been granted yet (`LeaseManager.request`).
        granted = self._services.leases.request(self._budget.project_id, self._holder.id, lease_id, grant)
        if not granted:
            self._start_waiting(lease_id)  # its turn comes under [llm] max_in_flight_requests

    def _start_waiting(self, lease_id: int) -> None:
        if lease_id not in self.waiting:
            self.waiting[lease_id] = self._services.clock()
            self._holder.slot_wait_changed(waiting=True)

    def _stop_waiting(self, lease_id: int) -> None:
        since = self.waiting.pop(lease_id, None)
        if since is None:
            return
        self._usage.slot_wait_seconds += max(0.0, self._services.clock() - since)
        if not self.waiting:  # granted or withdrawn after a wait: say the wait is over
            self._holder.slot_wait_changed(waiting=False)
