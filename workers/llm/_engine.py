"""The engine interface and the HTTP machinery both wire formats share: lease, budget, retries, SSE."""

from __future__ import annotations

import asyncio
import contextlib
import json
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import replace
from typing import Any, Self

import httpx

from yagent.ipc.provider_config import LLMSettings, ProviderConfig
from yagent.ipc.shown_url import shown_url
from yagent.workers.context import count_tokens, estimate_messages_tokens

from ._catalog import lookup_model
from ._errors import (
    LLMBadRequestError,
    LLMError,
    LLMNetworkError,
    LLMServerError,
    LLMTimeoutError,
    error_for_status,
)
from ._gate import UNLIMITED_GATE, InFlightGate
from ._images import SentImage, images_to_send
from ._messages import Message, ToolCall, ToolDefinition
from ._pairing import repair_tool_pairing
from ._request_body import MESSAGES_KEY, MessageTexts, ToolEntries, encode_body
from ._response import (
    CallOptions,
    Deliver,
    Delta,
    ReasoningDelta,
    Response,
    ResponseStream,
    StreamRestart,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from ._retry import RetryPolicy, parse_retry_after

__all__ = ["DEFAULT_OPTIONS", "Engine", "HTTPEngine", "StreamParser"]

DEFAULT_OPTIONS = CallOptions()
DEFAULT_CONNECT_TIMEOUT = 15.0
_ERROR_BODY_LIMIT = 4000
# What a server may still send after the format's end marker (the body's last bytes), and for how long,
# before we hang up on it rather than keep its in-flight slot.
_AFTER_END_BYTES = 64 * 1024
_AFTER_END_SECONDS = 2.0


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

    @property
    def context_window(self) -> int:
        """The provider's configured `context_window` (0: not set). It sizes the client's context gauge only;
        compression thresholds come from the model catalog (seed pitfall 3)."""
        return 0

    @abstractmethod
    def complete(self, messages: Sequence[Message], tools: Sequence[ToolDefinition] = (),
                 options: CallOptions | None = None) -> ResponseStream: ...

    async def aclose(self) -> None:  # noqa: B027 - engines without connections have nothing to release
        """Release connections this engine owns."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def first_set(*values: Any) -> Any:
    """The first value that is neither None nor 0: zero means "not configured" at every level."""
    for value in values:
        if value:
            return value
    return None


def call_temperature(options_temperature: float | None, configured: float | None) -> float | None:
    """The temperature to send, None for none: a per-call 0 means "not set" (a caller's default), while the
    provider's configured value counts whenever the key exists — `temperature = 0` in the file is greedy decoding."""
    return options_temperature if options_temperature else configured


# Request addresses parsed before the run that uses them (`_build.parse_ahead`), by their text.
PARSED_AHEAD: dict[str, httpx.URL] = {}


class HTTPEngine(Engine):
    """Shared by the OpenAI-compatible and Anthropic engines; subclasses speak the wire format."""

    api_format = ""

    def __init__(self, config: ProviderConfig, *, settings: LLMSettings | None = None,
                 client: httpx.AsyncClient | None = None, gate: InFlightGate = UNLIMITED_GATE,
                 retry: RetryPolicy | None = None, idle_timeout: float | None = None,
                 connect_timeout: float = DEFAULT_CONNECT_TIMEOUT) -> None:
        config.require_key()
        self.config = config
        self.settings = settings or LLMSettings()
        self._client = client if client is not None else httpx.AsyncClient()
        self._owns_client = client is None
        self._gate = gate
        self.retry = retry or RetryPolicy(max_retries=self.settings.max_retries)
        self._idle_timeout = self.settings.stall_timeout if idle_timeout is None else idle_timeout
        self._connect_timeout = connect_timeout
        self._images: bool | None = None  # whether requests carry images: known at the first request
        self._tools = ToolEntries(self.tool_entry)  # made and encoded once per set of definitions
        self._messages = MessageTexts()  # each message encoded once while it stays where it was
        self._parsed_url: tuple[str, httpx.URL] | None = None  # `url()` and its parse (`request_url`)

    @property
    def accepts_images(self) -> bool:
        """Requests carry the images of tool results: the catalogue says the model reads them, and the server has
        not refused one."""
        if self._images is None:
            info = lookup_model(self.model)
            self._images = bool(info is not None and info.images)
        return self._images

    def sent_images(self, messages: Sequence[Message]) -> dict[int, list[SentImage]]:
        """Message index → the images a request built now carries with it (none for a model that reads none)."""
        return images_to_send(messages) if self.accepts_images else {}

    def stop_sending_images(self, error: LLMBadRequestError) -> bool:
        """The server refused an image: requests go without from now on. True if that is what it refused."""
        if self._images and "image" in error.detail.lower():
            self._images = False
            return True
        return False

    @property
    def provider(self) -> str:
        return self.config.name

    @property
    def model(self) -> str:
        return self.config.model

    @property
    def context_window(self) -> int:
        return self.config.context_window

    @property
    def connect_timeout(self) -> float:
        return self._connect_timeout

    def __repr__(self) -> str:
        return f"{type(self).__name__}(provider={self.provider!r}, model={self.model!r})"

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    def request_url(self) -> httpx.URL:
        """`url()` as httpx parses it, parsed once: given a string, httpx parses it again at every request (0.05 ms
        warm, 0.15-0.3 ms on a fresh worker's way to its first request: a warm worker parsed the configured
        providers' addresses while it waited, `PARSED_AHEAD`)."""
        text = self.url()
        parsed = self._parsed_url
        if parsed is None or parsed[0] != text:
            parsed = self._parsed_url = (text, PARSED_AHEAD.get(text) or httpx.URL(text))
        return parsed[1]

    # -- wire format (subclasses) ------------------------------------------------------------------
    @abstractmethod
    def url(self) -> str: ...

    @abstractmethod
    def headers(self) -> dict[str, str]: ...

    @abstractmethod
    def build_request(self, messages: Sequence[Message], tools: Sequence[ToolDefinition],
                      options: CallOptions) -> dict[str, Any]:
        """The JSON body, from an already repaired conversation; its tools are `tool_entries(tools)`."""

    @abstractmethod
    def tool_entry(self, tool: ToolDefinition) -> dict[str, Any]:
        """One tool definition as the wire format lists it."""

    def tool_entries(self, tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
        """The body's tool list: one list per set of definitions, encoded once (`_request_body.py`); a body must not
        change it in place."""
        return self._tools.entries(tools)

    def drop_rejected_field(self, body: dict[str, Any], error: LLMBadRequestError) -> bool:
        """Remove from `body` an optional field the server refused by name (and stop sending it); True if one was.

        A request this answers True for is sent again at once, without counting as a retry.
        """
        return False

    @abstractmethod
    def stream_parser(self, context: _CallContext) -> StreamParser:
        """A fresh parser for one attempt's event stream."""

    @abstractmethod
    def parse_body(self, body: Any, context: _CallContext) -> Response: ...

    @abstractmethod
    def error_detail(self, body: Any) -> tuple[str, str]:
        """(message, error type) from an error body; type is "" when the format has none."""

    # -- the request ---------------------------------------------------------------------------------
    def complete(self, messages: Sequence[Message], tools: Sequence[ToolDefinition] = (),
                 options: CallOptions | None = None) -> ResponseStream:
        # Snapshot now: the request is sent lazily and the caller may keep appending to its list.
        snapshot, tool_list, chosen = tuple(messages), tuple(tools), options or DEFAULT_OPTIONS
        return ResponseStream(lambda deliver: self.attempts(snapshot, tool_list, chosen, deliver, lease=True))

    async def attempts(self, messages: Sequence[Message], tools: Sequence[ToolDefinition],
                       options: CallOptions, deliver: Deliver, *, max_retries: int | None = None,
                       lease: bool = False) -> AsyncGenerator[Delta, None]:
        """One logical request with its retries; the final response goes to `deliver`.

        With `lease`, a gate slot is held throughout; the fallback engine passes False because it holds
        one slot for its whole chain. Lease, retries, HTTP and SSE reading share this one generator on
        purpose: each async-generator layer costs about as much per chunk as parsing the chunk.
        """
        # The lease is taken before the budget clock starts: waiting for a slot is not slowness. It goes back only
        # once the response is over: read to its end (the server is done with it) or closed (we hung up), on every
        # path. Retries keep it: one request's attempts follow each other in one slot, each response closed
        # before the next is sent, so an attempt never waits behind newer requests for a slot it already had.
        # The body is built before the slot is asked for: a granted slot goes straight to the provider.
        repaired = repair_tool_pairing(messages)
        body = self.build_request(repaired, tools, options)
        # A caller's own messages (`extra_body`) are encoded whole: it may change its dicts in place between calls.
        texts = None if MESSAGES_KEY in options.extra_body else self._messages
        payload = encode_body(body, self._tools, texts)
        async with self._gate.hold() if lease else contextlib.nullcontext():
            retry = self.retry
            clock = retry.clock
            limit = retry.max_retries if max_retries is None else max_retries
            budget = self.settings.timeout
            if options.timeout and options.timeout > 0:
                budget = min(budget, options.timeout)
            deadline = clock() + budget
            context = _CallContext(self, repaired, tools, deadline, budget, sent=options.sent)
            attempt = 0
            while True:
                attempt += 1
                emitted = False
                try:
                    response = await self._send(payload, context)
                    try:
                        if response.status_code >= 300:
                            raise await self._status_error(response)
                        content_type = response.headers.get("content-type", "")
                        if not options.stream or ("event-stream" not in content_type
                                                  and ("json" in content_type or "html" in content_type)):
                            # Some servers ignore `stream: true`, or put an error body in a 200: one body.
                            final = await self._whole_body(response, context)
                            if options.stream:
                                for delta in deltas_of(final):
                                    yield delta
                            deliver(replace(final, attempts=attempt))
                            return
                        parser = self.stream_parser(context)
                        feed = parser.feed
                        chunks = response.aiter_bytes()
                        pending: list[bytes] = []  # the start of a line whose end has not arrived
                        parts: list[bytes] = []  # the data lines of an event whose blank line has not arrived
                        data = b""
                        at_end = False
                        after_cr = False  # the last chunk ended in CR: an LF opening the next one ends no line
                        try:
                            while not at_end:
                                try:
                                    chunk = await anext(chunks)
                                except StopAsyncIteration:
                                    # A blank line dispatches an event the connection's end cut short.
                                    lines = [b"".join(pending), b""] if pending else [b""]
                                    pending, at_end = [], True
                                else:
                                    # Checked per chunk, not per data line: keep-alive comments arrive forever.
                                    if clock() > deadline:
                                        raise self.budget_error(budget) from None
                                    # SSE lines end at CR, LF or CRLF only; str.splitlines (httpx's aiter_lines)
                                    # also splits at U+2028 and U+0085, which JSON strings may hold unescaped.
                                    if after_cr:
                                        after_cr = False
                                        if chunk[:1] == b"\n":
                                            chunk = chunk[1:]
                                    if b"\r" in chunk:
                                        after_cr = chunk[-1:] == b"\r"
                                        chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
                                    if b"\n" not in chunk:
                                        pending.append(chunk)
                                        continue
                                    lines = chunk.split(b"\n")
                                    if pending:
                                        pending.append(lines[0])
                                        lines[0] = b"".join(pending)
                                    last = lines.pop()
                                    pending = [last] if last else []
                                for line in lines:
                                    # Both APIs repeat the event name inside the JSON, so only data lines
                                    # matter; an event's data lines are joined with LF, and a blank line
                                    # ends the event (SSE).
                                    if line:
                                        if line.startswith(b"data:"):
                                            parts.append(line[6:] if line[5:6] == b" " else line[5:])
                                        continue
                                    if not parts:
                                        continue
                                    data = parts[0] if len(parts) == 1 else b"\n".join(parts)
                                    parts = []
                                    if not data:
                                        continue  # an event with empty data says nothing to either API
                                    out = feed(data.decode("utf-8", "replace"))
                                    if out is None:
                                        if parser.done:  # the end marker: nothing after it is the model's
                                            at_end = True
                                            break
                                        continue
                                    emitted = True
                                    if type(out) is tuple:
                                        for delta in out:
                                            yield delta
                                    else:
                                        yield out
                                    if parser.done:
                                        at_end = True
                                        break
                        except (KeyError, TypeError, AttributeError, IndexError) as exc:
                            raise self.unreadable(data.decode("utf-8", "replace"), exc) from exc
                        if parser.done:
                            await _read_to_end(chunks)
                        final = parser.finish()
                        deliver(replace(final, attempts=attempt))
                        return
                    except httpx.TimeoutException as exc:
                        if clock() >= deadline:  # the read timeout was cut to what was left of the budget
                            raise self.budget_error(budget) from exc
                        raise LLMTimeoutError(f"the stream stalled: no data for {self._idle_timeout:g}s "
                                              "(raise [llm] stall_timeout for a slow local server) "
                                              f"({type(exc).__name__})", provider=self.provider,
                                              model=self.model, status=response.status_code) from exc
                    except httpx.TransportError as exc:
                        raise LLMNetworkError(f"the stream was cut short: {exc or type(exc).__name__}",
                                              provider=self.provider, model=self.model,
                                              status=response.status_code) from exc
                    finally:
                        await close_response(response)
                except LLMError as exc:
                    error = exc
                if not emitted and isinstance(error, LLMBadRequestError) and self.drop_rejected_field(body, error):
                    payload = encode_body(body, self._tools, texts)
                    attempt -= 1  # the server told us what to leave out: not a failed attempt
                    continue
                remaining = deadline - clock()
                if not error.retryable or attempt > limit:
                    raise error.with_attempts(attempt)
                delay = retry.delay(attempt, error)
                if delay >= remaining:
                    # Waiting would overrun `[llm] timeout`; the last real error says more than a timeout.
                    raise error.with_attempts(attempt)
                if emitted:
                    yield StreamRestart(attempt + 1, error.detail, delay)
                await retry.sleep(delay)

    def _timeout(self, remaining: float) -> httpx.Timeout:
        return httpx.Timeout(connect=min(self._connect_timeout, remaining),
                             read=min(self._idle_timeout, remaining),
                             write=min(self._connect_timeout, remaining),
                             pool=min(self._connect_timeout, remaining))

    def budget_error(self, budget: float | None = None) -> LLMTimeoutError:
        if budget is None or budget >= self.settings.timeout:
            what = f"the request budget of {self.settings.timeout:g}s ([llm] timeout) is spent"
        else:
            what = f"this call's budget of {budget:g}s is spent"
        error = LLMTimeoutError(what,
                                provider=self.provider, model=self.model)
        error.retryable = False  # another attempt cannot fit in a spent budget
        return error

    async def _send(self, payload: bytes, context: _CallContext) -> httpx.Response:
        remaining = context.deadline - self.retry.clock()
        if remaining <= 0:
            raise self.budget_error(context.budget)
        request = self._client.build_request("POST", self.request_url(), content=payload, headers=self.headers(),
                                             timeout=self._timeout(remaining),
                                             extensions={"trace": context.trace} if context.sent else None)
        try:
            return await self._client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            if self.retry.clock() >= context.deadline:  # the timeout was cut to what was left of the budget
                raise self.budget_error(context.budget) from exc
            raise LLMTimeoutError(f"no response within the timeout ({type(exc).__name__})",
                                  provider=self.provider, model=self.model) from exc
        except httpx.TransportError as exc:
            raise LLMNetworkError(f"cannot reach {shown_url(self.url())}: {exc or type(exc).__name__}",
                                  provider=self.provider, model=self.model) from exc

    async def _whole_body(self, response: httpx.Response, context: _CallContext) -> Response:
        """The response of a request answered with one JSON body (asked for, or instead of a stream)."""
        raw = await response.aread()
        body: Any = None
        if "html" not in response.headers.get("content-type", ""):
            try:
                body = json.loads(raw)
            except ValueError:
                pass
        if not isinstance(body, dict):
            raise self.not_the_api(response, raw)
        try:
            return self.parse_body(body, context)
        except (KeyError, TypeError, AttributeError, IndexError) as exc:
            raise self.unreadable(raw.decode("utf-8", "replace"), exc) from exc

    def not_the_api(self, response: httpx.Response, raw: bytes) -> LLMNetworkError:
        """A 200 that no API sends (a proxy's login page, a web UI): another attempt gets the same page."""
        content_type = response.headers.get("content-type") or "no content type"
        excerpt = " ".join(raw[:300].decode("utf-8", "replace").split())
        error = LLMNetworkError(f"the answer is not from the {self.api_format} API ({content_type}): {excerpt!r}; "
                                f"check that api_base_url {shown_url(self.config.api_base_url)!r} is the API's address "
                                f"(OpenAI-compatible ones usually end in /v1) and that no proxy answers instead",
                                provider=self.provider, model=self.model, status=response.status_code)
        error.retryable = False
        return error

    def redirected(self, response: httpx.Response) -> LLMNetworkError:
        location = shown_url(response.headers.get("location") or "an address it did not name")
        error = LLMNetworkError(f"the server redirects to {location}; set api_base_url to the final address "
                                f"(redirects are not followed, so the API key is never sent elsewhere)",
                                provider=self.provider, model=self.model, status=response.status_code)
        error.retryable = False
        return error

    async def _status_error(self, response: httpx.Response) -> LLMError:
        if response.status_code < 400:
            return self.redirected(response)
        raw = await response.aread()
        try:
            message, _ = self.error_detail(json.loads(raw))
        except (ValueError, TypeError, AttributeError, KeyError):
            message = raw[:_ERROR_BODY_LIMIT].decode("utf-8", "replace").strip() or response.reason_phrase
        return error_for_status(response.status_code, message, provider=self.provider, model=self.model,
                                retry_after=parse_retry_after(response.headers))

    def malformed(self, data: str) -> LLMServerError:
        return LLMServerError(f"the stream carried data that is not JSON: {data[:200]!r}",
                              provider=self.provider, model=self.model, status=200)

    def unreadable(self, data: str, exc: Exception) -> LLMServerError:
        return LLMServerError(f"the server sent JSON this engine cannot read ({type(exc).__name__}: {exc}): "
                              f"{data[:200]!r}", provider=self.provider, model=self.model, status=200)


async def _read_to_end(chunks: AsyncGenerator[bytes, None]) -> None:
    """Read what follows the end marker (the chunked body's terminator, a trailing newline), so the server has
    ended the response before its slot goes back; a server that keeps sending is hung up on after a bound."""
    left = _AFTER_END_BYTES
    with contextlib.suppress(TimeoutError, httpx.HTTPError):  # the reply is complete: hanging up is all that is left
        async with asyncio.timeout(_AFTER_END_SECONDS):
            async for chunk in chunks:
                left -= len(chunk)
                if left < 0:
                    return


async def close_response(response: httpx.Response) -> None:
    """Close `response`'s connection even if cancelled meanwhile (again), then let the cancellation through.

    httpx shields its close from anyio cancel scopes only, not from a native task cancellation: a second
    cancel (the daemon's stop escalation) would leave the socket open while the lease goes back.
    """
    closing = asyncio.ensure_future(response.aclose())
    cancelled = False
    while not closing.done():
        try:
            await asyncio.shield(closing)
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    closing.result()


def deltas_of(response: Response) -> tuple[Delta, ...]:
    """What a stream of `response` would have shown, for servers that sent it whole."""
    deltas: list[Delta] = []
    if response.reasoning:
        deltas.append(ReasoningDelta(response.reasoning))
    if response.text:
        deltas.append(TextDelta(response.text))
    deltas += [ToolCallDelta(i, c.id, c.name, c.arguments) for i, c in enumerate(response.tool_calls)]
    return tuple(deltas)


class StreamParser(ABC):
    """Turns the data payloads of one event stream into deltas, then into the final Response.

    `feed` returns None, one delta, or a tuple of deltas; `done` turns true at the format's end
    marker; `finish` raises when the stream stopped before that marker (a truncated response).
    """

    done = False

    @abstractmethod
    def feed(self, data: str) -> Delta | tuple[Delta, ...] | None: ...

    @abstractmethod
    def finish(self) -> Response: ...


class _CallContext:
    """What a parser needs besides the events: the deadline and the inputs of a usage estimate."""

    __slots__ = ("budget", "deadline", "engine", "messages", "sent", "tools")

    def __init__(self, engine: HTTPEngine, messages: Sequence[Message], tools: Sequence[ToolDefinition],
                 deadline: float, budget: float | None = None, sent: Callable[[], None] | None = None) -> None:
        self.engine = engine
        self.messages = messages
        self.tools = tools
        self.deadline = deadline
        self.budget = budget
        self.sent = sent

    async def trace(self, name: str, info: dict[str, Any]) -> None:
        """httpcore's trace hook: the first request body written out (HTTP/1.1 or 2) fires `sent`, once."""
        if self.sent is not None and name.endswith("send_request_body.complete"):
            sent, self.sent = self.sent, None
            sent()

    def estimate_usage(self, text: str, reasoning: str, calls: Sequence[ToolCall]) -> Usage:
        """A local estimate for servers that never report usage (llama.cpp ignores include_usage)."""
        prompt = estimate_messages_tokens(self.messages)
        if self.tools:
            prompt += count_tokens(json.dumps([t.to_dict() for t in self.tools]))
        output = count_tokens(text) + count_tokens(reasoning)
        output += sum(count_tokens(c.name) + count_tokens(c.arguments) for c in calls)
        return Usage(total_input_tokens=prompt, output_tokens=output, estimated=True)
