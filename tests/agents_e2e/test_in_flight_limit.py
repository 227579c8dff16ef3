"""The in-flight limit as the provider sees it: with `[llm] max_in_flight_requests = 1` and several runs at once,
never two requests open at the provider, even when every response takes its time over its last bytes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.agent_harness import MARKERS
from tests.daemon_harness import arun, collect_turn, submit
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
