"""Leases, delegation pools, the worker cap and run clocks, driven directly."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

from yagent.daemon.admission import DelegationPool, WorkerSlots
from yagent.daemon.leases import LeaseManager
from yagent.daemon.run_accounting import RunUsage
from yagent.daemon.run_clock import RunClock
from yagent.daemon.run_leases import RunLeases


def test_leases_are_fifo_within_a_project_and_round_robin_across_projects() -> None:
    leases = LeaseManager(1)
    order: list[str] = []
    assert leases.request("A", "a0", 1, lambda: order.append("a0"))
    for name, project in [("a1", "A"), ("a2", "A"), ("a3", "A"), ("b1", "B"), ("c1", "C"), ("b2", "B")]:
        assert not leases.request(project, name, 1, lambda n=name: order.append(n))
    assert leases.waiting == 6
    for run in ["a0", "a1", "b1", "c1", "a2", "b2"]:
        assert leases.release(run, 1)
    assert order == ["a0", "a1", "b1", "c1", "a2", "b2", "a3"]
    assert leases.peak == 1


def test_a_dead_run_gives_its_leases_back_at_once() -> None:
    leases = LeaseManager(2)
    granted: list[str] = []
    leases.request("A", "r1", 1, lambda: granted.append("r1#1"))
    leases.request("A", "r1", 2, lambda: granted.append("r1#2"))
    leases.request("B", "r2", 1, lambda: granted.append("r2#1"))
    leases.request("A", "r1", 3, lambda: granted.append("r1#3"))  # queued behind r2
    assert granted == ["r1#1", "r1#2"]
    assert leases.drop_run("r1") == 2
    assert granted == ["r1#1", "r1#2", "r2#1"]  # r1's queued request died with it
    assert leases.in_use == 1 and leases.waiting == 0


def test_a_request_withdrawn_while_waiting_is_never_granted() -> None:
    leases = LeaseManager(1)
    granted: list[str] = []
    leases.request("A", "r1", 1, lambda: granted.append("r1"))
    leases.request("A", "r2", 7, lambda: granted.append("r2"))
    leases.request("A", "r3", 1, lambda: granted.append("r3"))
    assert leases.release("r2", 7)  # r2 gave up before its grant
    leases.release("r1", 1)
    assert granted == ["r1", "r3"]
    assert leases.in_use == 1 and leases.waiting == 0


def test_zero_limit_means_unlimited() -> None:
    leases = LeaseManager(0)
    for i in range(100):
        assert leases.request("A", f"r{i}", 1, lambda: None)
    assert leases.in_use == leases.peak == 100


def test_releasing_an_unknown_lease_changes_nothing() -> None:
    leases = LeaseManager(1)
    leases.request("A", "r1", 1, lambda: None)
    assert not leases.release("r1", 99)
    assert not leases.release("nobody", 1)
    assert leases.in_use == 1


def test_delegation_pool_admits_in_order_up_to_its_limit() -> None:
    pool = DelegationPool(2)
    started: list[str] = []
    for name in "abcde":
        pool.submit(name, lambda n=name: started.append(n))
    assert started == ["a", "b"]
    pool.done("b")
    assert started == ["a", "b", "c"]
    pool.done("e")  # a queued one that was cancelled before it started
    pool.done("a")
    pool.done("c")
    assert started == ["a", "b", "c", "d"]
    assert pool.peak == 2


def test_raising_the_limits_on_reload_admits_waiters_at_once() -> None:
    leases = LeaseManager(1)
    granted: list[str] = []
    for run in ("a", "b", "c"):
        leases.request("P", run, 1, lambda r=run: granted.append(r))
    assert granted == ["a"]
    leases.set_limit(2)
    assert granted == ["a", "b"] and leases.in_use == 2
    leases.set_limit(1)  # lowering takes nothing back; the next release admits nobody
    assert leases.release("a", 1) and granted == ["a", "b"]
    slots = WorkerSlots(1, lambda: False)
    started: list[str] = []
    for run in ("r1", "r2"):
        slots.acquire(run, lambda r=run: started.append(r), delegation=False)
    slots.set_limit(2)
    assert started == ["r1", "r2"]


def test_worker_cap_serves_delegations_before_new_turns() -> None:
    blocked = {"value": False}
    slots = WorkerSlots(1, lambda: blocked["value"])
    started: list[str] = []
    slots.acquire("root1", lambda: started.append("root1"), delegation=False)
    slots.acquire("root2", lambda: started.append("root2"), delegation=False)
    slots.acquire("child", lambda: started.append("child"), delegation=True)
    assert started == ["root1"]
    slots.release("root1")
    assert started == ["root1", "child"]


def test_worker_cap_yields_only_when_every_live_run_waits_for_a_delegation() -> None:
    blocked = {"value": False}
    slots = WorkerSlots(1, lambda: blocked["value"])
    started: list[str] = []
    slots.acquire("parent", lambda: started.append("parent"), delegation=False)
    assert not slots.acquire("child", lambda: started.append("child"), delegation=True)
    blocked["value"] = True  # the parent now waits for its child: admitting nothing would deadlock
    slots.pump()
    assert started == ["parent", "child"]
    assert slots.peak == 2


def test_pause_freezes_idle_and_total_and_continue_restarts_idle_from_now() -> None:
    clock = RunClock(0.0)
    clock.touch(5.0)
    assert clock.idle_for(8.0) == 3.0
    clock.freeze("paused", 8.0)
    assert clock.idle_for(100.0) == 0.0
    assert clock.total_for(100.0) == 8.0
    clock.unfreeze("paused", 100.0)
    assert clock.idle_for(100.5) == 0.5  # not 95.5: the pause does not count as idleness
    assert clock.total_for(110.0) == 18.0


def test_waiting_for_a_lease_freezes_only_the_idle_clock() -> None:
    clock = RunClock(0.0)
    clock.freeze("lease", 1.0)
    clock.freeze("user", 2.0)
    assert clock.idle_for(50.0) == 0.0
    assert clock.total_for(50.0) == 50.0
    clock.unfreeze("lease", 50.0)
    assert clock.idle_for(60.0) == 0.0  # still waiting for the user
    clock.unfreeze("user", 60.0)
    assert clock.idle_for(61.0) == 1.0


def test_unfreezing_a_reason_never_frozen_is_harmless() -> None:
    clock = RunClock(0.0)
    clock.unfreeze("paused", 5.0)
    assert clock.total_for(10.0) == 10.0
    assert clock.idle_for(10.0) == 10.0


def test_a_repeated_request_under_a_held_or_waiting_id_takes_no_second_slot() -> None:
    # A forged or replayed frame: the slot it would take twice could never be given back (one release per id).
    leases = LeaseManager(1)
    granted: list[str] = []
    assert leases.request("A", "r1", 1, lambda: granted.append("r1"))
    assert leases.request("A", "r1", 1, lambda: granted.append("r1 again"))  # answered again, no new slot
    assert leases.in_use == 1 and leases.granted_total == 1
    assert not leases.request("A", "r2", 5, lambda: granted.append("r2"))
    assert not leases.request("A", "r2", 5, lambda: granted.append("r2 twice"))
    assert leases.waiting == 1
    assert leases.release("r1", 1)
    assert granted == ["r1", "r1 again", "r2"] and leases.in_use == 1
    assert leases.drop_run("r2") == 1
    assert leases.in_use == 0 and leases.waiting == 0


def test_a_slot_is_handed_over_ahead_only_when_free_and_nobody_waits() -> None:
    leases = LeaseManager(2)
    recalled: list[str] = []
    assert leases.grant_if_free("A", "r1", -1, lambda: recalled.append("r1"))
    assert leases.request("A", "r2", 1, lambda: None)
    assert not leases.grant_if_free("A", "r3", -1, lambda: recalled.append("r3"))  # both slots held
    assert leases.in_use == 2 and leases.peak == 2
    assert not leases.request("B", "r4", 1, lambda: None)  # waits: the slot lent to r1 is asked back, once
    assert recalled == ["r1"]
    assert not leases.request("B", "r5", 1, lambda: None)
    assert recalled == ["r1"]
    assert leases.release("r2", 1)  # r4 gets r2's slot; r5 still waits
    assert not leases.grant_if_free("A", "r2", -1, lambda: None)  # r5 waits: no slot is free for it
    assert leases.waiting == 1


def test_a_handed_slot_counts_as_granted_only_when_a_call_took_it() -> None:
    leases = LeaseManager(0)
    for run in ("taken", "unused", "dead"):
        assert leases.grant_if_free("A", run, -1, lambda: None)
    assert leases.in_use == 3 and leases.granted_total == 0
    assert leases.release("taken", -1)
    assert leases.release("unused", -1, unused=True)
    assert leases.drop_run("dead") == 1
    assert leases.in_use == 0
    assert leases.granted_total == 1 and leases.handed_total == 1
    assert leases.stats()["handed_total"] == 1
    assert leases.request("A", "taken", -1, lambda: None)  # an id may come again once given back: counted anew
    assert leases.release("taken", -1)
    assert leases.granted_total == 2 and leases.handed_total == 1


def test_a_recall_that_ends_a_run_leaves_the_table_whole() -> None:
    leases = LeaseManager(2)
    # Recalls that free their slots within the call (the network never does): the table stays whole, and the
    # request that caused them says it was granted.
    assert leases.grant_if_free("A", "r1", -1, lambda: leases.drop_run("r1"))
    assert leases.grant_if_free("A", "r2", -1, lambda: leases.drop_run("r2"))
    granted: list[str] = []
    assert leases.request("B", "r3", 1, lambda: granted.append("r3"))  # granted within the request: it says so
    assert granted == ["r3"] and leases.in_use == 1 and leases.waiting == 0


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Run:
    """A run as its lease requests see it (`LeaseHolder` and `BudgetGate` in one)."""

    def __init__(self, run_id: str, project: str, clock: _Clock) -> None:
        self.id, self.project_id, self._clock = run_id, project, clock
        self.ended = False
        self.over_budget = False
        self.granted_at: list[float] = []
        self.waits: list[bool] = []

    def lease_granted(self, lease_id: int) -> None:
        self.granted_at.append(self._clock())

    def slot_wait_changed(self, *, waiting: bool) -> None:
        self.waits.append(waiting)

    def after_budget(self, resume: Callable[[], None]) -> None:
        raise AssertionError("no spending limit in this test")


def test_a_released_slot_reaches_the_next_waiter_inside_the_release_itself() -> None:
    # No event loop runs here: a hand-over through a timer or a poll could not happen at all, and the clock
    # seam shows the waiter's wait ended at the very instant of the release.
    clock = _Clock()
    services = SimpleNamespace(leases=LeaseManager(1), clock=clock)
    runs = {name: _Run(name, project, clock) for name, project in [("a", "P"), ("b", "Q"), ("c", "P"), ("d", "P")]}
    usage = {name: RunUsage() for name in runs}
    leases = {name: RunLeases(run, services, run, usage[name]) for name, run in runs.items()}  # type: ignore[arg-type]
    leases["a"].request(1)
    for t, name in [(1.0, "c"), (2.0, "d"), (3.0, "b")]:  # b is another project's and asks last
        clock.now = t
        leases[name].request(1)
    assert [runs[n].granted_at for n in "abcd"] == [[0.0], [], [], []]
    clock.now = 10.0
    leases["a"].release(1)
    assert runs["c"].granted_at == [10.0] and usage["c"].slot_wait_seconds == 9.0
    assert runs["c"].waits == [True, False]
    clock.now = 12.5
    leases["c"].release(1)
    # Project P was just served: Q's b comes before P's d although it asked last (fairness as before).
    assert runs["b"].granted_at == [12.5] and usage["b"].slot_wait_seconds == 9.5
    assert runs["d"].granted_at == [] and services.leases.waiting == 1
    assert services.leases.in_use == 1
