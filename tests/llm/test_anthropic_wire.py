"""Byte shapes of the Anthropic Messages engine: request JSON, headers, URL, events and usage."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import pytest

from tests.fake_provider import Failure, FakeProvider, Step, ThinkingSpec, ToolCallSpec, UsageSpec
from tests.llm.conftest import SYSTEM, make_engine, provider_config
from yagent.workers.llm import (
    ANTHROPIC_VERSION,
    AnthropicEngine,
    CallOptions,
    FinishReason,
    LLMServerError,
    Message,
    ReasoningDelta,
    TextDelta,
    ThinkingBlock,
    ToolCall,
    ToolCallDelta,
    ToolDefinition,
    Usage,
)

READ_FILE = ToolDefinition("read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}})


def _run(fake: FakeProvider, messages: list[Message], tools: list[ToolDefinition] | None = None,
         options: CallOptions | None = None, **engine: object) -> object:
    async def main() -> object:
        async with make_engine(fake, "anthropic", **engine) as eng:
            return await eng.complete(messages, tools or [], options).final()

    return asyncio.run(main())


def test_request_uses_top_level_system_and_tool_blocks(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(text="ok")])
    history = [
        Message.system(SYSTEM),
        Message.user("Look at both files"),
        Message.assistant("Reading.", reasoning="Need both files.", reasoning_signature="sig-1",
                          tool_calls=(ToolCall("toolu_1", "read_file", '{"path": "a.py"}'),
                                      ToolCall("toolu_2", "read_file", '{"path": "b.py"}'))),
        Message.tool("toolu_1", "A"),
        Message.tool("toolu_2", "B"),
        Message.user("Now compare them."),
    ]
    _run(fake, history, [READ_FILE])
    (request,) = fake.requests
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == "fake-key"
    assert request.headers["anthropic-version"] == ANTHROPIC_VERSION
    assert "authorization" not in request.headers
    assert json.loads(request.raw) == {
        "model": "fake-model",
        "max_tokens": 8192,
        "system": SYSTEM,
        "messages": [
            {"role": "user", "content": "Look at both files"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "Need both files.", "signature": "sig-1"},
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.py"}},
                {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {"path": "b.py"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "A"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "B"},
                {"type": "text", "text": "Now compare them."},
            ]},
        ],
        "tools": [{"name": "read_file", "description": "Read a file.",
                   "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}],
        "stream": True,
    }


def test_reasoning_without_signature_is_not_replayed_and_bad_arguments_stay_visible(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(text="ok")])
    history = [Message.system(SYSTEM), Message.user("go"),
               Message.assistant(reasoning="from another provider",
                                 tool_calls=(ToolCall("t1", "read_file", '{"path": "a.py"'),)),
               Message.tool("t1", "Error: invalid JSON arguments")]
    _run(fake, history)
    assistant = fake.requests[0].body["messages"][1]
    assert assistant == {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"_unparsed_arguments": '{"path": "a.py"'}}]}


@pytest.mark.parametrize("base_suffix", ["", "/v1", "/v1/"])
def test_messages_url_accepts_a_base_with_or_without_v1(fake: FakeProvider, base_suffix: str) -> None:
    fake.script("coding", "Coding agent", [Step(text="ok")])

    async def main() -> None:
        config = replace(provider_config(fake, "anthropic"), api_base_url=fake.base_url + base_suffix)
        async with AnthropicEngine(config) as engine:
            await engine.complete([Message.system(SYSTEM), Message.user("x")]).final()

    asyncio.run(main())
    assert fake.requests[0].path == "/v1/messages"


@pytest.mark.parametrize(("effort", "budget", "max_tokens"), [
    ("low", 1024, 8192), ("medium", 8192, 12288), ("high", 24576, 28672), ("max", 32000, 36096)])
def test_reasoning_effort_maps_to_thinking_budget(fake: FakeProvider, effort: str, budget: int,
                                                 max_tokens: int) -> None:
    fake.script("coding", "Coding agent", [Step(text="ok")])
    _run(fake, [Message.system(SYSTEM), Message.user("x")], reasoning_effort=effort, temperature=0.3)
    body = fake.requests[0].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert body["max_tokens"] == max_tokens
    assert body["temperature"] == 1.0


def test_thinking_keeps_a_larger_configured_max_tokens(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(text="ok")])
    _run(fake, [Message.system(SYSTEM), Message.user("x")], reasoning_effort="low", max_tokens=40000)
    assert fake.requests[0].body["max_tokens"] == 40000


def test_unknown_effort_means_no_thinking_never_a_zero_budget(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(text="ok")])
    _run(fake, [Message.system(SYSTEM), Message.user("x")], reasoning_effort="hihg")
    body = fake.requests[0].body
    assert "thinking" not in body
    assert "temperature" not in body
    assert body["max_tokens"] == 8192


RAW_EVENTS = "".join(f"event: {name}\ndata: {data}\n\n" for name, data in [
    ("message_start", '{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant",'
                      '"content":[],"model":"claude-x","stop_reason":null,"stop_sequence":null,"usage":'
                      '{"input_tokens":200,"cache_creation_input_tokens":50,"cache_read_input_tokens":1000,'
                      '"output_tokens":1}}}'),
    ("ping", '{"type": "ping"}'),
    ("content_block_start", '{"type":"content_block_start","index":0,"content_block":{"type":"thinking",'
                            '"thinking":""}}'),
    ("content_block_delta", '{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta",'
                            '"thinking":"Let me see"}}'),
    ("content_block_delta", '{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta",'
                            '"signature":"EqQBCgIYAh"}}'),
    ("content_block_stop", '{"type":"content_block_stop","index":0}'),
    ("content_block_start", '{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}'),
    ("content_block_delta", '{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Sure"}}'),
    ("content_block_stop", '{"type":"content_block_stop","index":1}'),
    ("content_block_start", '{"type":"content_block_start","index":2,"content_block":{"type":"tool_use",'
                            '"id":"toolu_01","name":"read_file","input":{}}}'),
    ("content_block_delta", '{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta",'
                            '"partial_json":""}}'),
    ("content_block_delta", '{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta",'
                            '"partial_json":"{\\"path\\": \\"a"}}'),
    ("content_block_delta", '{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta",'
                            '"partial_json":".py\\"}"}}'),
    ("content_block_stop", '{"type":"content_block_stop","index":2}'),
    ("message_delta", '{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},'
                      '"usage":{"output_tokens":89}}'),
    ("message_stop", '{"type":"message_stop"}'),
])


def test_raw_events_are_parsed_and_usage_is_normalised(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(raw=[RAW_EVENTS[i:i + 50] for i in range(0, len(RAW_EVENTS), 50)])])

    async def main() -> tuple[list[object], object]:
        async with make_engine(fake, "anthropic") as engine, \
                engine.complete([Message.system(SYSTEM), Message.user("x")]) as stream:
            deltas = [d async for d in stream]
            return deltas, await stream.final()

    deltas, response = asyncio.run(main())
    assert deltas == [ReasoningDelta("Let me see"), TextDelta("Sure"), ToolCallDelta(0, "toolu_01", "read_file", ""),
                      ToolCallDelta(0, "toolu_01", "read_file", ""),
                      ToolCallDelta(0, "toolu_01", "read_file", '{"path": "a'),
                      ToolCallDelta(0, "toolu_01", "read_file", '.py"}')]
    assert response.text == "Sure"
    assert response.reasoning == "Let me see"
    assert response.reasoning_signature == "EqQBCgIYAh"
    assert response.tool_calls == (ToolCall("toolu_01", "read_file", '{"path": "a.py"}'),)
    assert response.finish_reason is FinishReason.TOOL_USE
    # input_tokens (200) excludes cache reads (1000) and writes (50); the normalised total includes both.
    assert response.usage == Usage(total_input_tokens=1250, output_tokens=89, cached_input_tokens=1000)


def test_many_small_input_json_fragments(fake: FakeProvider) -> None:
    args = {"path": "src/deeply/nested/module.py", "line": 1234, "replacement": "x = compute(y) * 2"}
    fake.script("coding", "Coding agent", [Step(chunk_size=1, tool_calls=[ToolCallSpec("edit", args)])])

    async def main() -> tuple[int, object]:
        async with make_engine(fake, "anthropic") as engine, \
                engine.complete([Message.system(SYSTEM), Message.user("x")]) as stream:
            count = len([d async for d in stream if isinstance(d, ToolCallDelta)])
            return count, await stream.final()

    count, response = asyncio.run(main())
    assert count > len(json.dumps(args))
    assert response.tool_calls[0].parsed_arguments() == args


def test_reasoning_signature_round_trips(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [
        Step(reasoning="plan it", signature="sig-xyz", tool_calls=[ToolCallSpec("read_file", {"path": "a"})]),
        Step(text="done"),
    ])

    async def main() -> None:
        async with make_engine(fake, "anthropic") as engine:
            history = [Message.system(SYSTEM), Message.user("x")]
            first = await engine.complete(history).final()
            history += [first.message(), Message.tool(first.tool_calls[0].id, "content")]
            await engine.complete(history).final()

    asyncio.run(main())
    assistant = fake.requests[1].body["messages"][1]
    assert assistant["content"][0] == {"type": "thinking", "thinking": "plan it", "signature": "sig-xyz"}


THINKING = [ThinkingSpec("First read a.py.", "sig-A"), ThinkingSpec(redacted_data="EmwKAhgBEgy3va3pzix/LafPsn4a"),
            ThinkingSpec(" Then b.py.", "sig-B")]


@pytest.mark.parametrize("stream", [True, False])
def test_every_thinking_block_is_replayed_verbatim_in_order(fake: FakeProvider, stream: bool) -> None:
    # A tool-use turn must send back each thinking block with its own signature and each redacted block
    # with its data, in the order received: joining them under one signature, or dropping the redacted
    # one, gets a 400 from the API. The history also goes through the on-disk (JSONL) form in between.
    fake.script("coding", "Coding agent", [
        Step(thinking=THINKING, text="Reading.", tool_calls=[ToolCallSpec("read_file", {"path": "a.py"}, "toolu_1")]),
        Step(text="done"),
    ])

    async def main() -> object:
        async with make_engine(fake, "anthropic", reasoning_effort="low") as engine:
            history = [Message.system(SYSTEM), Message.user("x")]
            first = await engine.complete(history, [READ_FILE], CallOptions(stream=stream)).final()
            history += [first.message(), Message.tool("toolu_1", "contents")]
            saved = [Message.from_dict(json.loads(json.dumps(m.to_dict()))) for m in history]
            await engine.complete(saved, [READ_FILE], CallOptions(stream=stream)).final()
            return first

    first = asyncio.run(main())
    assert json.loads(fake.requests[1].raw)["messages"] == [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "First read a.py.", "signature": "sig-A"},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
            {"type": "thinking", "thinking": " Then b.py.", "signature": "sig-B"},
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.py"}},
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "contents"}]},
    ]
    assert first.reasoning == "First read a.py. Then b.py."  # joined, for display and token estimates
    assert first.message().thinking_blocks == (ThinkingBlock("First read a.py.", "sig-A"),
                                               ThinkingBlock(redacted_data="EmwKAhgBEgy3va3pzix/LafPsn4a"),
                                               ThinkingBlock(" Then b.py.", "sig-B"))


def test_a_tool_input_sent_whole_in_content_block_start_is_used(fake: FakeProvider) -> None:
    # Some Anthropic-compatible servers put the complete input in content_block_start and stream no
    # input_json_delta at all.
    raw = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in [
        {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [],
                                              "usage": {"input_tokens": 5, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {
            "type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.py", "limit": 10}}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {
            "type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {}}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta",
                                                              "partial_json": '{"path": "b.py"}'}},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"}])
    fake.script("coding", "Coding agent", [Step(raw=raw)])

    async def main() -> tuple[list[object], object]:
        async with make_engine(fake, "anthropic", max_retries=0) as engine, \
                engine.complete([Message.system(SYSTEM), Message.user("x")]) as stream:
            deltas = [d async for d in stream]
            return deltas, await stream.final()

    deltas, response = asyncio.run(main())
    assert response.tool_calls == (ToolCall("toolu_1", "read_file", '{"path": "a.py", "limit": 10}'),
                                   ToolCall("toolu_2", "read_file", '{"path": "b.py"}'))
    assert deltas[0] == ToolCallDelta(0, "toolu_1", "read_file", '{"path": "a.py", "limit": 10}')
    assert response.finish_reason is FinishReason.TOOL_USE


def test_error_event_mid_stream_is_classified_and_retried(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [
        Step(text="partial answer", failure=Failure.error_event(after_chunks=4)),
        Step(text="full answer"),
    ])

    async def main() -> tuple[list[object], object]:
        async with make_engine(fake, "anthropic") as engine, \
                engine.complete([Message.system(SYSTEM), Message.user("x")]) as stream:
            deltas = [d async for d in stream]
            return deltas, await stream.final()

    deltas, response = asyncio.run(main())
    assert response.text == "full answer"
    assert response.attempts == 2
    restarts = [d for d in deltas if type(d).__name__ == "StreamRestart"]
    assert len(restarts) == 1 and "overloaded_error" in restarts[0].reason


def test_error_event_is_an_llm_server_error_naming_the_provider(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(text="x", failure=Failure.error_event(after_chunks=1))])
    with pytest.raises(LLMServerError) as info:
        _run(fake, [Message.system(SYSTEM), Message.user("x")], max_retries=0)
    assert "'fakeprov'" in str(info.value) and "fake-model" in str(info.value)


def test_missing_usage_is_estimated_and_non_streaming_works(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(text="word " * 50, send_usage=False),
                                            Step(text="json", usage=UsageSpec(300, 9, 100))])
    streamed = _run(fake, [Message.system(SYSTEM), Message.user("x")])
    plain = _run(fake, [Message.system(SYSTEM), Message.user("x")], options=CallOptions(stream=False))
    assert streamed.usage.estimated and streamed.usage.output_tokens >= 50
    assert "stream" not in fake.requests[1].body
    assert plain.text == "json"
    assert plain.usage == Usage(300, 9, 100)
