"""Anthropic Messages API, streaming, with extended thinking."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ._engine import HTTPEngine, StreamParser, _CallContext, call_temperature, first_set
from ._errors import (
    LLMAuthError,
    LLMBadRequestError,
    LLMError,
    LLMNetworkError,
    LLMRateLimitError,
    LLMServerError,
)
from ._images import SentImage
from ._messages import Message, ThinkingBlock, ToolCall, ToolDefinition
from ._response import (
    CallOptions,
    Delta,
    FinishReason,
    ReasoningDelta,
    Response,
    TextDelta,
    ToolCallDelta,
    Usage,
    agreeing_finish_reason,
)

__all__ = ["ANTHROPIC_VERSION", "DEFAULT_MAX_TOKENS", "THINKING_BUDGETS", "AnthropicEngine"]

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 8192  # the Messages API requires max_tokens; used when nothing is configured
THINKING_BUDGETS = {"low": 1024, "medium": 8192, "high": 24576, "max": 32000}
THINKING_HEADROOM = 4096  # room for the visible answer on top of the thinking budget

_STOP = {
    "end_turn": FinishReason.END_TURN,
    "tool_use": FinishReason.TOOL_USE,
    "max_tokens": FinishReason.MAX_TOKENS,
    "stop_sequence": FinishReason.STOP_SEQUENCE,
    "refusal": FinishReason.CONTENT_FILTER,
}

_ERROR_TYPES: dict[str, type[LLMError]] = {
    "authentication_error": LLMAuthError,
    "permission_error": LLMAuthError,
    "invalid_request_error": LLMBadRequestError,
    "not_found_error": LLMBadRequestError,
    "request_too_large": LLMBadRequestError,
    "rate_limit_error": LLMRateLimitError,
}


def finish_reason(raw: str, has_calls: bool) -> FinishReason:
    return agreeing_finish_reason(_STOP.get(raw, FinishReason.OTHER), has_calls)


def anthropic_usage(raw: dict[str, Any]) -> Usage:
    """`input_tokens` excludes cache reads and writes; the normalised total includes both."""
    cached = int(raw.get("cache_read_input_tokens") or 0)
    written = int(raw.get("cache_creation_input_tokens") or 0)
    return Usage(total_input_tokens=int(raw.get("input_tokens") or 0) + cached + written,
                 output_tokens=int(raw.get("output_tokens") or 0), cached_input_tokens=cached)


def tool_input(call: ToolCall) -> dict[str, Any]:
    """`tool_use.input` must be an object; unparsable arguments are kept as text so the model sees them."""
    try:
        return call.parsed_arguments()
    except ValueError:
        return {"_unparsed_arguments": call.arguments}


def tool_result_content(message: Message, images: Sequence[SentImage]) -> str | list[dict[str, Any]]:
    """A tool result's content: its text, and its images as image blocks (a file that cannot be one is named)."""
    if not images:
        return message.content
    blocks: list[dict[str, Any]] = [{"type": "text", "text": message.content}] if message.content else []
    for image in images:
        if image.data:
            blocks.append({"type": "image", "source": {"type": "base64", "media_type": image.media_type,
                                                       "data": image.data}})
        else:
            blocks.append({"type": "text", "text": f"(The image {image.path} is not shown: it {image.problem}.)"})
    return blocks


def anthropic_messages(messages: Sequence[Message], images: dict[int, list[SentImage]] | None = None
                       ) -> tuple[str, list[dict[str, Any]]]:
    """(system text, messages): system turns move to the top-level field, tool results (with their images, for a
    model that reads them) into user turns."""
    system: list[str] = []
    out: list[dict[str, Any]] = []
    images = images or {}
    for index, message in enumerate(messages):
        if message.role == "system":
            system.append(message.content)
        elif message.role == "assistant":
            blocks: list[dict[str, Any]] = []
            if message.thinking_blocks:
                # Verbatim and in order, each with its own signature (or opaque data): the API rejects
                # a tool-use turn whose thinking differs from what it sent. Unsigned thinking (from a
                # compatible server) cannot be replayed at all.
                blocks += [b.to_dict() for b in message.thinking_blocks if b.signature or b.redacted_data]
            elif message.reasoning and message.reasoning_signature:
                # Conversations saved before thinking_blocks existed: one block, one signature.
                blocks.append({"type": "thinking", "thinking": message.reasoning,
                               "signature": message.reasoning_signature})
            if message.content:
                blocks.append({"type": "text", "text": message.content})
            blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": tool_input(c)}
                       for c in message.tool_calls]
            if blocks:
                out.append({"role": "assistant", "content": blocks})
        else:
            block = ({"type": "tool_result", "tool_use_id": message.tool_call_id,
                      "content": tool_result_content(message, images.get(index, ()))}
                     if message.role == "tool" else {"type": "text", "text": message.content})
            previous = out[-1] if out else None
            if previous and previous["role"] == "user" and isinstance(previous["content"], list):
                previous["content"].append(block)
            elif message.role == "tool":
                out.append({"role": "user", "content": [block]})
            else:
                out.append({"role": "user", "content": message.content})
    return "\n\n".join(s for s in system if s), out


