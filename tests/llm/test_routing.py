"""Routing: engines handed to agents are always RoutingEngines; override > tier > configured provider."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.fake_provider import Failure, FakeProvider, Step
from tests.llm.conftest import SYSTEM
from tests.llm.seams import FakeClock, RecordingSleep
from yagent.ipc.provider_config import AGENT_NAMES, TOOL_NAMES, ProviderConfig, parse_llm_config
from yagent.workers.llm import (
    FallbackEngine,
    Message,
    RetryPolicy,
    RoutingEngine,
    assign_tiers,
    build_engine,
)
from yagent.workers.llm._router import parse_tier

ROUTER_MARKER = "You route tasks"


def _config(fake: FakeProvider, *, mode: str = "auto", baselines: dict[str, str] | None = None,
            use: str = "mid", **llm: Any) -> dict[str, Any]:
    return {
        "global": {"llm": {"use_provider": use, "providers": {
            "cheap": fake.provider_table("openai", model="gpt-4o-mini"),
            "mid": fake.provider_table("openai", model="deepseek-chat"),
            "smart": fake.provider_table("anthropic", model="claude-sonnet-4-5"),
        }}},
        "llm": {"max_retries": 0, **llm},
        "routing": {"mode": mode, "baselines": baselines or {}},
    }


def _build(fake: FakeProvider, agent: str | None = "coding", tool: str | None = None, **config: Any) -> RoutingEngine:
    retry = RetryPolicy(jitter=0.0, sleep=RecordingSleep(), clock=FakeClock())
    return build_engine(parse_llm_config(_config(fake, **config), {}), agent, tool, retry=retry)


def test_every_engine_handed_out_is_a_routing_engine(fake: FakeProvider) -> None:
    """Rebuilding an agent's engine without the router silently disables auto-routing."""
    built = [_build(fake, agent) for agent in (*AGENT_NAMES, None)]
    built += [_build(fake, "coding", tool) for tool in TOOL_NAMES]
    built += [_build(fake, "coding", mode="fixed"), _build(fake, "chat", use="cheap")]
    assert all(type(engine) is RoutingEngine for engine in built)
    override = build_engine(parse_llm_config(_config(fake), {}), "coding", override="smart")
    assert type(override) is RoutingEngine and override.provider == "smart"


def test_tiers_follow_catalog_scores() -> None:
    def provider(name: str, model: str, **extra: Any) -> ProviderConfig:
        return ProviderConfig(name=name, model=model, api_base_url="http://x", api_key="k", **extra)

    tiers = assign_tiers([provider("a", "gpt-4o-mini"), provider("b", "claude-sonnet-4-5"),
                          provider("c", "deepseek-chat"), provider("d", "some-unknown-model"),
                          provider("e", "claude-opus-4-5", missing_key_env="NOPE")])
    assert tiers == {"fast": "a", "balanced": "c", "high": "b"}
    assert assign_tiers([provider("x", "unknown-model")]) == {}


def test_classified_tier_wins_over_the_configured_provider(fake: FakeProvider) -> None:
    fake.script("router", ROUTER_MARKER, [Step(text='{"tier": "high"}')])
    fake.script("coding", "Coding agent", [Step(text="from the high tier")])
    engine = _build(fake)
    assert engine.provider == "mid"  # before routing: the configured use_provider

    async def main() -> tuple[Any, Any]:
        decision = await engine.route("Redesign the scheduler across twelve modules")
        response = await engine.complete([Message.system(SYSTEM), Message.user("go")]).final()
        await engine.aclose()
        return decision, response

    decision, response = asyncio.run(main())
    assert (decision.tier, decision.reason, decision.provider) == ("high", "classified", "smart")
    assert response.provider == "smart" and response.text == "from the high tier"
    classify, call = fake.requests
    assert classify.body["model"] == "gpt-4o-mini"  # the fast tier classifies
    assert "Redesign the scheduler" in classify.first_user
    assert call.path == "/v1/messages" and call.body["model"] == "claude-sonnet-4-5"


