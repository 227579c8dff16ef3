"""The in-flight limit as the provider sees it: with `[llm] max_in_flight_requests = 1` and several runs at once,
never two requests open at the provider, even when every response takes its time over its last bytes; and a slot
handed over with a run's start or a child's result stands for a request to the daemon."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.agent_harness import MARKERS, run_turn
from tests.daemon_harness import arun, collect_turn, of_type, submit, wait_until
from tests.fake_provider import Step, ToolCallSpec
from yagent.ipc.vocabulary import EventType

pytestmark = pytest.mark.e2e

RUNS = 4


def test_one_slot_means_one_request_open_at_the_provider_across_concurrent_runs(
        make_agent_daemon, fake, project: Path) -> None:
    daemon = make_agent_daemon("[llm]\nmax_in_flight_requests = 1\n")
    for i in range(RUNS):
        fake.script(f"chat{i}", MARKERS["chat"], [Step(
            text=f"answer {i}", end_latency=0.3,
            tool_calls=[ToolCallSpec("agent_exit", {"summary": f"answer {i}",
                                                    "handoff": {"conclusion": f"answer {i}", "status": "ok"}})])],
            user_contains=f"question {i}")

    async def one(i: int) -> str:
        async with daemon.client() as c:
            sub = await submit(c, project, f"question {i}", agent="chat")
            events = await collect_turn(c, sub.task, turn=sub.turn)
        return next(e for e in events if e.type == EventType.TURN_FINISHED).data["status"]

    async def all_runs() -> list[str]:
        return await asyncio.gather(*(one(i) for i in range(RUNS)))

    assert arun(all_runs(), timeout=90) == ["done"] * RUNS
    fake.assert_no_problems()
    assert len(fake.requests) == RUNS and all(r.completed for r in fake.requests)
    assert fake.most_open_at_once() == 1


def test_a_delegation_on_warm_workers_makes_every_call_in_a_slot_handed_over_without_asking(
        make_agent_daemon, fake, project: Path) -> None:
    # The Director's first call takes the slot that came with its start, the child's the one that came with its own,
    # the Director's next one the slot that came with the child's result: none of the three asks the daemon.
    daemon = make_agent_daemon("[daemon]\nwarm_workers = 2\n")
    wait_until(lambda: daemon.status().warm_workers == 2, 60, "two warm workers")
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("delegate_chat", {"task": "What is 2+2?"})]),
        Step(text="It is 4.", tool_calls=[ToolCallSpec("agent_exit", {"summary": "It is 4."})]),
    ])
    fake.script("chat", MARKERS["chat"], [Step(text="4", tool_calls=[ToolCallSpec("agent_exit", {"summary": "4"})])])
    _, events = run_turn(daemon, project, "What is 2+2?")
    assert of_type(events, EventType.TURN_FINISHED)[0].data["status"] == "done"
    assert [e.data["warm"] for e in of_type(events, EventType.RUN_STARTED)] == [True, True]
    fake.assert_no_problems()
    leases = daemon.status().leases
    assert len(fake.requests) == 3
    assert (leases["granted_total"], leases["handed_total"]) == (3, 3)
    assert (leases["in_use"], leases["waiting"]) == (0, 0)
