"""What one model call produces: streamed deltas, the final response, normalised usage, call options."""

from __future__ import annotations

import enum
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from ._messages import Message, ThinkingBlock, ToolCall

__all__ = [
    "CallOptions",
    "Deliver",
    "Delta",
    "FinishReason",
    "ReasoningDelta",
    "Response",
    "ResponseStream",
    "StreamRestart",
    "TextDelta",
    "ToolCallDelta",
    "Usage",
]


class FinishReason(enum.StrEnum):
    """Why the model ended its reply (the wire's finish reason), one vocabulary for both formats.

    Not why a run stopped: that is `yagent.ipc.vocabulary.StopReason`.
    """

    END_TURN = "end_turn"
    TOOL_USE = "tool_use"
    MAX_TOKENS = "max_tokens"
    STOP_SEQUENCE = "stop_sequence"
    CONTENT_FILTER = "content_filter"
    OTHER = "other"


def agreeing_finish_reason(reason: FinishReason, has_calls: bool) -> FinishReason:
    """`reason` made to agree with the tool calls returned, for compatible servers of either format: a turn
    with calls that says it just stopped (Ollama, older vLLM) is TOOL_USE, and a tool stop whose calls the
    server's parser never produced ended the turn with nothing to run (END_TURN)."""
    if has_calls and reason is FinishReason.END_TURN:
        return FinishReason.TOOL_USE
    if not has_calls and reason is FinishReason.TOOL_USE:
        return FinishReason.END_TURN
    return reason


@dataclass(frozen=True, slots=True)
class Usage:
    """Token accounting with one meaning for every provider.

    `total_input_tokens` always includes cached input (OpenAI's `prompt_tokens` already does; Anthropic's
    `input_tokens` does not, so its cache counters are added). `estimated` is true when the provider sent
    no usage and the numbers are a local tiktoken estimate.
    """

    total_input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    estimated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"total_input_tokens": self.total_input_tokens, "output_tokens": self.output_tokens,
                "cached_input_tokens": self.cached_input_tokens, "estimated": self.estimated}


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """Progress of the tool call at `index`: `id`/`name` arrive once, `arguments` is the next fragment."""

    index: int
    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class StreamRestart:
    """The request is being retried (or handed to a fallback provider) after partial output.

    Everything streamed so far for this call is void; a UI should clear it.
    """

    attempt: int
    reason: str
    delay: float


Delta = TextDelta | ReasoningDelta | ToolCallDelta | StreamRestart


@dataclass(frozen=True, slots=True)
class Response:
    """The complete result of one logical model call.

    `reasoning` is all thinking text joined; `thinking_blocks` (Anthropic) keeps each block with its
    signature, or a redacted block's data, in order; `reasoning_signature` is the last signature seen.
    """

    text: str
    reasoning: str
    tool_calls: tuple[ToolCall, ...]
    finish_reason: FinishReason
    usage: Usage
    provider: str
    model: str
    raw_finish_reason: str = ""
    reasoning_signature: str = ""
    attempts: int = 1
    thinking_blocks: tuple[ThinkingBlock, ...] = ()

    def message(self) -> Message:
        """The assistant message to append to the conversation.

        With thinking blocks, those are what is replayed; the single signature is kept only without them.
        """
        return Message.assistant(self.text, reasoning=self.reasoning, tool_calls=self.tool_calls,
                                 thinking_blocks=self.thinking_blocks,
                                 reasoning_signature="" if self.thinking_blocks else self.reasoning_signature)


@dataclass(frozen=True, slots=True)
class CallOptions:
    """Per-call overrides; they win over the provider configuration. None or 0 means "not set here"."""

    max_tokens: int | None = None
    temperature: float | None = None
    reasoning_effort: str | None = None
    stream: bool = True
    extra_body: dict[str, Any] = field(default_factory=dict)
    # A budget for this call tighter than `[llm] timeout` (seconds). Like that one, its clock starts once
    # the in-flight lease is held: time queued for a slot is not the provider being slow.
    timeout: float | None = None
    # Called once, when the request's body has been written to the connection (before any answer): work the
    # caller owes but the request need not wait for (the step's context report). It must not raise. A call that
    # never got its request out does not call it.
    sent: Callable[[], None] | None = None


Deliver = Callable[[Response], None]


class ResponseStream:
    """An async iterator of deltas; `final()` returns the `Response` once the stream is exhausted.

    Use it as ``async with engine.complete(...) as stream: async for d in stream: ...; r = await stream.final()``
    or just ``await engine.complete(...).final()``. Leaving the `async with` block, or cancelling the task
    that awaits it, closes the HTTP connection and releases the in-flight lease.

    `start` receives the callback through which the producer hands over the final response; iterating
    the stream iterates the producer itself, so the wrapper costs nothing per chunk.
    """

    __slots__ = ("_gen", "_response")

    def __init__(self, start: Callable[[Deliver], AsyncGenerator[Delta, None]]) -> None:
        self._response: Response | None = None
        self._gen = start(self._deliver)

    def _deliver(self, response: Response) -> None:
        self._response = response

    def __aiter__(self) -> AsyncGenerator[Delta, None]:
        return self._gen

    async def __anext__(self) -> Delta:
        return await self._gen.__anext__()

    async def final(self) -> Response:
        """Drain the remaining deltas and return the response."""
        try:
            async for _ in self._gen:
                pass
        finally:
            await self._gen.aclose()
        if self._response is None:
            raise RuntimeError("the engine's stream ended without a final response")
        return self._response

    @property
    def response(self) -> Response | None:
        """The final response once the stream is exhausted, else None."""
        return self._response

    async def aclose(self) -> None:
        await self._gen.aclose()

    async def __aenter__(self) -> ResponseStream:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self._gen.aclose()
