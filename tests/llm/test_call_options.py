"""Precedence of max_tokens / temperature: per-call options > provider config > not sent. A per-call 0 means
"not set"; in the provider's table the key's existence decides for temperature (`temperature = 0` is greedy)."""

from __future__ import annotations

import asyncio

import pytest

from tests.fake_provider import FakeProvider, Step
from tests.llm.conftest import SYSTEM, make_engine
from yagent.workers.llm import CallOptions, Message

MESSAGES = [Message.system(SYSTEM), Message.user("hi")]


def _body(fake: FakeProvider, api_format: str, options: CallOptions | None, **provider: object) -> dict:
    fake.script("coding", "Coding agent", [Step(text="ok")])

    async def main() -> None:
        async with make_engine(fake, api_format, **provider) as engine:
            await engine.complete(MESSAGES, options=options).final()

    asyncio.run(main())
    return fake.requests[-1].body


@pytest.mark.parametrize("api_format", ["openai", "anthropic"])
def test_provider_defaults_reach_the_wire(fake: FakeProvider, api_format: str) -> None:
    body = _body(fake, api_format, None, max_tokens=28000, temperature=0.3)
    assert body["max_tokens"] == 28000
    assert body["temperature"] == 0.3


@pytest.mark.parametrize("api_format", ["openai", "anthropic"])
def test_call_options_win_over_provider_defaults(fake: FakeProvider, api_format: str) -> None:
    body = _body(fake, api_format, CallOptions(max_tokens=512, temperature=0.9), max_tokens=28000, temperature=0.3)
    assert body["max_tokens"] == 512
    assert body["temperature"] == 0.9


@pytest.mark.parametrize("api_format", ["openai", "anthropic"])
def test_zero_max_tokens_and_a_missing_temperature_are_not_configured(fake: FakeProvider, api_format: str) -> None:
    body = _body(fake, api_format, CallOptions(max_tokens=0, temperature=0.0), max_tokens=0, temperature=None)
    assert "temperature" not in body
    if api_format == "openai":
        assert "max_tokens" not in body
    else:
        assert body["max_tokens"] == 8192  # the Messages API requires it


@pytest.mark.parametrize("api_format", ["openai", "anthropic"])
def test_a_configured_temperature_of_zero_is_sent(fake: FakeProvider, api_format: str) -> None:
    body = _body(fake, api_format, None, temperature=0.0)
    assert body["temperature"] == 0.0


def test_zero_in_call_options_falls_back_to_the_provider_value(fake: FakeProvider) -> None:
    body = _body(fake, "openai", CallOptions(max_tokens=0, temperature=0.0), max_tokens=1000, temperature=0.5)
    assert (body["max_tokens"], body["temperature"]) == (1000, 0.5)


def test_call_option_can_switch_reasoning_off(fake: FakeProvider) -> None:
    body = _body(fake, "openai", CallOptions(reasoning_effort=""), reasoning_effort="high")
    assert "reasoning_effort" not in body and "thinking" not in body


def test_extra_body_is_merged_last(fake: FakeProvider) -> None:
    body = _body(fake, "openai", CallOptions(extra_body={"top_p": 0.5, "seed": 7}))
    assert (body["top_p"], body["seed"]) == (0.5, 7)
