"""Fixtures for the LLM layer tests: a fake provider per test and engines pointed at it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.fake_provider import FakeProvider
from tests.llm.seams import FakeClock, RecordingSleep
from yagent.ipc.provider_config import LLMSettings, ProviderConfig
from yagent.workers.llm import InFlightGate, RetryPolicy, UnlimitedGate, engine_for_provider
from yagent.workers.llm._engine import HTTPEngine

SYSTEM = "You are the Coding agent. Follow the plan."


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


def provider_config(fake: FakeProvider, api_format: str = "openai", **extra: Any) -> ProviderConfig:
    table = fake.provider_table(api_format)
    return ProviderConfig(name=extra.pop("name", "fakeprov"), model=extra.pop("model", table["model"]),
                          api_base_url=table["api_base_url"], api_key=table["api_key"], api_format=api_format,
                          **extra)


def make_engine(fake: FakeProvider, api_format: str = "openai", *, timeout: float = 60.0, max_retries: int = 3,
                gate: InFlightGate | None = None, clock: FakeClock | None = None,
                sleep: RecordingSleep | None = None, idle_timeout: float = 10.0,
                client: httpx.AsyncClient | None = None, **provider: Any) -> HTTPEngine:
    """An engine with test seams: the clock and sleep default to fakes so backoff never waits."""
    clock = clock or FakeClock()
    retry = RetryPolicy(max_retries=max_retries, jitter=0.0, sleep=sleep or RecordingSleep(clock), clock=clock)
    return engine_for_provider(provider_config(fake, api_format, **provider),
                               settings=LLMSettings(timeout=timeout, max_retries=max_retries), client=client,
                               gate=gate or UnlimitedGate(), retry=retry, idle_timeout=idle_timeout)


def openai_chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    """One Chat Completions stream event; non-ASCII stays raw UTF-8, as real servers send it."""
    payload = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"
