"""An in-flight slot goes back only once its HTTP response is over, seen from the provider's side too.

"Over" means read to its end (the server finished sending) or closed by us (the server sees the hang-up):
never while the server still has the request open. The provider is the real fake server over HTTP; the
order of "closed" and "released" is taken from a transport that wraps the real one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest

from tests.fake_provider import Failure, FakeProvider, Step
from tests.llm.conftest import make_engine, openai_chunk
from yagent.workers.llm import FallbackEngine, Message, SemaphoreGate, TextDelta

SYSTEM = "You are the Coding agent."


def _messages(i: int) -> list[Message]:
    return [Message.system(SYSTEM), Message.user(f"request {i}")]


def _script_each(fake: FakeProvider, count: int, step: Step) -> None:
    for i in range(count):
        fake.script(f"run{i}", "Coding agent", [step], user_contains=f"request {i}")


@pytest.mark.parametrize("api_format", ["openai", "anthropic"])
def test_with_one_slot_the_provider_never_has_two_requests_open_when_responses_end_slowly(
        fake: FakeProvider, api_format: str) -> None:
    # The last bytes (after the end marker) come 0.3 s late: a client that hangs up at the end marker and
    # hands its slot on lets the next request in while the server still serves this one.
    _script_each(fake, 4, Step(text="the answer", end_latency=0.3))

    async def main() -> list[str]:
        async with make_engine(fake, api_format, gate=SemaphoreGate(1)) as engine:
            responses = await asyncio.gather(*(engine.complete(_messages(i)).final() for i in range(4)))
        return [r.text for r in responses]

    assert asyncio.run(main()) == ["the answer"] * 4
    assert all(r.completed for r in fake.requests)
    assert fake.most_open_at_once() == 1
    fake.assert_no_problems()


def test_a_consumer_cancelled_again_and_again_while_it_hangs_up_still_closes_before_the_slot_goes_back(
        fake: FakeProvider) -> None:
    fake.script("run0", "Coding agent", [Step(text="x" * 200, chunk_size=2, latency=0.02)], user_contains="request 0")
    fake.script("run1", "Coding agent", [Step(text="next")], user_contains="request 1")

    async def main() -> str:
        async with make_engine(fake, gate=SemaphoreGate(1)) as engine:
            leaving = asyncio.Event()

            async def consume() -> None:
                async with engine.complete(_messages(0)) as stream:
                    async for delta in stream:
                        if isinstance(delta, TextDelta):
                            leaving.set()
                            break  # hanging up: the way out runs from here, in this task

            first = asyncio.create_task(consume())
            async with asyncio.timeout(10):
                await leaving.wait()
            waiting = asyncio.create_task(engine.complete(_messages(1)).final())
            # A stop escalation at its harshest: a cancellation at every await of the way out.
            while not first.done():
                first.cancel()
                await asyncio.sleep(0)
            async with asyncio.timeout(10):
                return (await waiting).text

    assert asyncio.run(main()) == "next"
    assert fake.requests_for("run0")[0].disconnected
    assert fake.most_open_at_once() == 1


def test_what_follows_the_end_marker_is_read_but_never_parsed_and_a_server_that_never_ends_is_hung_up_on(
        fake: FakeProvider) -> None:
    events = [openai_chunk({"content": "kept"}), openai_chunk({}, "stop"), "data: [DONE]\n\n",
              openai_chunk({"content": " and not this"})]
    # After its end marker the server neither ends the body nor closes: the idle timeout is a minute away.
    fake.script("coding", "Coding agent", [Step(raw=events, failure=Failure.stall(after_chunks=len(events)))])

    async def main() -> str:
        async with make_engine(fake, gate=SemaphoreGate(1), idle_timeout=60) as engine:
            async with asyncio.timeout(20):
                return (await engine.complete(_messages(0)).final()).text

    assert asyncio.run(main()) == "kept"
    assert fake.wait_for_disconnect(timeout=10).disconnected


# -- the order of closing and releasing, on every path --------------------------------------------------


class _Recording(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, log: list[str]) -> None:
        self._inner = inner
        self._log = log

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()
        self._log.append("closed")


class _ClosingTransport(httpx.AsyncBaseTransport):
    """The real HTTP transport, noting in `log` when each response's connection has been let go of."""

    def __init__(self, log: list[str]) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self._log = log

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(response.status_code, headers=response.headers, extensions=response.extensions,
                              stream=_Recording(response.stream, self._log))

    async def aclose(self) -> None:
        await self._inner.aclose()


class _LoggingGate:
    def __init__(self, log: list[str]) -> None:
        self._log = log

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        self._log.append("acquired")
        try:
            yield
        finally:
            self._log.append("released")


async def _early_exit(stream) -> None:
    async with stream:
        async for delta in stream:
            if isinstance(delta, TextDelta):
                break


async def _to_the_end(stream) -> None:
    await stream.final()


@pytest.mark.parametrize(("steps", "consume", "closed"), [
    ([Step(text="whole", end_latency=0.05)], _to_the_end, 1),
    ([Step(text="y" * 100, chunk_size=2, latency=0.01)], _early_exit, 1),
    ([Step(failure=Failure.http(500)), Step(text="abc", failure=Failure.truncate(2)), Step(text="ok")], _to_the_end, 3),
    ([Step(text="abc", failure=Failure.malformed_event(after_chunks=2))], _to_the_end, 1),
    ([Step(failure=Failure.http(429, retry_after=0))] * 2, _to_the_end, 2),
], ids=["to-the-end", "left-early", "retried", "unreadable", "retries-spent"])
@pytest.mark.parametrize("fallback", [False, True], ids=["engine", "fallback-chain"])
def test_a_request_releases_its_one_slot_only_after_every_response_it_opened_is_closed(
        fake: FakeProvider, steps: list[Step], consume, closed: int, fallback: bool) -> None:
    fake.script("coding", "Coding agent", steps)
    log: list[str] = []

    async def main() -> None:
        client = httpx.AsyncClient(transport=_ClosingTransport(log))
        gate = _LoggingGate(log)
        primary = make_engine(fake, client=client, max_retries=len(steps) - 1, gate=gate)
        engine = FallbackEngine(primary, [], gate=gate) if fallback else primary
        try:
            await consume(engine.complete(_messages(0)))
        except Exception:  # the failing paths end in the provider's error; the order is the point
            pass
        await client.aclose()

    asyncio.run(main())
    assert log == ["acquired", *["closed"] * closed, "released"]