class AnthropicEngine(HTTPEngine):
    """`POST {api_base_url}/v1/messages` with `x-api-key` and `anthropic-version` headers."""

    api_format = "anthropic"

    def url(self) -> str:
        return self.url_for(self.config.api_base_url)

    @staticmethod
    def url_for(api_base_url: str) -> str:
        base = api_base_url.rstrip("/")
        return f"{base}/messages" if base.endswith("/v1") else f"{base}/v1/messages"

    def headers(self) -> dict[str, str]:
        return {"x-api-key": self.config.api_key, "anthropic-version": ANTHROPIC_VERSION,
                "content-type": "application/json", "accept": "text/event-stream"}

    def tool_entry(self, tool: ToolDefinition) -> dict[str, Any]:
        return {"name": tool.name, "description": tool.description, "input_schema": dict(tool.parameters)}

    def build_request(self, messages: Sequence[Message], tools: Sequence[ToolDefinition],
                      options: CallOptions) -> dict[str, Any]:
        system, turns = anthropic_messages(messages, self.sent_images(messages))
        max_tokens = first_set(options.max_tokens, self.config.max_tokens) or DEFAULT_MAX_TOKENS
        temperature = call_temperature(options.temperature, self.config.temperature)
        effort = self.config.reasoning_effort if options.reasoning_effort is None else options.reasoning_effort
        budget = THINKING_BUDGETS.get(effort or "")
        body: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens, "messages": turns}
        if system:
            body["system"] = system
        if tools:
            body["tools"] = self.tool_entries(tools)
        if budget:
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
            body["max_tokens"] = max(max_tokens, budget + THINKING_HEADROOM)
            temperature = 1.0  # the API rejects any other temperature while thinking
        if temperature is not None:
            body["temperature"] = temperature
        if options.stream:
            body["stream"] = True
        body.update(options.extra_body)
        return body

    def error_detail(self, body: Any) -> tuple[str, str]:
        error = body["error"]
        return str(error.get("message") or error), str(error.get("type") or "")

    def event_error(self, event: dict[str, Any]) -> LLMError:
        message, kind = self.error_detail(event)
        return _ERROR_TYPES.get(kind, LLMServerError)(f"{kind or 'error'} event in the stream: {message}",
                                                      provider=self.provider, model=self.model, status=200)

    def stream_parser(self, context: _CallContext) -> StreamParser:
        return _AnthropicStream(self, context)

    def parse_body(self, body: Any, context: _CallContext) -> Response:
        if body.get("type") == "error":
            raise self.event_error(body)
        text, reasoning, signature, calls = [], [], "", []
        thinking: list[ThinkingBlock] = []
        for block in body.get("content") or ():
            kind = block.get("type")
            if kind == "text":
                text.append(block.get("text", ""))
            elif kind == "thinking":
                reasoning.append(block.get("thinking", ""))
                signature = block.get("signature", "") or signature
                thinking.append(ThinkingBlock(block.get("thinking", ""), block.get("signature", "")))
            elif kind == "redacted_thinking":
                thinking.append(ThinkingBlock(redacted_data=block.get("data") or ""))
            elif kind == "tool_use":
                calls.append(ToolCall(block["id"], block["name"], json.dumps(block.get("input") or {})))
        stop = body.get("stop_reason") or ""
        full_text, full_reasoning, tool_calls = "".join(text), "".join(reasoning), tuple(calls)
        usage = (anthropic_usage(body["usage"]) if body.get("usage")
                 else context.estimate_usage(full_text, full_reasoning, tool_calls))
        return Response(text=full_text, reasoning=full_reasoning, tool_calls=tool_calls,
                        finish_reason=finish_reason(stop, bool(tool_calls)), usage=usage, provider=self.provider,
                        model=self.model, raw_finish_reason=stop, reasoning_signature=signature,
                        thinking_blocks=tuple(thinking))


