"""Limits the daemon enforces: in-flight LLM leases, delegation pools, the live-worker cap."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.daemon_harness import arun, collect_turn, of_type, script, submit
from yagent.ipc.messages import Ack, DaemonStatus, ListTasks, StatusRequest, TaskControl, TaskList
from yagent.ipc.vocabulary import EventType

pytestmark = pytest.mark.e2e


def _max_overlap(spans: list[tuple[float, float]]) -> int:
    points = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    live = peak = 0
    for _, delta in points:
        live += delta
        peak = max(peak, live)
    return peak


def test_leases_never_exceed_the_limit_under_50_concurrent_runs(make_daemon, tmp_path: Path) -> None:
    daemon = make_daemon("[llm]\nmax_in_flight_requests = 3\n[daemon]\nmax_workers = 64\n")
    projects = []
    for i in range(5):
        p = tmp_path / f"p{i}"
        p.mkdir()
        projects.append(p)

    async def go():
        async with daemon.client(timeout=30) as c:
            subs = [await submit(c, projects[i % 5], script({"lease": 0.02}, {"lease": 0.02})) for i in range(50)]
            results = await asyncio.gather(*(collect_turn(c, s.task) for s in subs))
            status = await c.request(StatusRequest(id=0), DaemonStatus)
            return results, status

    results, status = arun(go(), timeout=180)
    assert all(of_type(evs, EventType.TURN_FINISHED)[0].data["status"] == "done" for evs in results)
    leases = status.leases
    assert leases["granted_total"] == 100
    assert leases["peak"] <= 3
    assert leases["peak"] == 3, "the limit was never reached: the test did not create contention"
    assert leases["in_use"] == 0 and leases["waiting"] == 0
    assert status.runs_started == 50


def test_unlimited_leases_when_the_limit_is_zero(make_daemon, project: Path) -> None:
    daemon = make_daemon("[llm]\nmax_in_flight_requests = 0\n[agent]\nmax_parallel_delegations = 4\n")

    async def go():
        async with daemon.client() as c:
            children = [{"agent": "scripted", "task": script({"lease": 0.5})} for _ in range(4)]
            sub = await submit(c, project, script({"delegate": children}))
            await collect_turn(c, sub.task)
            return await c.request(StatusRequest(id=0), DaemonStatus)

    status = arun(go())
    assert status.leases["limit"] == 0
    assert status.leases["granted_total"] == 4
    assert status.leases["peak"] == 4


def test_delegation_pool_bounds_parallel_children(make_daemon, project: Path) -> None:
    daemon = make_daemon("[agent]\nmax_parallel_delegations = 2\n")

    async def go():
        async with daemon.client() as c:
            children = [{"agent": "scripted", "task": script({"busy": 0.3}, output=f"c{i}")} for i in range(5)]
            sub = await submit(c, project, script({"delegate": children}))
            return await collect_turn(c, sub.task)

    events = arun(go())
    root = of_type(events, EventType.RUN_STARTED)[0].run
    starts = {e.run: e.ts for e in of_type(events, EventType.RUN_STARTED) if e.run != root}
    ends = {e.run: e.ts for e in of_type(events, EventType.RUN_FINISHED) if e.run != root}
    assert len(starts) == 5
    spans = [(starts[r], ends[r]) for r in starts]
    assert _max_overlap(spans) == 2
    notes = json.loads(of_type(events, EventType.TURN_FINISHED)[0].data["output"])["notes"][0]
    assert [n["output"] for n in notes] == [f"c{i}" for i in range(5)]


def test_serial_when_the_pool_is_one(make_daemon, project: Path) -> None:
    daemon = make_daemon("[agent]\nmax_parallel_delegations = 1\n")

    async def go():
        async with daemon.client() as c:
            children = [{"agent": "scripted", "task": script({"busy": 0.1})} for _ in range(3)]
            sub = await submit(c, project, script({"delegate": children}))
            return await collect_turn(c, sub.task)

    events = arun(go())
    root = of_type(events, EventType.RUN_STARTED)[0].run
    starts = {e.run: e.ts for e in of_type(events, EventType.RUN_STARTED) if e.run != root}
    ends = {e.run: e.ts for e in of_type(events, EventType.RUN_FINISHED) if e.run != root}
    assert _max_overlap([(starts[r], ends[r]) for r in starts]) == 1


def test_nested_delegation_does_not_deadlock_with_a_pool_of_one(make_daemon, project: Path) -> None:
    daemon = make_daemon("[agent]\nmax_parallel_delegations = 1\n[daemon]\nmax_workers = 2\n")
    leaf = script(output="leaf")
    middle = script({"delegate": [{"agent": "scripted", "task": leaf}]}, output="middle")

    async def go():
        async with daemon.client() as c:
            sub = await submit(c, project, script({"delegate": [{"agent": "scripted", "task": middle}]}))
            return await collect_turn(c, sub.task)

    events = arun(go(), timeout=60)
    finished = of_type(events, EventType.TURN_FINISHED)[0]
    assert finished.data["status"] == "done"
    assert len(of_type(events, EventType.RUN_STARTED)) == 3
    assert "leaf" in finished.data["output"]


def test_live_worker_cap_queues_new_turns(make_daemon, tmp_path: Path) -> None:
    daemon = make_daemon("[daemon]\nmax_workers = 2\n")
    projects = []
    for i in range(4):
        p = tmp_path / f"w{i}"
        p.mkdir()
        projects.append(p)

    async def go():
        async with daemon.client() as c:
            subs = [await submit(c, p, script({"busy": 0.3})) for p in projects]
            return await asyncio.gather(*(collect_turn(c, s.task) for s in subs))

    results = arun(go())
    spans = [(of_type(evs, EventType.RUN_STARTED)[0].ts, of_type(evs, EventType.RUN_FINISHED)[0].ts) for evs in results]
    assert _max_overlap(spans) == 2
    assert all(of_type(evs, EventType.TURN_FINISHED)[0].data["status"] == "done" for evs in results)


def test_ps_says_which_run_waits_for_a_model_slot(make_daemon, tmp_path: Path) -> None:
    # With every slot taken by another project, a run is alive but silent: `yagent ps` must say why.
    daemon = make_daemon("[llm]\nmax_in_flight_requests = 1\n")
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()

    async def until(predicate, what: str, timeout: float = 20):
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            value = await predicate()
            if value:
                return value
            assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
            await asyncio.sleep(0.05)

    async def go():
        async with daemon.client() as c:
            holder = await submit(c, first, script({"lease": 60}))

            async def slot_taken():
                return (await c.request(StatusRequest(id=0), DaemonStatus)).leases["in_use"] == 1

            await until(slot_taken, "the first task to hold the slot")
            waiter = await submit(c, second, script({"lease": 0.01}))

            async def waiting_runs():
                tasks = (await c.request(ListTasks(id=0, project=None, limit=10), TaskList)).tasks
                return {t.task: [r.waiting for r in t.runs] for t in tasks if any(r.waiting for r in t.runs)}

            waiting = await until(waiting_runs, "a run listed as waiting for a model slot")
            await c.request(TaskControl(id=0, task=holder.task, action="cancel"), Ack)
            events = await collect_turn(c, waiter.task)
            return waiting, waiter.task, await waiting_runs(), events, await collect_turn(c, holder.task)

    waiting, waiter, after, events, holder_events = arun(go(), timeout=60)
    assert list(waiting) == [waiter], waiting
    assert "max_in_flight_requests = 1" in waiting[waiter][0]
    assert after == {}  # granted, nobody waits any more
    # Attached clients are told too: the wait starts, then ends when the slot is granted.
    assert [e.data for e in events if e.type == EventType.LLM_SLOT_WAIT] == [{"waiting": True, "limit": 1},
                                                                             {"waiting": False, "limit": 1}]
    # A lease granted at once never waited: nothing is said about it.
    assert not [e for e in holder_events if e.type == EventType.LLM_SLOT_WAIT], holder_events