def test_runtime_override_wins_over_the_tier_and_skips_classification(fake: FakeProvider) -> None:
    fake.script("router", ROUTER_MARKER, [Step(text='{"tier": "high"}')])
    fake.script("coding", "Coding agent", [Step(text="a"), Step(text="b")])
    engine = _build(fake)

    async def main() -> list[Any]:
        await engine.route("hard task")
        engine.set_override("cheap")
        first = await engine.complete([Message.system(SYSTEM), Message.user("go")]).final()
        decision = await engine.route("another task")
        engine.set_override(None)
        second = await engine.complete([Message.system(SYSTEM), Message.user("go")]).final()
        await engine.aclose()
        return [first, decision, second]

    first, decision, second = asyncio.run(main())
    assert first.provider == "cheap"
    assert decision.reason == "override" and decision.provider == "cheap"
    assert second.provider == "smart"  # back to the routed tier
    assert len(fake.requests_for("router")) == 1  # the override skipped the second classification


def test_fixed_mode_never_classifies(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(text="ok")])
    engine = _build(fake, mode="fixed")

    async def main() -> Any:
        decision = await engine.route("anything")
        await engine.complete([Message.system(SYSTEM), Message.user("go")]).final()
        await engine.aclose()
        return decision

    decision = asyncio.run(main())
    assert (decision.reason, decision.provider) == ("fixed", "mid")
    assert fake.requests_for("router") == [] and len(fake.requests) == 1


@pytest.mark.parametrize("step", [
    Step(failure=Failure.http(500)),
    Step(text="I think this is a medium-hard task, maybe high or fast"),
    Step(text="this stalls", failure=Failure.stall(after_chunks=1)),
])
def test_failed_classification_falls_back_to_the_role_baseline(fake: FakeProvider, step: Step) -> None:
    fake.script("router", ROUTER_MARKER, [step])
    engine = _build(fake, baselines={"coding": "fast"})
    engine.classify_timeout = 0.3

    async def main() -> Any:
        decision = await engine.route("task")
        await engine.aclose()
        return decision

    decision = asyncio.run(main())
    assert (decision.tier, decision.reason, decision.provider) == ("fast", "baseline", "cheap")
    assert "classification failed" in decision.detail


def test_waiting_for_an_in_flight_slot_does_not_count_against_the_classification_cap(fake: FakeProvider) -> None:
    """Pitfall 37 for Classify: a queue in front of the provider is not a slow classifier.

    The gate stands for a daemon whose in-flight slots are all taken: acquiring a slot moves the event
    loop's clock (what a wall-clock cap reads) a minute forward. The 30 s cap must start once the slot
    is held, like `[llm] timeout`, so the classification still answers.
    """
    fake.script("router", ROUTER_MARKER, [Step(text='{"tier": "high"}')])

    async def main() -> Any:
        loop = asyncio.get_running_loop()
        offset = 0.0
        real_time = loop.time
        loop.time = lambda: real_time() + offset  # type: ignore[method-assign]

        class QueuedGate:
            @contextlib.asynccontextmanager
            async def hold(self) -> AsyncIterator[None]:
                nonlocal offset
                offset += 60.0  # a minute spent queued for a slot
                yield

        clock = FakeClock()
        retry = RetryPolicy(jitter=0.0, sleep=RecordingSleep(clock), clock=clock)
        engine = build_engine(parse_llm_config(_config(fake), {}), "coding", retry=retry, gate=QueuedGate())
        try:
            return await engine.route("Redesign the scheduler across twelve modules")
        finally:
            await engine.aclose()
            loop.time = real_time  # type: ignore[method-assign]

    decision = asyncio.run(main())
    assert (decision.tier, decision.reason, decision.detail) == ("high", "classified", "")
    assert len(fake.requests_for("router")) == 1


def test_the_classification_cap_bounds_the_call_once_it_holds_a_slot(fake: FakeProvider) -> None:
    """Control arm: the cap still applies to the call itself (here a stalled stream)."""
    fake.script("router", ROUTER_MARKER, [Step(text="this stalls", failure=Failure.stall(after_chunks=1))])
    engine = _build(fake, baselines={"coding": "fast"})
    engine.classify_timeout = 0.2

    async def main() -> Any:
        try:
            return await engine.route("task")
        finally:
            await engine.aclose()

    decision = asyncio.run(main())
    assert (decision.tier, decision.reason) == ("fast", "baseline")
    assert "TimeoutError" in decision.detail


