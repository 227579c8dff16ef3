"""OpenAI-compatible Chat Completions: OpenAI, DeepSeek, vLLM, llama.cpp server, Ollama, LiteLLM, OpenRouter."""

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
    error_for_status,
)
from ._images import SentImage
from ._messages import Message, ToolCall, ToolDefinition, new_call_id
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

__all__ = ["OpenAIEngine"]

_STOP = {
    "stop": FinishReason.END_TURN,
    "tool_calls": FinishReason.TOOL_USE,
    "function_call": FinishReason.TOOL_USE,
    "length": FinishReason.MAX_TOKENS,
    "content_filter": FinishReason.CONTENT_FILTER,
}


def finish_reason(raw: str, has_calls: bool) -> FinishReason:
    return agreeing_finish_reason(_STOP.get(raw, FinishReason.OTHER), has_calls)


def arguments_text(arguments: Any) -> str:
    """Arguments as JSON text; some servers send an already parsed object instead of a string."""
    if arguments is None or isinstance(arguments, str):
        return arguments or ""
    return json.dumps(arguments, ensure_ascii=False)


def content_text(content: Any) -> str:
    """Message content as text; Mistral sends a list of parts (`[{"type": "text", "text": ...}]`)."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        return "".join(part.get("text") or "" for part in content
                       if isinstance(part, dict) and part.get("type", "text") == "text")
    raise TypeError(f"message content is neither text nor a list of parts: {content!r}")


def openai_message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.role != "assistant":
        return {"role": message.role, "content": message.content}
    out: dict[str, Any] = {"role": "assistant", "content": message.content or None}
    if message.tool_calls:
        out["tool_calls"] = [{"id": c.id, "type": "function",
                              "function": {"name": c.name, "arguments": c.arguments}}
                             for c in message.tool_calls]
    elif out["content"] is None:
        out["content"] = ""
    if message.reasoning:
        # Thinking-mode servers (DeepSeek) expect earlier reasoning back on later turns.
        out["reasoning_content"] = message.reasoning
    return out


def openai_messages(messages: Sequence[Message], images: dict[int, list[SentImage]]) -> list[dict[str, Any]]:
    """The chat messages; a tool message cannot hold an image here, so the images of a run of tool results follow
    it in one user message (after the run: the tool results must come straight after the calls they answer)."""
    out: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if pending and message.role != "tool":
            out.append({"role": "user", "content": pending})
            pending = []
        out.append(openai_message(message))
        for image in images.get(index, ()):
            pending += image_parts(message, image)
    if pending:
        out.append({"role": "user", "content": pending})
    return out


def image_parts(message: Message, image: SentImage) -> list[dict[str, Any]]:
    """A tool result's image as user content parts: a line naming the call and the file, then the image."""
    if not image.data:
        return [{"type": "text", "text": f"(The image {image.path} of tool call {message.tool_call_id} is not "
                                         f"shown: it {image.problem}.)"}]
    return [{"type": "text", "text": f"The image {image.path} from tool call {message.tool_call_id}:"},
            {"type": "image_url", "image_url": {"url": image.data_url}}]


def _is_image_turn(message: Any) -> bool:
    return (isinstance(message, dict) and message.get("role") == "user" and isinstance(message.get("content"), list)
            and any(isinstance(p, dict) and p.get("type") == "image_url" for p in message["content"]))


def openai_usage(raw: dict[str, Any]) -> Usage:
    details = raw.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens") or raw.get("prompt_cache_hit_tokens") or 0
    return Usage(total_input_tokens=int(raw.get("prompt_tokens") or 0),
                 output_tokens=int(raw.get("completion_tokens") or 0),
                 cached_input_tokens=int(cached))


class _CallBuilder:
    __slots__ = ("_generated", "arguments", "id", "name")

    def __init__(self, call_id: str, name: str) -> None:
        self.id = call_id
        self.name = name
        self.arguments: list[str] = []
        self._generated = ""

    def call_id(self) -> str:
        """The server's id, else one generated once for this call (so every delta and the final agree)."""
        if self.id:
            return self.id
        if not self._generated:
            self._generated = new_call_id()
        return self._generated


