"""A model slot freed by a worker's death goes to the next live waiter: real daemon, real workers, kill -9.

Every step waits on an event the daemon published (the holder holds, the waiter waits, a run ended), never on
time: the slot's hand-over is proved by who got it, not by how fast.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from tests.daemon_harness import arun, script, submit
from yagent.ipc import EventStream
from yagent.ipc.messages import DaemonStatus, Event, StatusRequest
from yagent.ipc.vocabulary import EventType

pytestmark = pytest.mark.e2e


async def _until(events: AsyncIterator[Event], want: Callable[[Event], bool], seen: list[Event]) -> Event:
    async for ev in events:
        seen.append(ev)
        if want(ev):
            return ev
    raise AssertionError(f"the event stream ended first; it had {[e.type for e in seen]}")


def _is(type_: str, **data: object) -> Callable[[Event], bool]:
    return lambda ev: ev.type == type_ and all(ev.data.get(k) == v for k, v in data.items())


def _projects(tmp_path: Path, *names: str) -> list[Path]:
    for name in names:
        (tmp_path / name).mkdir()
    return [tmp_path / name for name in names]


def test_a_holder_killed_9_hands_its_slot_to_the_waiting_run(make_daemon, tmp_path: Path) -> None:
    daemon = make_daemon("[llm]\nmax_in_flight_requests = 1\n")
    first, second = _projects(tmp_path, "first", "second")

    async def go() -> tuple[list[Event], list[Event], DaemonStatus]:
        async with daemon.client(timeout=30) as c:
            holder = await submit(c, first, script({"lease": 3600}))  # holds its slot until it dies
            held: list[Event] = []
            async with EventStream(c, holder.task) as hs:
                holder_events = hs.events()
                pid = (await _until(holder_events, _is(EventType.RUN_STARTED), held)).data["pid"]
                await _until(holder_events, _is("lease_held"), held)
                waiter = await submit(c, second, script({"lease": 0}))
                seen: list[Event] = []
                async with EventStream(c, waiter.task) as ws:
                    waiter_events = ws.events()
                    await _until(waiter_events, _is(EventType.LLM_SLOT_WAIT, waiting=True), seen)
                    os.kill(pid, signal.SIGKILL)  # the worst moment: the slot is held and another run waits for it
                    await _until(waiter_events, _is(EventType.TURN_FINISHED), seen)
                await _until(holder_events, _is(EventType.TURN_FINISHED), held)
            return held, seen, await c.request(StatusRequest(id=0), DaemonStatus)

    held, seen, status = arun(go(), timeout=90)
    assert [e.data["status"] for e in seen if e.type == EventType.TURN_FINISHED] == ["done"]
    assert any(e.type == "lease_held" for e in seen), "the waiter never got the dead holder's slot"
    assert [e.data["status"] for e in held if e.type == EventType.TURN_FINISHED] != ["done"]
    assert status.leases["granted_total"] == 2
    assert (status.leases["in_use"], status.leases["waiting"]) == (0, 0)


def test_a_waiter_that_died_is_skipped_and_the_next_one_gets_the_slot(make_daemon, tmp_path: Path) -> None:
    daemon = make_daemon("[llm]\nmax_in_flight_requests = 1\n")
    first, second, third = _projects(tmp_path, "first", "second", "third")

    async def go() -> tuple[list[Event], list[Event], int, DaemonStatus]:
        async with daemon.client(timeout=30) as c:
            holder = await submit(c, first, script({"lease": 3600}))
            held: list[Event] = []
            async with EventStream(c, holder.task) as hs:
                holder_events = hs.events()
                holder_pid = (await _until(holder_events, _is(EventType.RUN_STARTED), held)).data["pid"]
                await _until(holder_events, _is("lease_held"), held)
                gone = await submit(c, second, script({"lease": 0}))  # first in line, then killed while it waits
                gone_seen: list[Event] = []
                async with EventStream(c, gone.task) as gs:
                    gone_events = gs.events()
                    gone_pid = (await _until(gone_events, _is(EventType.RUN_STARTED), gone_seen)).data["pid"]
                    await _until(gone_events, _is(EventType.LLM_SLOT_WAIT, waiting=True), gone_seen)
                    last = await submit(c, third, script({"lease": 0}))
                    seen: list[Event] = []
                    async with EventStream(c, last.task) as ls:
                        last_events = ls.events()
                        await _until(last_events, _is(EventType.LLM_SLOT_WAIT, waiting=True), seen)
                        os.kill(gone_pid, signal.SIGKILL)
                        await _until(gone_events, _is(EventType.TURN_FINISHED), gone_seen)
                        waiting = (await c.request(StatusRequest(id=0), DaemonStatus)).leases["waiting"]
                        os.kill(holder_pid, signal.SIGKILL)
                        await _until(last_events, _is(EventType.TURN_FINISHED), seen)
            return gone_seen, seen, waiting, await c.request(StatusRequest(id=0), DaemonStatus)

    gone_seen, seen, waiting_after_death, status = arun(go(), timeout=90)
    assert waiting_after_death == 1, "the dead waiter's request stayed in the queue"
    assert not any(e.type == "lease_held" for e in gone_seen)
    assert [e.data["status"] for e in seen if e.type == EventType.TURN_FINISHED] == ["done"]
    assert any(e.type == "lease_held" for e in seen)
    assert status.leases["granted_total"] == 2  # the holder's and the last waiter's: none went to the dead one
    assert (status.leases["in_use"], status.leases["waiting"]) == (0, 0)