def test_failed_classification_without_baseline_uses_the_configured_provider(fake: FakeProvider) -> None:
    fake.script("router", ROUTER_MARKER, [Step(text="no idea")])
    engine = _build(fake, use="smart")

    async def main() -> Any:
        decision = await engine.route("task")
        await engine.aclose()
        return decision

    decision = asyncio.run(main())
    assert (decision.tier, decision.reason, decision.provider) == (None, "configured", "smart")


def test_single_provider_skips_classification(fake: FakeProvider) -> None:
    config = {"global": {"llm": {"providers": {"only": fake.provider_table(model="deepseek-chat")}}}}
    engine = build_engine(parse_llm_config(config, {}), "coding")

    async def main() -> Any:
        decision = await engine.route("task")
        await engine.aclose()
        return decision

    assert asyncio.run(main()).reason == "single_tier"
    assert fake.requests == []


def test_single_tier_never_moves_a_role_off_its_configured_provider(fake: FakeProvider) -> None:
    """The only tiered provider is someone else's: the Director keeps the provider the user gave it."""
    fake.script("director", "You are the Director", [Step(text="from the local model")])
    config = {
        "global": {"llm": {"use_provider": "cheap", "providers": {
            "cheap": fake.provider_table("openai", model="gpt-4o-mini"),
            "local": fake.provider_table("openai", model="my-finetune-not-in-the-catalog"),
        }}},
        "agents": {"llm": {"director": {"use_provider": "local"}}},
        "llm": {"max_retries": 0},
    }
    engine = build_engine(parse_llm_config(config, {}), "director")
    assert engine.tiers == {"fast": "cheap", "balanced": "cheap", "high": "cheap"}  # precondition

    async def main() -> tuple[Any, Any]:
        decision = await engine.route("Plan the release")
        response = await engine.complete([Message.system("You are the Director."), Message.user("go")]).final()
        await engine.aclose()
        return decision, response

    decision, response = asyncio.run(main())
    assert (decision.tier, decision.reason, decision.provider) == (None, "configured", "local")
    assert "'local'" in decision.detail and "'cheap'" in decision.detail
    assert engine.tier is None and engine.provider == "local"
    assert response.provider == "local" and response.text == "from the local model"
    (call,) = fake.requests  # nothing was classified, and the call went to the configured model
    assert call.body["model"] == "my-finetune-not-in-the-catalog"
    fake.assert_no_problems()

    # Control: a role whose configured provider is the tiered one still gets the single tier.
    coding = build_engine(parse_llm_config(config, {}), "coding")

    async def route_coding() -> Any:
        decision = await coding.route("task")
        await coding.aclose()
        return decision

    assert (asyncio.run(route_coding()).reason, coding.provider) == ("single_tier", "cheap")


def test_fallback_providers_are_wired_inside_the_router(fake: FakeProvider) -> None:
    config = _config(fake)
    config["global"]["llm"]["providers"]["mid"]["fallback_providers"] = ["cheap", {"provider": "smart", "weight": 2}]
    engine = build_engine(parse_llm_config(config, {}), "coding")
    inner = engine.resolve()
    assert isinstance(inner, FallbackEngine)
    assert [(e.provider, w) for e, w in inner.fallbacks] == [("cheap", 1), ("smart", 2)]
    config["llm"]["enable_fallback"] = False
    assert not isinstance(build_engine(parse_llm_config(config, {}), "coding").resolve(), FallbackEngine)


def test_parse_tier() -> None:
    assert parse_tier('{"tier": "high"}') == "high"
    assert parse_tier('Sure! ```json\n{"tier":"fast"}\n```') == "fast"
    assert parse_tier("balanced") == "balanced"
    with pytest.raises(ValueError):
        parse_tier("fast or high")
    with pytest.raises(ValueError):
        parse_tier('{"tier": "extreme"}')
