"""What real servers put on the wire that the reference APIs never do, read over real HTTP.

OpenRouter keep-alive comments, CRLF framing, raw U+2028 inside JSON (llama.cpp, vLLM), invalid UTF-8,
a JSON or HTML body where a stream was asked for, redirects, LiteLLM's string error codes, arguments
sent as objects, events this engine has no use for.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from tests.fake_provider import Failure, FakeProvider, Step, ToolCallSpec
from tests.llm.conftest import SYSTEM, make_engine, openai_chunk
from tests.llm.seams import FakeClock
from yagent.workers.llm import (
    CallOptions,
    FinishReason,
    LLMAuthError,
    LLMNetworkError,
    LLMServerError,
    LLMTimeoutError,
    Message,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallDelta,
)

MESSAGES = [Message.system(SYSTEM), Message.user("go")]


def _call(fake: FakeProvider, api_format: str = "openai", options: CallOptions | None = None,
          **engine: Any) -> tuple[Any, list[Any]]:
    async def main() -> tuple[Any, list[Any]]:
        async with make_engine(fake, api_format, **engine) as eng, eng.complete(MESSAGES, (), options) as stream:
            deltas = [d async for d in stream]
            return await stream.final(), deltas

    return asyncio.run(main())


@pytest.mark.parametrize("api_format", ["openai", "anthropic"])
def test_unicode_line_separators_inside_json_strings_do_not_split_the_event(fake: FakeProvider,
                                                                           api_format: str) -> None:
    # JSON allows U+2028, U+2029 and U+0085 unescaped; SSE lines end only at CR or LF.
    text = "a\u2028b\u2029c\x85d\x1ee\x0cf"
    fake.script("coding", "Coding agent", [Step(text=text, chunk_size=3, reasoning="r\u2028s")])
    response, _ = _call(fake, api_format, max_retries=0)
    assert response.text == text
    assert response.reasoning == "r\u2028s"


def test_sse_framing_variants_and_chunk_boundaries_anywhere_are_read_alike(fake: FakeProvider) -> None:
    events = [
        ": OPENROUTER PROCESSING\r\n\r\n",
        openai_chunk({"role": "assistant", "content": ""}).replace("\n", "\r\n"),
        "event: message\r\n" + openai_chunk({"content": "héllo "}).replace("data: ", "data:").replace("\n", "\r\n"),
        "retry: 3000\nid: 7\n" + openai_chunk({"content": "wörld"}),
        "data:\n\n",  # an event with empty data is not dispatched (SSE), not malformed JSON
        openai_chunk({"content": "!"}).replace("\n", "\r"),
        openai_chunk({}, "stop"),
        "data: [DONE]",  # no final newline before the connection ends
    ]
    body = "".join(events).encode()
    # One byte per HTTP chunk: cuts between CR and LF, inside "data:", inside the two bytes of "é".
    pieces = [body[i:i + 1] for i in range(len(body))]
    fake.script("coding", "Coding agent", [Step(raw=pieces)])
    response, deltas = _call(fake, max_retries=0)
    assert response.text == "héllo wörld!"
    assert [d.text for d in deltas if isinstance(d, TextDelta)] == ["héllo ", "wörld", "!"]
    assert response.finish_reason is FinishReason.END_TURN


def _multiline(payload: dict[str, Any], newline: str = "\n") -> str:
    """One event whose JSON spans several data lines (indented), some written `data:` without the space."""
    lines = json.dumps(payload, indent=1, ensure_ascii=False).split("\n")
    return "".join(("data:" if i % 2 else "data: ") + line + newline for i, line in enumerate(lines)) + newline


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("api_format", ["openai", "anthropic"])
def test_an_event_whose_data_spans_several_lines_is_joined(fake: FakeProvider, api_format: str,
                                                           newline: str) -> None:
    # SSE: every data line of one event is joined with "\n"; the event ends at the blank line.
    if api_format == "openai":
        events = [_multiline(json.loads(openai_chunk({"role": "assistant", "content": "line one\nl\u2028ine"})[6:]),
                             newline),
                  ": a comment between events" + newline,
                  openai_chunk({"content": "!"}).replace("\n", newline),
                  _multiline(json.loads(openai_chunk({}, "stop")[6:]), newline),
                  "data: [DONE]"]  # the last event ends with the connection, not with a blank line
    else:
        events = [_multiline(e, newline) for e in [
            {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [],
                                                  "usage": {"input_tokens": 5, "output_tokens": 1}}},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 0,
             "delta": {"type": "text_delta", "text": "line one\nl\u2028ine"}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "!"}},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}},
            {"type": "message_stop"}]]
    body = "".join(events).encode()
    # One byte per HTTP chunk, so a CRLF is cut in two between data lines of one event as well.
    fake.script("coding", "Coding agent", [Step(raw=[body[i:i + 1] for i in range(len(body))])])
    response, deltas = _call(fake, api_format, max_retries=0)
    assert response.text == "line one\nl\u2028ine!"
    assert [d.text for d in deltas if isinstance(d, TextDelta)] == ["line one\nl\u2028ine", "!"]
    assert response.finish_reason is FinishReason.END_TURN


def test_invalid_utf8_in_a_stream_is_replaced_not_fatal(fake: FakeProvider) -> None:
    head, tail = openai_chunk({"content": "before MARK after"}).encode().split(b"MARK")
    raw = [openai_chunk({"role": "assistant"}).encode(), head + b"\xff\xfe" + tail, openai_chunk({}, "stop").encode(),
           b"data: [DONE]\n\n"]
    fake.script("coding", "Coding agent", [Step(raw=raw)])
    response, _ = _call(fake, max_retries=0)
    assert response.text == "before \ufffd\ufffd after"


@pytest.mark.parametrize("api_format", ["openai", "anthropic"])
def test_keep_alive_comments_do_not_extend_the_request_budget(fake: FakeProvider, api_format: str) -> None:
    # OpenRouter sends ": OPENROUTER PROCESSING" while the upstream has nothing; that must not outlive
    # `[llm] timeout`. Each clock reading costs a second: 200 comments are far beyond a 20 s budget.
    fake.script("coding", "Coding agent", [Step(raw=[": OPENROUTER PROCESSING\n\n"] * 200
                                                + [openai_chunk({"content": "late"}, "stop"), "data: [DONE]\n\n"])])

    class TickingClock(FakeClock):
        def __call__(self) -> float:
            self.now += 1.0
            return self.now

    with pytest.raises(LLMTimeoutError, match=r"budget of 20s") as info:
        _call(fake, api_format, clock=TickingClock(), timeout=20, max_retries=5)
    assert info.value.retryable is False
    assert len(fake.requests) == 1


def test_a_stall_cut_short_by_the_budget_says_the_budget_not_the_idle_timeout(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(text="stalls", failure=Failure.stall(after_chunks=2))])
    with pytest.raises(LLMTimeoutError) as info:
        _call(fake, clock=time.monotonic, timeout=0.3, idle_timeout=30, max_retries=3)
    message = str(info.value)
    assert "budget of 0.3s" in message and "30s" not in message
    assert len(fake.requests) == 1


def _completion_body(**message: Any) -> str:
    return json.dumps({"id": "x", "object": "chat.completion", "created": 1, "model": "m",
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", **message}}],
                       "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}})


def test_a_server_that_ignores_stream_true_is_read_as_a_whole_response(fake: FakeProvider) -> None:
    body = _completion_body(content="whole answer", reasoning_content="thought")
    fake.script("coding", "Coding agent", [Step(raw=body, raw_content_type="application/json")])
    response, deltas = _call(fake, max_retries=0)
    assert (response.text, response.reasoning) == ("whole answer", "thought")
    assert response.usage.total_input_tokens == 10
    # A streaming consumer still sees the content as deltas.
    assert deltas == [ReasoningDelta("thought"), TextDelta("whole answer")]


@pytest.mark.parametrize("api_format", ["openai", "anthropic"])
def test_an_error_body_with_status_200_on_a_streaming_request_is_classified(fake: FakeProvider,
                                                                         api_format: str) -> None:
    body = ({"type": "error", "error": {"type": "authentication_error", "message": "bad key"}}
            if api_format == "anthropic" else {"error": {"message": "bad key", "code": 401}})
    fake.script("coding", "Coding agent", [Step(raw=json.dumps(body), raw_content_type="application/json")] * 2)
    with pytest.raises(LLMAuthError, match="bad key"):
        _call(fake, api_format, max_retries=1)
    assert len(fake.requests) == 1


@pytest.mark.parametrize("stream", [True, False])
def test_an_html_page_with_status_200_is_named_and_not_retried(fake: FakeProvider, stream: bool) -> None:
    page = "<!DOCTYPE html><html><head><title>Sign in to the proxy</title></head><body></body></html>"
    fake.script("coding", "Coding agent", [Step(raw=page, raw_content_type="text/html; charset=utf-8")] * 3)
    with pytest.raises(LLMNetworkError) as info:
        _call(fake, options=CallOptions(stream=stream), max_retries=2)
    message = str(info.value)
    assert "text/html" in message and "Sign in to the proxy" in message and "api_base_url" in message
    assert "HTTP 200" in message and "'fakeprov'" in message
    assert len(fake.requests) == 1


@pytest.mark.parametrize("api_format", ["openai", "anthropic"])
def test_a_redirect_names_the_location_and_is_not_retried(fake: FakeProvider, api_format: str) -> None:
    target = "https://api.example.com/v1/chat/completions"
    fake.script("coding", "Coding agent", [Step(failure=Failure.http(301, message="moved",
                                                                     headers={"location": target}))] * 3)
    with pytest.raises(LLMNetworkError) as info:
        _call(fake, api_format, max_retries=2)
    message = str(info.value)
    assert "HTTP 301" in message and target in message and "api_base_url" in message
    assert len(fake.requests) == 1


def test_tool_arguments_sent_as_an_object_are_serialised_when_streaming(fake: FakeProvider) -> None:
    raw = "".join([
        openai_chunk({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                                "function": {"name": "read_file", "arguments": {"path": "a.py"}}}]}),
        openai_chunk({}, "tool_calls"), "data: [DONE]\n\n"])
    fake.script("coding", "Coding agent", [Step(raw=raw)])
    response, deltas = _call(fake, max_retries=0)
    assert response.tool_calls == (ToolCall("call_a", "read_file", '{"path": "a.py"}'),)
    assert all(isinstance(d.arguments, str) for d in deltas if isinstance(d, ToolCallDelta))


def test_tool_arguments_sent_as_an_object_are_serialised_when_not_streaming(fake: FakeProvider) -> None:
    body = _completion_body(content=None, tool_calls=[{"id": "call_a", "type": "function", "function": {
        "name": "read_file", "arguments": {"path": "a.py"}}}])
    fake.script("coding", "Coding agent", [Step(raw=body, raw_content_type="application/json")])
    response, _ = _call(fake, options=CallOptions(stream=False), max_retries=0)
    (call,) = response.tool_calls
    assert isinstance(call.arguments, str) and call.parsed_arguments() == {"path": "a.py"}


@pytest.mark.parametrize("stream", [True, False])
def test_content_sent_as_a_list_of_parts_keeps_the_text_parts(fake: FakeProvider, stream: bool) -> None:
    # Mistral sends `content` as [{"type": "text", "text": ...}, ...], streaming and not.
    if stream:
        raw: Any = [openai_chunk({"role": "assistant", "content": ""}),
                    openai_chunk({"content": [{"type": "text", "text": "Hello "}]}),
                    openai_chunk({"content": [{"type": "text", "text": "wor"}, {"type": "text", "text": "ld"}]}),
                    openai_chunk({}, "stop"), "data: [DONE]\n\n"]
        fake.script("coding", "Coding agent", [Step(raw=raw)])
    else:
        body = _completion_body(content=[{"type": "text", "text": "Hello "}, {"type": "text", "text": "world"}])
        fake.script("coding", "Coding agent", [Step(raw=body, raw_content_type="application/json")])
    response, deltas = _call(fake, options=CallOptions(stream=stream), max_retries=0)
    assert response.text == "Hello world"
    if stream:
        assert [d.text for d in deltas if isinstance(d, TextDelta)] == ["Hello ", "world"]
    assert response.finish_reason is FinishReason.END_TURN


def test_litellm_error_chunk_with_a_string_code_is_classified_by_that_code(fake: FakeProvider) -> None:
    # LiteLLM's proxy puts the HTTP status in `code` as a string and "None" in `type`.
    error = {"error": {"message": "Authentication Error, invalid key", "type": "None", "param": "None",
                       "code": "401"}}
    raw = openai_chunk({"role": "assistant", "content": ""}) + f"data: {json.dumps(error)}\n\n"
    fake.script("coding", "Coding agent", [Step(raw=raw)] * 3)
    with pytest.raises(LLMAuthError, match="invalid key") as info:
        _call(fake, max_retries=2)
    assert info.value.status == 401
    assert len(fake.requests) == 1


def test_a_null_error_field_in_a_chunk_is_not_an_error(fake: FakeProvider) -> None:
    chunk = json.loads(openai_chunk({"content": "fine"})[6:])
    raw = f"data: {json.dumps({**chunk, 'error': None})}\n\n" + openai_chunk({}, "stop") + "data: [DONE]\n\n"
    fake.script("coding", "Coding agent", [Step(raw=raw)])
    response, _ = _call(fake, max_retries=0)
    assert response.text == "fine"


def _sse(payload: dict[str, Any]) -> str:
    return f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n"


def test_anthropic_server_tool_blocks_are_skipped_not_a_crash(fake: FakeProvider) -> None:
    # Server tools (web_search) stream their input like tool_use blocks, but they are not ours to run.
    raw = "".join(_sse(e) for e in [
        {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [],
                                              "usage": {"input_tokens": 5, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta",
                                                              "partial_json": '{"query": "x"}'}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "found it"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"}])
    fake.script("coding", "Coding agent", [Step(raw=raw)])
    response, _ = _call(fake, "anthropic", max_retries=0)
    assert response.text == "found it" and response.tool_calls == ()


@pytest.mark.parametrize(("api_format", "event"), [
    ("openai", {"choices": [{"index": 0, "delta": "not an object"}]}),
    ("anthropic", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta"}}),
])
def test_an_event_of_an_unexpected_shape_is_a_server_error_naming_it(fake: FakeProvider, api_format: str,
                                                                   event: dict[str, Any]) -> None:
    fake.script("coding", "Coding agent", [Step(raw=f"data: {json.dumps(event)}\n\n")])
    with pytest.raises(LLMServerError, match="cannot read") as info:
        _call(fake, api_format, max_retries=0)
    assert json.dumps(event)[:40] in str(info.value)


@pytest.mark.parametrize("api_format", ["openai", "anthropic"])
def test_a_tool_use_finish_without_tool_calls_is_an_end_of_turn(fake: FakeProvider, api_format: str) -> None:
    fake.script("coding", "Coding agent", [Step(text="nothing to call", stop_reason="tool_use")])
    response, _ = _call(fake, api_format, max_retries=0)
    assert response.tool_calls == ()
    assert response.finish_reason is FinishReason.END_TURN
    assert response.raw_finish_reason in ("tool_calls", "tool_use")


def test_tool_calls_finished_with_stop_are_a_tool_use(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(tool_calls=[ToolCallSpec("read_file", {"path": "a"})],
                                                stop_reason="stop")])
    response, _ = _call(fake, max_retries=0)
    assert response.raw_finish_reason == "stop"
    assert response.finish_reason is FinishReason.TOOL_USE
