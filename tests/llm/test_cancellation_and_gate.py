"""Cancellation closes the connection; the in-flight lease is held once per logical request and always released."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from tests.fake_provider import Failure, FakeProvider, Step
from tests.llm.conftest import SYSTEM, make_engine
from tests.llm.seams import FakeClock, RecordingGate, RecordingSleep
from yagent.workers.llm import (
    LLMBadRequestError,
    LLMServerError,
    Message,
    SemaphoreGate,
    TextDelta,
)

MESSAGES = [Message.system(SYSTEM), Message.user("hi")]


@pytest.mark.parametrize("api_format", ["openai", "anthropic"])
def test_cancelling_the_consumer_mid_stream_closes_the_connection(fake: FakeProvider, api_format: str) -> None:
    fake.script("coding", "Coding agent", [Step(text="x" * 400, chunk_size=2, latency=0.02)])
    gate = RecordingGate()

    async def main() -> None:
        engine = make_engine(fake, api_format, gate=gate)
        first_text = asyncio.Event()

        async def consume() -> None:
            async with engine.complete(MESSAGES) as stream:
                async for delta in stream:
                    if isinstance(delta, TextDelta):
                        first_text.set()

        task = asyncio.create_task(consume())
        await asyncio.wait_for(first_text.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await fake.wait_for_disconnect_async(timeout=10)
        await engine.aclose()

    asyncio.run(main())
    (record,) = fake.requests
    assert record.disconnected and not record.completed
    assert (gate.acquired, gate.released) == (1, 1)


def test_cancelling_final_during_a_stall_closes_the_connection(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(text="hello there", failure=Failure.stall(after_chunks=2))])
    gate = RecordingGate()

    async def main() -> None:
        async with make_engine(fake, gate=gate, idle_timeout=60) as engine:
            task = asyncio.create_task(engine.complete(MESSAGES).final())
            await fake.wait_for_requests_async(1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await fake.wait_for_disconnect_async(timeout=10)

    asyncio.run(main())
    assert fake.requests[0].disconnected
    assert gate.held == 0


def test_leaving_the_async_with_early_closes_the_connection_and_releases(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(text="y" * 400, chunk_size=2, latency=0.02)])
    gate = RecordingGate()

    async def main() -> None:
        async with make_engine(fake, gate=gate) as engine:
            async with engine.complete(MESSAGES) as stream:
                async for delta in stream:
                    if isinstance(delta, TextDelta):
                        assert gate.held == 1  # the slot is held while streaming
                        break
            assert gate.held == 0
            await fake.wait_for_disconnect_async(timeout=10)

    asyncio.run(main())
    assert (gate.acquired, gate.released) == (1, 1)


def test_retries_occupy_one_slot(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(failure=Failure.http(500)), Step(failure=Failure.http(502)),
                                            Step(text="ok")])
    gate = RecordingGate()

    async def main() -> str:
        async with make_engine(fake, gate=gate) as engine:
            return (await engine.complete(MESSAGES).final()).text

    assert asyncio.run(main()) == "ok"
    assert len(fake.requests) == 3
    assert (gate.acquired, gate.released) == (1, 1)


@pytest.mark.parametrize(("steps", "error"), [
    ([Step(failure=Failure.http(400))], LLMBadRequestError),
    ([Step(failure=Failure.http(500))] * 2, LLMServerError),
    ([Step(text="abc", failure=Failure.malformed_event(after_chunks=2))] * 2, LLMServerError),
])
def test_lease_released_on_error_paths(fake: FakeProvider, steps: list[Step], error: type[Exception]) -> None:
    fake.script("coding", "Coding agent", steps)
    gate = RecordingGate()

    async def main() -> None:
        async with make_engine(fake, gate=gate, max_retries=1) as engine:
            await engine.complete(MESSAGES).final()

    with pytest.raises(error):
        asyncio.run(main())
    assert (gate.acquired, gate.released) == (1, 1)


def test_lease_is_taken_before_the_request_budget_starts(fake: FakeProvider) -> None:
    # Waiting 1000 s for a slot must not count against a 10 s request budget.
    fake.script("coding", "Coding agent", [Step(text="ok")])
    clock = FakeClock()
    gate = RecordingGate(clock=clock, advance_on_acquire=1000)

    async def main() -> str:
        async with make_engine(fake, gate=gate, clock=clock, sleep=RecordingSleep(clock), timeout=10) as engine:
            return (await engine.complete(MESSAGES).final()).text

    assert asyncio.run(main()) == "ok"


def test_the_request_body_is_built_before_the_slot_is_asked_for(fake: FakeProvider) -> None:
    # A slot handed over from another run goes straight to the provider, not to JSON encoding.
    fake.script("coding", "Coding agent", [Step(text="ok")])
    built: list[int] = []
    seen_at_acquire: list[int] = []

    class BodyCheckGate:
        @contextlib.asynccontextmanager
        async def hold(self) -> AsyncIterator[None]:
            seen_at_acquire.append(len(built))
            yield

    async def main() -> str:
        async with make_engine(fake, gate=BodyCheckGate()) as engine:
            build = engine.build_request

            def counting(*args: object) -> dict:
                built.append(1)
                return build(*args)

            engine.build_request = counting  # type: ignore[method-assign]
            return (await engine.complete(MESSAGES).final()).text

    assert asyncio.run(main()) == "ok"
    assert seen_at_acquire == [1]


def test_semaphore_gate_never_lets_two_requests_overlap(fake: FakeProvider) -> None:
    fake.script("a", "Agent A", [Step(text="a" * 60, chunk_size=2, latency=0.005)])
    fake.script("b", "Agent B", [Step(text="b")])
    gate = SemaphoreGate(1)

    async def main() -> None:
        async with make_engine(fake, gate=gate) as engine:
            first = asyncio.create_task(engine.complete([Message.system("Agent A"), Message.user("x")]).final())
            await fake.wait_for_requests_async(1, identity="a")
            second = asyncio.create_task(engine.complete([Message.system("Agent B"), Message.user("x")]).final())
            await asyncio.gather(first, second)

    asyncio.run(main())
    a, b = fake.requests_for("a")[0], fake.requests_for("b")[0]
    assert a.finished_at is not None and a.finished_at <= b.received_at