def _infer_index(calls: dict[int, _CallBuilder], call_id: str) -> int:
    """For servers that send no `index`: a known id continues its call, a new id opens one."""
    for index, builder in calls.items():
        if call_id and builder.id == call_id:
            return index
    if call_id or not calls:
        return len(calls)
    return max(calls)


def assemble_fragment(calls: dict[int, _CallBuilder], fragment: dict[str, Any]) -> ToolCallDelta:
    """Fragments are keyed by `index`; servers that omit it are matched by id, else the last call."""
    function = fragment.get("function") or {}
    call_id = fragment.get("id") or ""
    index = fragment.get("index")
    if index is None:
        index = _infer_index(calls, call_id)
    name = function.get("name") or ""
    builder = calls.get(index)
    if builder is None:
        builder = calls[index] = _CallBuilder(call_id, name)
    else:
        if call_id and not builder.id:
            builder.id = call_id
        if name and not builder.name:
            builder.name = name
    piece = arguments_text(function.get("arguments"))
    if piece:
        builder.arguments.append(piece)
    return ToolCallDelta(index, builder.call_id(), builder.name, piece)


class OpenAIEngine(HTTPEngine):
    """`POST {api_base_url}/chat/completions` with a Bearer key; the base usually ends in /v1."""

    api_format = "openai"
    _sends_thinking = True  # until the server refuses the field by name

    def url(self) -> str:
        return self.url_for(self.config.api_base_url)

    @staticmethod
    def url_for(api_base_url: str) -> str:
        return f"{api_base_url.rstrip('/')}/chat/completions"

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.config.api_key}", "Content-Type": "application/json",
                "Accept": "text/event-stream"}

    def build_request(self, messages: Sequence[Message], tools: Sequence[ToolDefinition],
                      options: CallOptions) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": openai_messages(messages, self.sent_images(messages)),
                                "stream": options.stream}
        if options.stream:
            body["stream_options"] = {"include_usage": True}
        if tools:
            body["tools"] = self.tool_entries(tools)
        max_tokens = first_set(options.max_tokens, self.config.max_tokens)
        if max_tokens:
            body["max_tokens"] = max_tokens
        temperature = call_temperature(options.temperature, self.config.temperature)
        if temperature is not None:
            body["temperature"] = temperature
        effort = self.config.reasoning_effort if options.reasoning_effort is None else options.reasoning_effort
        if effort:
            # DeepSeek's thinking mode needs both fields. Most servers ignore the one they do not know; the
            # strict ones (OpenAI, Azure) refuse it by name, and `drop_rejected_field` stops sending it.
            body["reasoning_effort"] = effort
            if self._sends_thinking:
                body["thinking"] = {"type": "enabled"}
        body.update(options.extra_body)
        return body

    def tool_entry(self, tool: ToolDefinition) -> dict[str, Any]:
        return {"type": "function", "function": {"name": tool.name, "description": tool.description,
                                                 "parameters": dict(tool.parameters)}}

    def drop_rejected_field(self, body: dict[str, Any], error: LLMBadRequestError) -> bool:
        if "thinking" in body and "thinking" in error.detail.lower():
            del body["thinking"]
            self._sends_thinking = False
            return True
        if any(_is_image_turn(m) for m in body.get("messages", ())) and self.stop_sending_images(error):
            body["messages"] = [m for m in body["messages"] if not _is_image_turn(m)]
            return True
        return False

    def error_detail(self, body: Any) -> tuple[str, str]:
        error = body["error"]
        if isinstance(error, str):
            return error, ""
        return str(error.get("message") or error), str(error.get("type") or error.get("code") or "")

    def stream_error(self, chunk: dict[str, Any]) -> LLMError:
        message, kind = self.error_detail(chunk)
        error = chunk["error"]
        code = error.get("code") if isinstance(error, dict) else None
        if isinstance(code, str) and code.isdigit():
            code = int(code)  # LiteLLM's proxy sends the HTTP status as a string
        if isinstance(code, int) and code >= 400:
            return error_for_status(code, message, provider=self.provider, model=self.model)
        kinds: dict[str, type[LLMError]] = {
            "rate_limit_exceeded": LLMRateLimitError, "insufficient_quota": LLMRateLimitError,
            "invalid_request_error": LLMBadRequestError, "authentication_error": LLMAuthError,
        }
        return kinds.get(kind, LLMServerError)(f"error event in the stream: {message}", provider=self.provider,
                                               model=self.model, status=200)

    def stream_parser(self, context: _CallContext) -> StreamParser:
        return _OpenAIStream(self, context)

    def parse_body(self, body: Any, context: _CallContext) -> Response:
        if body.get("error"):
            raise self.stream_error(body)
        choice = (body.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        tool_calls = tuple(
            ToolCall(c.get("id") or new_call_id(), (c.get("function") or {}).get("name", ""),
                     arguments_text((c.get("function") or {}).get("arguments")) or "{}")
            for c in message.get("tool_calls") or ())
        text = content_text(message.get("content"))
        reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
        finish = choice.get("finish_reason") or ""
        usage = (openai_usage(body["usage"]) if body.get("usage")
                 else context.estimate_usage(text, reasoning, tool_calls))
        return Response(text=text, reasoning=reasoning, tool_calls=tool_calls,
                        finish_reason=finish_reason(finish, bool(tool_calls)), usage=usage,
                        provider=self.provider, model=self.model, raw_finish_reason=finish)


class _OpenAIStream(StreamParser):
    """Chat Completions chunks: `choices[0].delta` pieces, a finish_reason, an optional usage chunk, [DONE]."""

    def __init__(self, engine: OpenAIEngine, context: _CallContext) -> None:
        self.engine = engine
        self.context = context
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, _CallBuilder] = {}
        self.finish_reason = ""
        self.usage: Usage | None = None

    def feed(self, data: str) -> Delta | tuple[Delta, ...] | None:
        if data == "[DONE]":
            self.done = True
            return None
        try:
            chunk = json.loads(data)
        except ValueError:
            raise self.engine.malformed(data) from None
        if chunk.get("error"):  # OpenRouter and LiteLLM report failures inside a 200 stream
            raise self.engine.stream_error(chunk)
        raw_usage = chunk.get("usage")
        if raw_usage:
            self.usage = openai_usage(raw_usage)
        choices = chunk.get("choices")
        if not choices:
            return None
        choice = choices[0]
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]
        delta = choice.get("delta")
        if not delta:
            return None
        out: Delta | tuple[Delta, ...] | None = None
        piece = delta.get("reasoning_content") or delta.get("reasoning")
        if piece:
            self.reasoning.append(piece)
            out = ReasoningDelta(piece)
        piece = delta.get("content")
        if piece and type(piece) is not str:
            piece = content_text(piece)  # a list of parts (Mistral)
        if piece:
            self.text.append(piece)
            out = TextDelta(piece) if out is None else (out, TextDelta(piece))
        fragments = delta.get("tool_calls")
        if fragments:
            assembled = tuple(assemble_fragment(self.calls, f) for f in fragments)
            if out is None:
                out = assembled[0] if len(assembled) == 1 else assembled
            else:
                out = (out if type(out) is tuple else (out,)) + assembled
        return out

    def finish(self) -> Response:
        engine = self.engine
        if not self.done and not self.finish_reason:
            raise LLMNetworkError("the stream ended before the model finished (no finish_reason, no [DONE])",
                                  provider=engine.provider, model=engine.model, status=200)
        tool_calls = tuple(ToolCall(b.call_id(), b.name, "".join(b.arguments) or "{}")
                           for _, b in sorted(self.calls.items()))
        text, reasoning = "".join(self.text), "".join(self.reasoning)
        usage = self.usage or self.context.estimate_usage(text, reasoning, tool_calls)
        return Response(text=text, reasoning=reasoning, tool_calls=tool_calls,
                        finish_reason=finish_reason(self.finish_reason, bool(tool_calls)), usage=usage,
                        provider=engine.provider, model=engine.model, raw_finish_reason=self.finish_reason)
