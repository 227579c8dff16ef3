"""Auto-routing: pick the fast, balanced or high tier per task, behind one engine an agent holds.

Precedence when resolving the engine for a call: runtime override (the user picked a model) > the
routed tier (`[routing] mode = "auto"`) > the configured `use_provider`. Tiers are built from the
configured providers whose keys are available, ordered by the catalog score of their model.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from yagent.ipc.provider_config import TIERS, ProviderConfig

from ._catalog import ModelCatalog, default_catalog
from ._engine import Engine
from ._messages import Message, ToolDefinition
from ._response import CallOptions, ResponseStream

__all__ = ["CLASSIFY_TIMEOUT", "RouteDecision", "RoutingEngine", "assign_tiers"]

CLASSIFY_TIMEOUT = 30.0
_TASK_CHARS = 6000  # enough of the task to judge difficulty; the classifier call must stay cheap
_TIER_WORD = re.compile(r"\b(fast|balanced|high)\b")

CLASSIFIER_PROMPT = (
    "You route tasks for a coding assistant to a model tier. Reply with one JSON object and nothing else: "
    '{"tier": "fast"} for lookups, short answers and small mechanical edits; {"tier": "balanced"} for '
    'ordinary multi-step work; {"tier": "high"} for hard debugging, design across many files, or subtle '
    "reasoning."
)


def assign_tiers(providers: Sequence[ProviderConfig], catalog: ModelCatalog | None = None) -> dict[str, str]:
    """tier → provider name: lowest score is fast, highest is high, the median is balanced.

    Providers without a usable key or with a model the catalog does not know take no tier; with
    none left the result is empty and routing falls back to the configured provider.
    """
    catalog = catalog or default_catalog()
    scored: list[tuple[float, str]] = []
    for provider in providers:
        info = catalog.lookup(provider.model) if provider.usable else None
        if info is not None:
            scored.append((info.score, provider.name))
    if not scored:
        return {}
    scored.sort()
    return {"fast": scored[0][1], "balanced": scored[(len(scored) - 1) // 2][1], "high": scored[-1][1]}


@dataclass(frozen=True, slots=True)
class RouteDecision:
    """What `route()` chose and why; agents report it as a `model_routed` event.

    reason: "override" | "fixed" | "single_tier" (one provider has a tier and it is the configured one) |
    "classified" | "baseline" (classification failed, the role's `[routing.baselines]` tier is used) |
    "configured" (the configured provider is kept: no model is in the catalog, the only tiered provider
    is another one, or classification failed without a baseline; `detail` says which).
    """

    tier: str | None
    provider: str
    model: str
    reason: str
    detail: str = ""


def parse_tier(text: str) -> str:
    """The tier named by the classifier's reply; raises ValueError when it names none."""
    match = re.search(r"\{.*?\}", text, re.S)
    if match:
        try:
            tier = json.loads(match.group(0)).get("tier")
        except (ValueError, AttributeError):
            tier = None
        if tier in TIERS:
            return tier
    words = _TIER_WORD.findall(text.lower())
    if len(set(words)) == 1:
        return words[0]
    raise ValueError(f"the classifier named no tier: {text[:120]!r}")


class RoutingEngine(Engine):
    """The engine every agent holds; it forwards each call to the engine resolved at that moment.

    `engines` builds (and caches) the engine of a provider by name.
    """

    def __init__(self, *, role: str, configured: str, engines: Callable[[str], Engine],
                 tiers: Mapping[str, str] | None = None, mode: str = "auto", baseline: str | None = None,
                 override: str | None = None, classify_timeout: float = CLASSIFY_TIMEOUT,
                 on_close: Callable[[], object] | None = None) -> None:
        self.role = role
        self.configured = configured
        self.tiers = dict(tiers or {})
        self.mode = mode
        self.baseline = baseline
        self.classify_timeout = classify_timeout
        self._engines = engines
        self._tier: str | None = None
        self._override: str | None = None
        self._on_close = on_close
        engines(configured)  # fail at construction, not at the first call, if it cannot be built
        if override:
            self.set_override(override)

    def __repr__(self) -> str:
        return (f"RoutingEngine(role={self.role!r}, configured={self.configured!r}, mode={self.mode!r}, "
                f"tier={self._tier!r}, override={self._override!r})")

    @property
    def override(self) -> str | None:
        return self._override

    def set_override(self, provider: str | None) -> None:
        """Pin a provider for this agent (the user chose a model); None returns to routing."""
        if provider:
            self._engines(provider)
        self._override = provider or None

    @property
    def tier(self) -> str | None:
        return self._tier

    def use_tier(self, tier: str | None) -> None:
        """Set the tier directly (e.g. restored on resume) instead of classifying again."""
        if tier is not None and tier not in TIERS:
            raise ValueError(f"unknown tier {tier!r}; use one of {', '.join(TIERS)}")
        self._tier = tier

    def resolve(self) -> Engine:
        if self._override:
            return self._engines(self._override)
        if self.mode == "auto" and self._tier in self.tiers:
            return self._engines(self.tiers[self._tier])
        return self._engines(self.configured)

    def open_ahead(self) -> bool:
        """Start opening the connection the next call will use, while the caller gets its request ready (see
        `EngineFactory.open_ahead`); False if nothing was started."""
        opener = getattr(self._engines, "open_ahead", None)
        return bool(opener is not None and opener(self.resolve()))

    @property
    def provider(self) -> str:
        return self.resolve().provider

    @property
    def model(self) -> str:
        return self.resolve().model

    @property
    def context_window(self) -> int:
        return self.resolve().context_window

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolDefinition] = (),
                 options: CallOptions | None = None) -> ResponseStream:
        return self.resolve().complete(messages, tools, options)

    async def classify(self, task: str) -> str:
        """Ask the fast tier's model for a tier; raises on any failure (including the time cap).

        The cap is the call's own budget, so it starts once the in-flight lease is held (pitfall 37): a
        wall-clock timeout around the call would count time queued for a slot and fall back to the
        baseline whenever the daemon is busy.
        """
        engine = self._engines(self.tiers["fast"])
        messages = [Message.system(CLASSIFIER_PROMPT),
                    Message.user(f"Agent: {self.role}\nTask:\n{task[:_TASK_CHARS]}")]
        options = CallOptions(max_tokens=256, timeout=self.classify_timeout)
        async with engine.complete(messages, (), options) as stream:
            response = await stream.final()
        return parse_tier(response.text)

    async def route(self, task: str) -> RouteDecision:
        """Decide the tier for a task. Never raises: a failed classification falls back to the baseline."""
        if self._override:
            return self._decision(None, "override")
        if self.mode != "auto" or not self.tiers:
            return self._decision(None, "fixed" if self.mode != "auto" else "configured",
                                  "" if self.mode != "auto" else "no configured model is in the catalog")
        tiered = set(self.tiers.values())
        if len(tiered) == 1:
            (only,) = tiered
            if only != self.configured:
                # The one provider with a tier is not this role's: there is nothing to choose between,
                # and moving the agent onto an unrelated provider would override the user's choice.
                self._tier = None
                return self._decision(None, "configured",
                                      f"only provider {only!r} has a tier; the configured provider "
                                      f"{self.configured!r} has none, so it is kept")
            self._tier = "balanced"
            return self._decision("balanced", "single_tier")
        try:
            self._tier = await self.classify(task)
            return self._decision(self._tier, "classified")
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # any failure of the classifier falls back; the run must go on
            detail = f"classification failed: {type(exc).__name__}: {exc}"
            self._tier = self.baseline
            return self._decision(self._tier, "baseline" if self.baseline else "configured", detail)

    def _decision(self, tier: str | None, reason: str, detail: str = "") -> RouteDecision:
        engine = self.resolve()
        return RouteDecision(tier=tier, provider=engine.provider, model=engine.model, reason=reason,
                             detail=detail)

    async def aclose(self) -> None:
        if self._on_close is not None:
            result = self._on_close()
            if asyncio.iscoroutine(result):
                await result
