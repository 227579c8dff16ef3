"""Trying other providers when the configured one keeps failing (`fallback_providers`, weighted)."""

from __future__ import annotations

import contextlib
import random
from collections.abc import AsyncGenerator, Callable, Sequence

from ._engine import DEFAULT_OPTIONS, Engine, HTTPEngine
from ._errors import LLMBadRequestError, LLMError
from ._gate import UNLIMITED_GATE, InFlightGate
from ._messages import Message, ToolDefinition
from ._response import CallOptions, Deliver, Delta, Response, ResponseStream, StreamRestart

__all__ = ["FallbackEngine", "weighted_order"]


def weighted_order(entries: Sequence[tuple[HTTPEngine, int]], rng: Callable[[], float]) -> list[HTTPEngine]:
    """A random order where an entry with weight w comes first w times as often as one with weight 1."""
    keyed = [(rng() ** (1.0 / weight), i, engine) for i, (engine, weight) in enumerate(entries)]
    keyed.sort(key=lambda k: (-k[0], k[1]))
    return [engine for _, _, engine in keyed]


class FallbackEngine(Engine):
    """The primary engine first (its own retries), then the fallbacks (`[llm] fallback_max_retries` each).

    One logical request holds one lease for the whole sequence. A request the provider rejects as bad
    is not handed on: the next provider would most likely reject it too.
    """

    def __init__(self, primary: HTTPEngine, fallbacks: Sequence[tuple[HTTPEngine, int]], *,
                 gate: InFlightGate = UNLIMITED_GATE, fallback_max_retries: int = 2,
                 rng: Callable[[], float] = random.random) -> None:
        self.primary = primary
        self.fallbacks = list(fallbacks)
        self._gate = gate
        self._fallback_max_retries = fallback_max_retries
        self._rng = rng

    @property
    def provider(self) -> str:
        return self.primary.provider

    @property
    def model(self) -> str:
        return self.primary.model

    @property
    def context_window(self) -> int:
        return self.primary.context_window

    def __repr__(self) -> str:
        names = ", ".join(e.provider for e, _ in self.fallbacks)
        return f"FallbackEngine(primary={self.primary.provider!r}, fallbacks=[{names}])"

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolDefinition] = (),
                 options: CallOptions | None = None) -> ResponseStream:
        snapshot, tool_list, chosen = tuple(messages), tuple(tools), options or DEFAULT_OPTIONS
        return ResponseStream(lambda deliver: self._run(snapshot, tool_list, chosen, deliver))

    async def _run(self, messages: Sequence[Message], tools: Sequence[ToolDefinition], options: CallOptions,
                   deliver: Deliver) -> AsyncGenerator[Delta, None]:
        async with self._gate.hold():
            chain = [self.primary, *weighted_order(self.fallbacks, self._rng)]
            failures: list[LLMError] = []
            for position, engine in enumerate(chain):
                retries = None if position == 0 else self._fallback_max_retries
                received: list[Response] = []
                emitted = False
                try:
                    # Closed here, not whenever it is collected: its response must be closed before the lease goes.
                    async with contextlib.aclosing(engine.attempts(messages, tools, options, received.append,
                                                                   max_retries=retries)) as attempts:
                        async for delta in attempts:
                            emitted = True
                            yield delta
                except LLMBadRequestError:
                    raise
                except LLMError as exc:
                    failures.append(exc)
                    if emitted and position + 1 < len(chain):
                        yield StreamRestart(position + 2, f"falling back from {engine.provider}: {exc.detail}",
                                            0.0)
                    continue
                deliver(received[0])
                return
            last = failures[-1]
            if len(failures) > 1:
                tried = "; ".join(f"{e.provider}: {e.detail}" for e in failures[:-1])
                last.detail = f"{last.detail} (earlier providers also failed — {tried})"
                last.with_attempts(last.attempts)
            raise last

    async def aclose(self) -> None:
        await self.primary.aclose()
        for engine, _ in self.fallbacks:
            await engine.aclose()
