"""Rendering a scripted step in the two wire formats, the way the real services put it on the wire."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from ._script import Failure, Step, UsageSpec

__all__ = [
    "Rendered",
    "anthropic_error_body",
    "anthropic_error_event",
    "openai_error_body",
    "openai_error_event",
    "render_anthropic",
    "render_openai",
]

_OPENAI_STOP = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i:i + size] for i in range(0, len(text), size)]


@dataclass
class Rendered:
    """A response ready to write: SSE events (each one HTTP chunk) or one JSON body."""

    events: list[str]
    json_body: dict[str, Any] | None = None


def default_usage(step: Step, request_bytes: int) -> UsageSpec:
    produced = len(step.text) + len(step.reasoning_text()) + sum(len(c.arguments_text()) + len(c.name)
                                                          for c in step.tool_calls)
    return UsageSpec(input_tokens=max(1, request_bytes // 4), output_tokens=max(1, produced // 4))


def openai_error_body(status: int, message: str, error_type: str = "") -> dict[str, Any]:
    kind = error_type or {401: "invalid_request_error", 429: "rate_limit_exceeded"}.get(
        status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def anthropic_error_body(status: int, message: str, error_type: str = "") -> dict[str, Any]:
    kind = error_type or {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                          404: "not_found_error", 429: "rate_limit_error", 529: "overloaded_error"}.get(
        status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def render_openai(step: Step, body: dict[str, Any], serial: int, request_bytes: int) -> Rendered:
    model = body.get("model", "fake-model")
    usage = step.usage or default_usage(step, request_bytes)
    wire_usage = {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens,
                  "total_tokens": usage.input_tokens + usage.output_tokens,
                  "prompt_tokens_details": {"cached_tokens": usage.cached_tokens}}
    calls = [(c.id or f"call_fake_{serial}_{i}", c) for i, c in enumerate(step.tool_calls)]
    stop = step.stop_reason or ("tool_calls" if calls else "stop")
    stop = _OPENAI_STOP.get(stop, stop)
    created = int(time.time())
    if not body.get("stream"):
        message: dict[str, Any] = {"role": "assistant", "content": step.text or None}
        if step.reasoning_text():
            message["reasoning_content"] = step.reasoning_text()
        if calls:
            message["tool_calls"] = [{"id": cid, "type": "function",
                                      "function": {"name": c.name, "arguments": c.arguments_text()}}
                                     for cid, c in calls]
        out: dict[str, Any] = {"id": f"chatcmpl-fake-{serial}", "object": "chat.completion", "created": created,
                               "model": model, "choices": [{"index": 0, "message": message, "logprobs": None,
                                                            "finish_reason": stop}]}
        if step.send_usage:
            out["usage"] = wire_usage
        return Rendered([], json_body=out)
    include_usage = bool((body.get("stream_options") or {}).get("include_usage")) and step.send_usage
    head = {"id": f"chatcmpl-fake-{serial}", "object": "chat.completion.chunk", "created": created,
            "model": model, "system_fingerprint": "fp_fake"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        payload = {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        if include_usage:
            payload["usage"] = None
        return f"data: {_dumps(payload)}\n\n"

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"reasoning_content": p}) for p in _pieces(step.reasoning_text(), step.chunk_size)]
    events += [chunk({"content": p}) for p in _pieces(step.text, step.chunk_size)]
    for index, (cid, call) in enumerate(calls):
        events.append(chunk({"tool_calls": [{"index": index, "id": cid, "type": "function",
                                             "function": {"name": call.name, "arguments": ""}}]}))
        events += [chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]})
                   for p in _pieces(call.arguments_text(), step.chunk_size)]
    events.append(chunk({}, stop))
    if include_usage:
        events.append(f"data: {_dumps({**head, 'choices': [], 'usage': wire_usage})}\n\n")
    events.append("data: [DONE]\n\n")
    return Rendered(events)


def openai_error_event(failure: Failure) -> str:
    """OpenRouter-style error chunk in the middle of a stream."""
    error = {"message": failure.message, "type": failure.error_type or "server_error",
             "code": failure.status or None}
    return f"data: {_dumps({'error': error})}\n\n"


def anthropic_error_event(failure: Failure) -> str:
    error = {"type": failure.error_type or "overloaded_error", "message": failure.message}
    return _sse("error", {"type": "error", "error": error})


def _sse(name: str, payload: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {_dumps(payload)}\n\n"


def render_anthropic(step: Step, body: dict[str, Any], serial: int, request_bytes: int) -> Rendered:
    model = body.get("model", "fake-model")
    usage = step.usage or default_usage(step, request_bytes)
    # The Messages API counts cache reads outside input_tokens.
    start_usage = {"input_tokens": usage.input_tokens - usage.cached_tokens, "cache_creation_input_tokens": 0,
                   "cache_read_input_tokens": usage.cached_tokens, "output_tokens": 1}
    calls = [(c.id or f"toolu_fake_{serial}_{i}", c) for i, c in enumerate(step.tool_calls)]
    stop = step.stop_reason or ("tool_use" if calls else "end_turn")
    message_id = f"msg_fake_{serial}"
    if not body.get("stream"):
        content: list[dict[str, Any]] = []
        content += [{"type": "redacted_thinking", "data": t.redacted_data} if t.redacted_data
                    else {"type": "thinking", "thinking": t.text, "signature": t.signature}
                    for t in step.thinking_blocks()]
        if step.text:
            content.append({"type": "text", "text": step.text})
        content += [{"type": "tool_use", "id": cid, "name": c.name, "input": json.loads(c.arguments_text())}
                    for cid, c in calls]
        out: dict[str, Any] = {"id": message_id, "type": "message", "role": "assistant", "model": model,
                               "content": content, "stop_reason": stop, "stop_sequence": None}
        if step.send_usage:
            out["usage"] = {**start_usage, "output_tokens": usage.output_tokens}
        return Rendered([], json_body=out)
    message = {"id": message_id, "type": "message", "role": "assistant", "model": model, "content": [],
               "stop_reason": None, "stop_sequence": None}
    if step.send_usage:
        message["usage"] = start_usage
    events = [_sse("message_start", {"type": "message_start", "message": message}),
              _sse("ping", {"type": "ping"})]
    index = 0
    for thinking in step.thinking_blocks():
        if thinking.redacted_data:  # the whole block arrives in its start event, no deltas
            events.append(_sse("content_block_start", {
                "type": "content_block_start", "index": index,
                "content_block": {"type": "redacted_thinking", "data": thinking.redacted_data}}))
        else:
            events.append(_sse("content_block_start", {
                "type": "content_block_start", "index": index,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""}}))
            events += [_sse("content_block_delta", {"type": "content_block_delta", "index": index,
                                                    "delta": {"type": "thinking_delta", "thinking": p}})
                       for p in _pieces(thinking.text, step.chunk_size)]
            events.append(_sse("content_block_delta", {"type": "content_block_delta", "index": index,
                                                       "delta": {"type": "signature_delta",
                                                                 "signature": thinking.signature}}))
        events.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    if step.text:
        events.append(_sse("content_block_start", {"type": "content_block_start", "index": index,
                                                   "content_block": {"type": "text", "text": ""}}))
        events += [_sse("content_block_delta", {"type": "content_block_delta", "index": index,
                                                "delta": {"type": "text_delta", "text": p}})
                   for p in _pieces(step.text, step.chunk_size)]
        events.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    for cid, call in calls:
        events.append(_sse("content_block_start", {"type": "content_block_start", "index": index,
                                                   "content_block": {"type": "tool_use", "id": cid,
                                                                     "name": call.name, "input": {}}}))
        events += [_sse("content_block_delta", {"type": "content_block_delta", "index": index,
                                                "delta": {"type": "input_json_delta", "partial_json": p}})
                   for p in _pieces(call.arguments_text(), step.chunk_size)]
        events.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    delta: dict[str, Any] = {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}}
    if step.send_usage:
        delta["usage"] = {"output_tokens": usage.output_tokens}
    events.append(_sse("message_delta", delta))
    events.append(_sse("message_stop", {"type": "message_stop"}))
    return Rendered(events)
