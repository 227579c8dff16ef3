"""Fallback providers: tried after the primary's retries, in weighted order, under one lease."""

from __future__ import annotations

import asyncio
import random

import pytest

from tests.fake_provider import Failure, FakeProvider, Step
from tests.llm.conftest import SYSTEM, make_engine
from tests.llm.seams import RecordingGate
from yagent.workers.llm import (
    FallbackEngine,
    LLMBadRequestError,
    LLMServerError,
    Message,
    StreamRestart,
)
from yagent.workers.llm._fallback import weighted_order

MESSAGES = [Message.system(SYSTEM), Message.user("hi")]


def _chain(fake: FakeProvider, gate: RecordingGate, rng: random.Random | None = None) -> FallbackEngine:
    primary = make_engine(fake, name="primary", model="model-primary", max_retries=1)
    backup = make_engine(fake, "anthropic", name="backup", model="model-backup", max_retries=5)
    spare = make_engine(fake, name="spare", model="model-spare", max_retries=5)
    return FallbackEngine(primary, [(backup, 1), (spare, 1)], gate=gate, fallback_max_retries=0,
                          rng=(rng or random.Random(1)).random)


def test_fallback_is_used_after_the_primary_exhausts_its_retries(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(text="partial", failure=Failure.truncate(after_chunks=2)),
                                            Step(failure=Failure.http(503)), Step(text="from fallback")])
    gate = RecordingGate()

    async def main() -> tuple[object, list[object]]:
        engine = _chain(fake, gate)
        async with engine.complete(MESSAGES) as stream:
            deltas = [d async for d in stream]
            response = await stream.final()
        await engine.aclose()
        return response, deltas

    response, deltas = asyncio.run(main())
    assert response.text == "from fallback"
    models = [r.body["model"] for r in fake.requests]
    assert models[:2] == ["model-primary", "model-primary"]
    assert models[2] in ("model-backup", "model-spare")
    assert response.provider in ("backup", "spare")
    assert any(isinstance(d, StreamRestart) and "falling back from primary" in d.reason for d in deltas)
    assert (gate.acquired, gate.released) == (1, 1)


def test_bad_request_is_not_handed_to_the_fallbacks(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(failure=Failure.http(400, message="context too long"))])
    gate = RecordingGate()

    async def main() -> None:
        engine = _chain(fake, gate)
        try:
            await engine.complete(MESSAGES).final()
        finally:
            await engine.aclose()

    with pytest.raises(LLMBadRequestError):
        asyncio.run(main())
    assert len(fake.requests) == 1
    assert gate.held == 0


def test_when_every_provider_fails_the_error_lists_them(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(failure=Failure.http(500, message=f"down {i}")) for i in range(4)])
    gate = RecordingGate()

    async def main() -> None:
        engine = _chain(fake, gate)
        try:
            await engine.complete(MESSAGES).final()
        finally:
            await engine.aclose()

    with pytest.raises(LLMServerError) as info:
        asyncio.run(main())
    assert len(fake.requests) == 4  # primary twice (1 retry), each fallback once (0 retries)
    message = str(info.value)
    assert "primary: down 1" in message and "earlier providers also failed" in message
    assert (gate.acquired, gate.released) == (1, 1)


def test_weighted_order_prefers_heavier_entries() -> None:
    entries = [("light", 1), ("heavy", 3)]
    rng = random.Random(7)
    heavy_first = sum(weighted_order(entries, rng.random)[0] == "heavy" for _ in range(4000))  # type: ignore[arg-type]
    assert 0.70 < heavy_first / 4000 < 0.80  # expected 3/4
    assert weighted_order([("a", 1), ("b", 1)], lambda: 0.5) == ["a", "b"]  # ties keep configured order
