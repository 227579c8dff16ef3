"""Retries and error classes: what is retried, how long it waits, and what the error says."""

from __future__ import annotations

import asyncio
import socket

import pytest

from tests.fake_provider import Failure, FakeProvider, Step
from tests.llm.conftest import SYSTEM, make_engine, provider_config
from tests.llm.seams import FakeClock, RecordingSleep
from yagent.ipc.config import settings_from_table
from yagent.ipc.provider_config import LLMSettings
from yagent.workers.llm import (
    LLMAuthError,
    LLMBadRequestError,
    LLMError,
    LLMNetworkError,
    LLMRateLimitError,
    LLMServerError,
    LLMTimeoutError,
    Message,
    OpenAIEngine,
    RetryPolicy,
    StreamRestart,
    build_engine,
    parse_retry_after,
)

MESSAGES = [Message.system(SYSTEM), Message.user("hi")]


def _call(fake: FakeProvider, api_format: str = "openai", **engine: object) -> tuple[object, list[object]]:
    async def main() -> tuple[object, list[object]]:
        async with make_engine(fake, api_format, **engine) as eng, eng.complete(MESSAGES) as stream:
            deltas = [d async for d in stream]
            return await stream.final(), deltas

    return asyncio.run(main())


@pytest.mark.parametrize("api_format", ["openai", "anthropic"])
def test_429_waits_exactly_retry_after_then_succeeds(fake: FakeProvider, api_format: str) -> None:
    fake.script("coding", "Coding agent", [Step(failure=Failure.http(429, retry_after=7)), Step(text="ok")])
    sleep = RecordingSleep()
    response, _ = _call(fake, api_format, sleep=sleep)
    assert response.text == "ok" and response.attempts == 2
    assert sleep.delays == [7.0]
    assert len(fake.requests) == 2


def test_server_errors_back_off_exponentially(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(failure=Failure.http(500)), Step(failure=Failure.http(503)),
                                            Step(failure=Failure.http(502)), Step(text="ok")])
    sleep = RecordingSleep()
    response, _ = _call(fake, sleep=sleep, max_retries=5)
    assert response.text == "ok"
    assert sleep.delays == [1.0, 2.0, 4.0]


def test_backoff_is_capped_at_thirty_seconds() -> None:
    policy = RetryPolicy(jitter=0.0)
    error = LLMServerError("x", provider="p", model="m", status=500)
    assert [policy.delay(n, error) for n in (1, 5, 6, 10)] == [1.0, 16.0, 30.0, 30.0]


@pytest.mark.parametrize(("status", "error_class"), [
    (408, LLMTimeoutError), (409, LLMServerError), (429, LLMRateLimitError), (500, LLMServerError),
    (529, LLMServerError)])
def test_retryable_statuses_are_retried(fake: FakeProvider, status: int, error_class: type[LLMError]) -> None:
    fake.script("coding", "Coding agent", [Step(failure=Failure.http(status, message="nope"))] * 3)
    with pytest.raises(error_class) as info:
        _call(fake, max_retries=2)
    assert len(fake.requests) == 3
    assert info.value.attempts == 3 and info.value.status == status
    assert "after 3 attempts" in str(info.value)


@pytest.mark.parametrize(("status", "error_class"), [
    (400, LLMBadRequestError), (401, LLMAuthError), (403, LLMAuthError), (404, LLMBadRequestError),
    (422, LLMBadRequestError)])
@pytest.mark.parametrize("api_format", ["openai", "anthropic"])
def test_client_errors_are_not_retried_and_name_provider_model_status(
        fake: FakeProvider, status: int, error_class: type[LLMError], api_format: str) -> None:
    fake.script("coding", "Coding agent", [Step(failure=Failure.http(status, message="model not allowed")),
                                            Step(text="never reached")])
    with pytest.raises(error_class) as info:
        _call(fake, api_format, max_retries=5)
    assert len(fake.requests) == 1
    message = str(info.value)
    assert "'fakeprov'" in message and "fake-model" in message and f"HTTP {status}" in message
    assert "model not allowed" in message  # the provider's own explanation is kept


def test_auth_error_says_what_to_do(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(failure=Failure.http(401, message="invalid x-api-key"))])
    with pytest.raises(LLMAuthError, match="api_key_env"):
        _call(fake)


def test_retry_after_longer_than_the_budget_gives_up_at_once(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(failure=Failure.http(429, retry_after=120)), Step(text="ok")])
    sleep = RecordingSleep()
    with pytest.raises(LLMRateLimitError):
        _call(fake, sleep=sleep, timeout=30, max_retries=5)
    assert sleep.delays == []
    assert len(fake.requests) == 1


def test_backoff_stops_when_the_remaining_budget_is_too_small(fake: FakeProvider) -> None:
    # timeout 5s: waits of 1 + 2 fit (3s spent), the next 4s wait does not.
    fake.script("coding", "Coding agent", [Step(failure=Failure.http(500))] * 6)
    clock = FakeClock()
    sleep = RecordingSleep(clock)
    with pytest.raises(LLMServerError):
        _call(fake, clock=clock, sleep=sleep, timeout=5, max_retries=10)
    assert sleep.delays == [1.0, 2.0]
    assert len(fake.requests) == 3