class _AnthropicStream(StreamParser):
    """Messages events: message_start, content_block_start/delta/stop, message_delta, message_stop."""

    def __init__(self, engine: AnthropicEngine, context: _CallContext) -> None:
        self.engine = engine
        self.context = context
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.signature = ""
        self.tool_index: dict[int, int] = {}  # content block index -> tool call position
        # (id, name, input_json_delta pieces, the input object content_block_start carried, as JSON text)
        self.calls: list[tuple[str, str, list[str], str]] = []
        # Thinking blocks in order, each [thinking pieces, signature, redacted data]; and by block index.
        self.thinking: list[list[Any]] = []
        self.thinking_at: dict[Any, list[Any]] = {}
        self.usage: dict[str, Any] = {}
        self.stop = ""

    def feed(self, data: str) -> Delta | tuple[Delta, ...] | None:
        try:
            event = json.loads(data)
        except ValueError:
            raise self.engine.malformed(data) from None
        kind = event.get("type")
        if kind == "content_block_delta":
            delta = event["delta"]
            delta_type = delta.get("type")
            if delta_type == "text_delta":
                self.text.append(delta["text"])
                return TextDelta(delta["text"])
            if delta_type == "input_json_delta":
                position = self.tool_index.get(event["index"])
                if position is None:
                    return None  # input of a server tool (web_search): the API runs it, not us
                call_id, name, pieces, _ = self.calls[position]
                piece = delta.get("partial_json", "")
                pieces.append(piece)
                return ToolCallDelta(position, call_id, name, piece)
            if delta_type == "thinking_delta":
                self.reasoning.append(delta["thinking"])
                self.thinking_block(event.get("index"))[0].append(delta["thinking"])
                return ReasoningDelta(delta["thinking"])
            if delta_type == "signature_delta":
                self.signature = delta["signature"]
                self.thinking_block(event.get("index"))[1] = delta["signature"]
            return None
        if kind == "content_block_start":
            block = event["content_block"]
            block_type = block.get("type")
            if block_type == "tool_use":
                # Compatible servers may put the whole input here and send no input_json_delta at all.
                start_input = block.get("input")
                start_text = json.dumps(start_input, ensure_ascii=False) if start_input else ""
                self.tool_index[event["index"]] = len(self.calls)
                self.calls.append((block["id"], block["name"], [], start_text))
                return ToolCallDelta(len(self.calls) - 1, block["id"], block["name"], start_text)
            if block_type == "text" and block.get("text"):
                self.text.append(block["text"])
                return TextDelta(block["text"])
            if block_type == "thinking":
                entry = self.thinking_block(event.get("index"), new=True)
                entry[1] = block.get("signature") or ""
                if block.get("thinking"):
                    entry[0].append(block["thinking"])
                    self.reasoning.append(block["thinking"])
                    return ReasoningDelta(block["thinking"])
            elif block_type == "redacted_thinking":
                self.thinking_block(event.get("index"), new=True)[2] = block.get("data") or ""
            return None
        if kind == "message_start":
            self.usage.update(event["message"].get("usage") or {})
        elif kind == "message_delta":
            self.stop = (event.get("delta") or {}).get("stop_reason") or self.stop
            self.usage.update({k: v for k, v in (event.get("usage") or {}).items() if v is not None})
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            raise self.engine.event_error(event)
        # ping and content_block_stop carry nothing we need
        return None

    def finish(self) -> Response:
        engine = self.engine
        if not self.done:
            raise LLMNetworkError("the stream ended before message_stop", provider=engine.provider,
                                  model=engine.model, status=200)
        tool_calls = tuple(ToolCall(call_id, name, "".join(pieces) or start or "{}")
                           for call_id, name, pieces, start in self.calls)
        text, reasoning = "".join(self.text), "".join(self.reasoning)
        thinking = tuple(ThinkingBlock("".join(pieces), signature, data) for pieces, signature, data in self.thinking)
        usage = (anthropic_usage(self.usage) if self.usage
                 else self.context.estimate_usage(text, reasoning, tool_calls))
        return Response(text=text, reasoning=reasoning, tool_calls=tool_calls,
                        finish_reason=finish_reason(self.stop, bool(tool_calls)), usage=usage,
                        provider=engine.provider, model=engine.model, raw_finish_reason=self.stop,
                        reasoning_signature=self.signature, thinking_blocks=thinking)

    def thinking_block(self, index: Any, *, new: bool = False) -> list[Any]:
        """The thinking block at content `index`; a delta for a block never started opens one."""
        entry = None if new else self.thinking_at.get(index)
        if entry is None:
            entry = self.thinking_at[index] = [[], "", ""]
            self.thinking.append(entry)
        return entry
