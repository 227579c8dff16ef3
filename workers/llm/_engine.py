"""The engine interface and the HTTP machinery both wire formats share: lease, budget, retries, SSE."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import replace
from typing import Any

import httpx

from yagent.ipc.provider_config import LLMSettings, ProviderConfig
from yagent.workers.context import count_tokens, estimate_messages_tokens

from ._errors import (
    LLMError,
    LLMNetworkError,
    LLMServerError,
    LLMTimeoutError,
    error_for_status,
)
from ._gate import UNLIMITED_GATE, InFlightGate
from ._messages import Message, ToolCall, ToolDefinition
from ._pairing import repair_tool_pairing
from ._response import CallOptions, Delta, Response, ResponseStream, StreamRestart, Usage
from ._retry import RetryPolicy, parse_retry_after

__all__ = ["DEFAULT_OPTIONS", "Engine", "HTTPEngine"]

DEFAULT_OPTIONS = CallOptions()
DEFAULT_IDLE_TIMEOUT = 120.0
DEFAULT_CONNECT_TIMEOUT = 15.0
_ERROR_BODY_LIMIT = 4000

Item = Delta | Response


class Engine(ABC):
    """Something an agent can ask for a completion.

    `complete` returns at once; the request starts when the stream is first iterated (or `final()`
    is awaited). Cancelling the awaiting task closes the connection and releases the lease.
    """

    @property
    @abstractmethod
    def provider(self) -> str: ...

    @property
    @abstractmethod
    def model(self) -> str: ...

    @abstractmethod
    def complete(self, messages: Sequence[Message], tools: Sequence[ToolDefinition] = (),
                 options: CallOptions | None = None) -> ResponseStream: ...

    async def aclose(self) -> None:
        """Release connections this engine owns."""


def first_set(*values: Any) -> Any:
    """The first value that is neither None nor 0: zero means "not configured" at every level."""
    for value in values:
        if value:
            return value
    return None


class HTTPEngine(Engine):
    """Shared by the OpenAI-compatible and Anthropic engines; subclasses speak the wire format."""

    api_format = ""

    def __init__(self, config: ProviderConfig, *, settings: LLMSettings | None = None,
                 client: httpx.AsyncClient | None = None, gate: InFlightGate = UNLIMITED_GATE,
                 retry: RetryPolicy | None = None, idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT) -> None:
        config.require_key()
        self.config = config
        self.settings = settings or LLMSettings()
        self._client = client if client is not None else httpx.AsyncClient()
        self._owns_client = client is None
        self._gate = gate
        self.retry = retry or RetryPolicy(max_retries=self.settings.max_retries)
        self._idle_timeout = idle_timeout
        self._connect_timeout = connect_timeout

    @property
    def provider(self) -> str:
        return self.config.name

    @property
    def model(self) -> str:
        return self.config.model

    def __repr__(self) -> str:
        return f"{type(self).__name__}(provider={self.provider!r}, model={self.model!r})"

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    # -- wire format (subclasses) ------------------------------------------------------------------
    @abstractmethod
    def url(self) -> str: ...

    @abstractmethod
    def headers(self) -> dict[str, str]: ...

    @abstractmethod
    def build_request(self, messages: Sequence[Message], tools: Sequence[ToolDefinition],
                      options: CallOptions) -> dict[str, Any]:
        """The JSON body, from an already repaired conversation."""

    @abstractmethod
    def parse_stream(self, events: AsyncIterator[tuple[str, str]],
                     context: _CallContext) -> AsyncGenerator[Item, None]: ...

    @abstractmethod
    def parse_body(self, body: Any, context: _CallContext) -> Response: ...

    @abstractmethod
    def error_detail(self, body: Any) -> tuple[str, str]:
        """(message, error type) from an error body; type is "" when the format has none."""

    # -- the request ---------------------------------------------------------------------------------
    def complete(self, messages: Sequence[Message], tools: Sequence[ToolDefinition] = (),
                 options: CallOptions | None = None) -> ResponseStream:
        return ResponseStream(self._leased(messages, tools, options or DEFAULT_OPTIONS))

    async def _leased(self, messages: Sequence[Message], tools: Sequence[ToolDefinition],
                      options: CallOptions) -> AsyncGenerator[Item, None]:
        # The lease is taken before attempts() starts the budget clock: waiting for a slot is not slowness.
        async with self._gate.hold():
            async for item in self.attempts(messages, tools, options):
                yield item

    async def attempts(self, messages: Sequence[Message], tools: Sequence[ToolDefinition],
                       options: CallOptions, *, max_retries: int | None = None) -> AsyncGenerator[Item, None]:
        """One logical request with retries, without taking the gate (the caller holds a lease)."""
        retry = self.retry
        limit = retry.max_retries if max_retries is None else max_retries
        deadline = retry.clock() + self.settings.timeout
        repaired = repair_tool_pairing(messages)
        payload = json.dumps(self.build_request(repaired, tools, options), ensure_ascii=False).encode()
        context = _CallContext(self, repaired, tools, deadline)
        attempt = 0
        while True:
            attempt += 1
            emitted = False
            try:
                async for item in self._attempt(payload, options.stream, context):
                    if type(item) is Response:
                        yield replace(item, attempts=attempt)
                        return
                    emitted = True
                    yield item
                raise LLMNetworkError("the stream ended without a final response", provider=self.provider,
                                      model=self.model)
            except LLMError as exc:
                error = exc
            remaining = deadline - retry.clock()
            if not error.retryable or attempt > limit:
                raise error.with_attempts(attempt)
            delay = retry.delay(attempt, error)
            if delay >= remaining:
                # Waiting would overrun `[llm] timeout`; the last real error is more useful than a timeout.
                raise error.with_attempts(attempt)
            if emitted:
                yield StreamRestart(attempt + 1, error.detail, delay)
            await retry.sleep(delay)

    def _timeout(self, remaining: float) -> httpx.Timeout:
        return httpx.Timeout(connect=min(self._connect_timeout, remaining),
                             read=min(self._idle_timeout, remaining),
                             write=min(self._connect_timeout, remaining),
                             pool=min(self._connect_timeout, remaining))

    def budget_error(self) -> LLMTimeoutError:
        error = LLMTimeoutError(f"the request budget of {self.settings.timeout:g}s ([llm] timeout) is spent",
                                provider=self.provider, model=self.model)
        error.retryable = False  # another attempt cannot fit in a spent budget
        return error

    async def _attempt(self, payload: bytes, stream: bool, context: _CallContext) -> AsyncGenerator[Item, None]:
        remaining = context.deadline - self.retry.clock()
        if remaining <= 0:
            raise self.budget_error()
        request = self._client.build_request("POST", self.url(), content=payload, headers=self.headers(),
                                             timeout=self._timeout(remaining))
        try:
            response = await self._client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            raise LLMTimeoutError(f"no connection within the timeout ({type(exc).__name__})",
                                  provider=self.provider, model=self.model) from exc
        except httpx.TransportError as exc:
            raise LLMNetworkError(f"cannot reach {self.url()}: {exc or type(exc).__name__}",
                                  provider=self.provider, model=self.model) from exc
        try:
            if response.status_code >= 400:
                raise await self._status_error(response)
            if stream:
                async for item in self.parse_stream(self._sse(response, context), context):
                    yield item
            else:
                raw = await response.aread()
                try:
                    body = json.loads(raw)
                except ValueError:
                    raise LLMServerError(f"the response is not JSON: {raw[:200]!r}", provider=self.provider,
                                         model=self.model, status=response.status_code) from None
                yield self.parse_body(body, context)
        except httpx.TimeoutException as exc:
            raise LLMTimeoutError(f"the stream stalled: no data for {self._idle_timeout:g}s "
                                  f"({type(exc).__name__})", provider=self.provider, model=self.model,
                                  status=response.status_code) from exc
        except httpx.TransportError as exc:
            raise LLMNetworkError(f"the stream was cut short: {exc or type(exc).__name__}",
                                  provider=self.provider, model=self.model,
                                  status=response.status_code) from exc
        finally:
            await response.aclose()

    async def _status_error(self, response: httpx.Response) -> LLMError:
        raw = await response.aread()
        try:
            message, _ = self.error_detail(json.loads(raw))
        except (ValueError, TypeError, AttributeError, KeyError):
            message = raw[:_ERROR_BODY_LIMIT].decode("utf-8", "replace").strip() or response.reason_phrase
        return error_for_status(response.status_code, message, provider=self.provider, model=self.model,
                                retry_after=parse_retry_after(response.headers))

    async def _sse(self, response: httpx.Response, context: _CallContext) -> AsyncGenerator[tuple[str, str], None]:
        """(event name, data) per server-sent event; the budget is checked on every line."""
        clock, deadline = self.retry.clock, context.deadline
        event, data = "", []
        async for line in response.aiter_lines():
            if line:
                if line.startswith("data:"):
                    data.append(line[6:] if line.startswith("data: ") else line[5:])
                elif line.startswith("event:"):
                    event = line[6:].strip()
                if clock() > deadline:
                    raise self.budget_error()
                continue
            if data:
                yield event, "\n".join(data)
            event, data = "", []
        if data:
            yield event, "\n".join(data)

    def malformed(self, data: str) -> LLMServerError:
        return LLMServerError(f"the stream carried data that is not JSON: {data[:200]!r}",
                              provider=self.provider, model=self.model, status=200)


class _CallContext:
    """What a parser needs besides the events: the deadline and the inputs of a usage estimate."""

    __slots__ = ("deadline", "engine", "messages", "tools")

    def __init__(self, engine: HTTPEngine, messages: Sequence[Message], tools: Sequence[ToolDefinition],
                 deadline: float) -> None:
        self.engine = engine
        self.messages = messages
        self.tools = tools
        self.deadline = deadline

    def estimate_usage(self, text: str, reasoning: str, calls: Sequence[ToolCall]) -> Usage:
        """A local estimate for servers that never report usage (llama.cpp ignores include_usage)."""
        prompt = estimate_messages_tokens(self.messages)
        if self.tools:
            prompt += count_tokens(json.dumps([t.to_dict() for t in self.tools]))
        output = count_tokens(text) + count_tokens(reasoning)
        output += sum(count_tokens(c.name) + count_tokens(c.arguments) for c in calls)
        return Usage(total_input_tokens=prompt, output_tokens=output, estimated=True)