@pytest.mark.parametrize("api_format", ["openai", "anthropic"])
def test_truncated_stream_is_a_network_error_and_is_retried_with_a_restart(fake: FakeProvider,
                                                                          api_format: str) -> None:
    fake.script("coding", "Coding agent", [
        Step(text="first try is cut short", chunk_size=2, failure=Failure.truncate(after_chunks=5)),
        Step(text="second try")])
    response, deltas = _call(fake, api_format)
    assert response.text == "second try"
    restarts = [d for d in deltas if isinstance(d, StreamRestart)]
    assert len(restarts) == 1 and restarts[0].attempt == 2
    # Deltas before the restart belong to the void first attempt.
    assert deltas.index(restarts[0]) > 0


def test_truncated_stream_without_retries_raises_network_error(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(text="cut short", failure=Failure.truncate(after_chunks=2))])
    with pytest.raises(LLMNetworkError, match="cut short"):
        _call(fake, max_retries=0)


@pytest.mark.parametrize("api_format", ["openai", "anthropic"])
def test_malformed_event_is_a_server_error(fake: FakeProvider, api_format: str) -> None:
    fake.script("coding", "Coding agent", [Step(text="abc", failure=Failure.malformed_event(after_chunks=2))])
    with pytest.raises(LLMServerError, match="not JSON"):
        _call(fake, api_format, max_retries=0)


def test_openai_error_chunk_mid_stream_is_classified_by_type(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(text="abc", failure=Failure.error_event(
        after_chunks=2, error_type="rate_limit_exceeded", message="slow down"))])
    with pytest.raises(LLMRateLimitError, match="slow down"):
        _call(fake, max_retries=0)


def test_openai_error_chunk_with_an_http_code_is_classified_by_code(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(text="abc", failure=Failure.error_event(
        after_chunks=2, error_type="whatever", message="key revoked", status=401))])
    with pytest.raises(LLMAuthError, match="key revoked"):
        _call(fake, max_retries=3)
    assert len(fake.requests) == 1


def test_stalled_stream_times_out_and_the_server_sees_the_hang_up(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(text="stalls here", failure=Failure.stall(after_chunks=2))])
    with pytest.raises(LLMTimeoutError, match="stalled"):
        _call(fake, idle_timeout=0.2, max_retries=0)
    assert fake.wait_for_disconnect(timeout=5).step == 0


def test_the_stall_timeout_comes_from_the_configuration(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(text="stalls here", failure=Failure.stall(after_chunks=2))])
    config = {"global": {"llm": {"use_provider": "fake", "providers": {"fake": fake.provider_table()}}},
              "llm": {"stall_timeout": "300ms", "max_retries": 0}}

    async def main() -> None:
        engine = build_engine(settings_from_table(config, environ={}).run_settings.llm, agent="coding")
        async with engine.complete([Message.system(SYSTEM), Message.user("hi")]) as stream:
            async for _ in stream:
                pass

    with pytest.raises(LLMTimeoutError, match=r"no data for 0\.3s \(raise \[llm\] stall_timeout"):
        asyncio.run(main())
    assert fake.wait_for_disconnect(timeout=5).step == 0


def test_spent_budget_is_a_non_retryable_timeout(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(text="x" * 400, chunk_size=4)])

    class TickingClock(FakeClock):
        def __call__(self) -> float:  # every reading costs a second: the budget runs out mid-stream
            self.now += 1.0
            return self.now

    with pytest.raises(LLMTimeoutError, match=r"budget of 20s \(\[llm\] timeout\)") as info:
        _call(fake, clock=TickingClock(), timeout=20, max_retries=5)
    assert info.value.retryable is False
    assert len(fake.requests) == 1


def test_connection_refused_is_a_network_error_naming_the_url(fake: FakeProvider) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = provider_config(fake)
    config = type(config)(name="down", model="m1", api_base_url=f"http://127.0.0.1:{port}/v1", api_key="k")

    async def main() -> None:
        sleep = RecordingSleep()
        retry = RetryPolicy(max_retries=2, jitter=0.0, sleep=sleep, clock=FakeClock())
        async with OpenAIEngine(config, settings=LLMSettings(timeout=60), retry=retry) as engine:
            await engine.complete(MESSAGES).final()

    with pytest.raises(LLMNetworkError) as info:
        asyncio.run(main())
    message = str(info.value)
    assert f"127.0.0.1:{port}" in message and "'down'" in message and "no HTTP status" in message
    assert info.value.attempts == 3


def test_a_password_in_the_base_url_is_masked_in_the_network_error(fake: FakeProvider) -> None:
    # The error text travels into events, the rollout and a parent's tool result, so to a model provider.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = provider_config(fake)
    config = type(config)(name="proxied", model="m1", api_base_url=f"http://corp:s3cret-pw@127.0.0.1:{port}/v1",
                          api_key="k")

    async def main() -> None:
        retry = RetryPolicy(max_retries=0, jitter=0.0, sleep=RecordingSleep(), clock=FakeClock())
        async with OpenAIEngine(config, settings=LLMSettings(timeout=60), retry=retry) as engine:
            await engine.complete(MESSAGES).final()

    with pytest.raises(LLMNetworkError) as info:
        asyncio.run(main())
    message = str(info.value)
    assert f"corp:***@127.0.0.1:{port}" in message
    assert "s3cret-pw" not in message


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "12"}) == 12.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=lambda: 1445412480.0) == 10.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None
