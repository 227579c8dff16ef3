"""Byte shapes of the OpenAI-compatible engine: what goes on the wire and how the answer is read back."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

from tests.fake_provider import Failure, FakeProvider, Step, ToolCallSpec, UsageSpec
from tests.llm.conftest import SYSTEM, make_engine, openai_chunk
from yagent.workers.llm import (
    CallOptions,
    FinishReason,
    LLMBadRequestError,
    Message,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolDefinition,
    Usage,
)

READ_FILE = ToolDefinition("read_file", "Read a file from the workspace.",
                           {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})

HISTORY = [
    Message.system(SYSTEM),
    Message.user("Fix the bug in a.py"),
    Message.assistant("Let me look.", reasoning="I should read the file first.",
                      tool_calls=(ToolCall("call_1", "read_file", '{"path": "a.py"}'),)),
    Message.tool("call_1", "print('hi')"),
]


def test_request_body_and_headers_are_chat_completions_shaped(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(text="ok")])

    async def main() -> None:
        async with make_engine(fake) as engine:
            await engine.complete(HISTORY, [READ_FILE]).final()

    asyncio.run(main())
    (request,) = fake.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer fake-key"
    assert json.loads(request.raw) == {
        "model": "fake-model",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Fix the bug in a.py"},
            {"role": "assistant", "content": "Let me look.",
             "tool_calls": [{"id": "call_1", "type": "function",
                             "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}],
             "reasoning_content": "I should read the file first."},
            {"role": "tool", "tool_call_id": "call_1", "content": "print('hi')"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [{"type": "function", "function": {
            "name": "read_file", "description": "Read a file from the workspace.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}],
    }


def test_assistant_with_only_tool_calls_sends_null_content(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(text="ok")])
    history = [Message.system(SYSTEM), Message.user("go"),
               Message.assistant(tool_calls=(ToolCall("c9", "read_file", "{}"),)), Message.tool("c9", "x")]

    async def main() -> None:
        async with make_engine(fake) as engine:
            await engine.complete(history).final()

    asyncio.run(main())
    assistant = fake.requests[0].body["messages"][2]
    assert assistant == {"role": "assistant", "content": None,
                         "tool_calls": [{"id": "c9", "type": "function",
                                         "function": {"name": "read_file", "arguments": "{}"}}]}


def test_reasoning_effort_is_passed_through_with_thinking_enabled(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(text="ok")])

    async def main() -> None:
        async with make_engine(fake, reasoning_effort="high") as engine:
            await engine.complete(HISTORY[:2]).final()

    asyncio.run(main())
    body = fake.requests[0].body
    assert body["reasoning_effort"] == "high"
    assert body["thinking"] == {"type": "enabled"}


def test_a_server_refusing_the_thinking_field_by_name_is_asked_again_without_it(fake: FakeProvider) -> None:
    # OpenAI's and Azure's validators refuse fields they do not know; DeepSeek needs this one.
    fake.script("coding", "Coding agent", [
        Step(failure=Failure.http(400, message="Unrecognized request argument supplied: thinking",
                                  error_type="invalid_request_error")),
        Step(text="first"), Step(text="second")])

    async def main() -> list[str]:
        async with make_engine(fake, reasoning_effort="high", max_retries=0) as engine:
            return [(await engine.complete(HISTORY[:2]).final()).text for _ in range(2)]

    assert asyncio.run(main()) == ["first", "second"]
    bodies = [r.body for r in fake.requests]
    assert [("thinking" in b, b["reasoning_effort"]) for b in bodies] == [(True, "high"), (False, "high"),
                                                                          (False, "high")]


def test_other_bad_requests_are_not_sent_again(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(failure=Failure.http(400, message="context too long"))])

    async def main() -> None:
        async with make_engine(fake, reasoning_effort="high", max_retries=3) as engine:
            await engine.complete(HISTORY[:2]).final()

    with pytest.raises(LLMBadRequestError, match="context too long"):
        asyncio.run(main())
    assert len(fake.requests) == 1


# A stream as OpenAI sends it with include_usage: usage null on every chunk, then a usage-only chunk.
RAW_STREAM = (
    'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":'
    '[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
    'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":'
    '[{"index":0,"delta":{"reasoning_content":"Think"},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
    'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":'
    '[{"index":0,"delta":{"content":"Hel"},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
    ': keep-alive comment\n\n'
    'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":'
    '[{"index":0,"delta":{"content":"lo"},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
    'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":'
    '[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}\n\n'
    'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[],'
    '"usage":{"prompt_tokens":1200,"completion_tokens":34,"total_tokens":1234,'
    '"prompt_tokens_details":{"cached_tokens":1000}}}\n\n'
    'data: [DONE]\n\n'
)


def test_raw_stream_is_parsed_and_cached_tokens_stay_inside_the_input_total(fake: FakeProvider) -> None:
    # Split across HTTP chunks in the middle of lines: the reader must not care where chunks end.
    pieces = [RAW_STREAM[i:i + 37] for i in range(0, len(RAW_STREAM), 37)]
    fake.script("coding", "Coding agent", [Step(raw=pieces)])

    async def main() -> tuple[list[object], object]:
        async with make_engine(fake) as engine, engine.complete(HISTORY[:2]) as stream:
            deltas = [d async for d in stream]
            return deltas, await stream.final()

    deltas, response = asyncio.run(main())
    assert deltas == [ReasoningDelta("Think"), TextDelta("Hel"), TextDelta("lo")]
    assert response.text == "Hello"
    assert response.reasoning == "Think"
    assert response.finish_reason is FinishReason.END_TURN
    assert response.raw_finish_reason == "stop"
    assert response.usage == Usage(total_input_tokens=1200, output_tokens=34, cached_input_tokens=1000)


def test_many_small_fragments_assemble_into_complete_tool_calls(fake: FakeProvider) -> None:
    args_a = {"path": "src/module/very_long_file_name.py", "start": 10, "end": 200}
    args_b = {"command": "pytest -q tests/test_something.py", "timeout": 120}
    fake.script("coding", "Coding agent", [Step(
        text="Reading both.", chunk_size=1,
        tool_calls=[ToolCallSpec("read_file", args_a, id="call_a"), ToolCallSpec("run_bash", args_b, id="call_b")])])

    async def main() -> tuple[list[ToolCallDelta], object]:
        async with make_engine(fake) as engine, engine.complete(HISTORY[:2], [READ_FILE]) as stream:
            progress = [d async for d in stream if isinstance(d, ToolCallDelta)]
            return progress, await stream.final()

    progress, response = asyncio.run(main())
    # Precondition: the fixture really is fragmented (one character per fragment).
    assert len(progress) > len(json.dumps(args_a)) + len(json.dumps(args_b))
    assert response.tool_calls == (ToolCall("call_a", "read_file", json.dumps(args_a)),
                                   ToolCall("call_b", "run_bash", json.dumps(args_b)))
    assert response.tool_calls[0].parsed_arguments() == args_a
    assert response.finish_reason is FinishReason.TOOL_USE
    assert {d.index for d in progress} == {0, 1}


def test_interleaved_fragments_of_parallel_calls_are_keyed_by_index(fake: FakeProvider) -> None:
    raw = "".join([
        openai_chunk({"tool_calls": [{"index": 0, "id": "call_0", "type": "function",
                                "function": {"name": "read_file", "arguments": ""}}]}),
        openai_chunk({"tool_calls": [{"index": 1, "id": "call_1", "type": "function",
                                "function": {"name": "read_file", "arguments": '{"pa'}}]}),
        openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"path"'}}]}),
        openai_chunk({"tool_calls": [{"index": 1, "function": {"arguments": 'th": "b.py"}'}}]}),
        openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": ': "a.py"}'}}]}),
        # Ollama ends tool turns with "stop"; the engine still reports a tool-use stop.
        openai_chunk({}, "stop"),
        "data: [DONE]\n\n",
    ])
    fake.script("coding", "Coding agent", [Step(raw=raw)])

    async def main() -> object:
        async with make_engine(fake) as engine:
            return await engine.complete(HISTORY[:2]).final()

    response = asyncio.run(main())
    assert response.tool_calls == (ToolCall("call_0", "read_file", '{"path": "a.py"}'),
                                   ToolCall("call_1", "read_file", '{"path": "b.py"}'))
    assert response.finish_reason is FinishReason.TOOL_USE


def test_fragments_without_index_or_id_still_assemble(fake: FakeProvider) -> None:
    raw = "".join([
        openai_chunk({"tool_calls": [{"function": {"name": "grep", "arguments": '{"pat'}}]}),
        openai_chunk({"tool_calls": [{"function": {"arguments": 'tern": "x"}'}}]}),
        openai_chunk({}, "tool_calls"),
        "data: [DONE]\n\n",
    ])
    fake.script("coding", "Coding agent", [Step(raw=raw)])

    async def main() -> object:
        async with make_engine(fake) as engine:
            return await engine.complete(HISTORY[:2]).final()

    response = asyncio.run(main())
    (call,) = response.tool_calls
    assert (call.name, call.arguments) == ("grep", '{"pattern": "x"}')
    assert GENERATED_ID.fullmatch(call.id), call.id


GENERATED_ID = re.compile(r"call_[0-9a-f]{32}")


def _tool_turn_without_ids(*paths: str) -> str:
    """A streamed tool turn from a server that sends no tool-call ids (some vLLM/llama.cpp builds)."""
    chunks = [openai_chunk({"tool_calls": [{"index": i, "type": "function",
                                      "function": {"name": "read_file", "arguments": json.dumps({"path": p})}}]})
              for i, p in enumerate(paths)]
    return "".join([*chunks, openai_chunk({}, "tool_calls"), "data: [DONE]\n\n"])


def test_missing_tool_call_ids_are_unique_across_the_steps_of_a_conversation(fake: FakeProvider) -> None:
    """Positional ids (`call_0` on every step) would make step 2's result pair with step 1's call."""
    fake.script("coding", "Coding agent", [Step(raw=_tool_turn_without_ids("a.py", "b.py")),
                                           Step(raw=_tool_turn_without_ids("c.py")),
                                           Step(text="done")])

    async def main() -> tuple[list[ToolCallDelta], list[Any]]:
        history = HISTORY[:2]
        deltas: list[ToolCallDelta] = []
        responses = []
        async with make_engine(fake) as engine:
            for _ in range(3):
                async with engine.complete(history, [READ_FILE]) as stream:
                    deltas += [d async for d in stream if isinstance(d, ToolCallDelta)]
                    response = await stream.final()
                responses.append(response)
                history = [*history, response.message(),
                           *(Message.tool(c.id, f"contents of {c.parsed_arguments()['path']}")
                             for c in response.tool_calls)]
        return deltas, responses

    deltas, (first, second, _) = asyncio.run(main())
    ids = [c.id for c in (*first.tool_calls, *second.tool_calls)]
    assert len(ids) == 3 and len(set(ids)) == 3, ids
    assert all(GENERATED_ID.fullmatch(i) for i in ids), ids
    # The streamed progress names the same id the final response carries.
    assert [d.id for d in deltas] == ids
    # The last request pairs each result with its own call.
    sent = fake.requests[2].body["messages"]
    calls = {c["id"]: json.loads(c["function"]["arguments"])["path"]
             for m in sent if m["role"] == "assistant" for c in m.get("tool_calls") or ()}
    results = {m["tool_call_id"]: m["content"] for m in sent if m["role"] == "tool"}
    assert results == {cid: f"contents of {path}" for cid, path in calls.items()}
    assert len(results) == 3


def test_missing_tool_call_ids_are_unique_when_not_streaming(fake: FakeProvider) -> None:
    def body(path: str) -> str:
        return json.dumps({"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [{
            "index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": None,
            "tool_calls": [{"type": "function", "function": {"name": "read_file",
                                                            "arguments": json.dumps({"path": path})}}]}}]})

    fake.script("coding", "Coding agent", [Step(raw=body(p), raw_content_type="application/json")
                                           for p in ("a.py", "b.py")])

    async def main() -> list[Any]:
        history = HISTORY[:2]
        responses = []
        async with make_engine(fake) as engine:
            for _ in range(2):
                response = await engine.complete(history, [READ_FILE], CallOptions(stream=False)).final()
                responses.append(response)
                history = [*history, response.message(), Message.tool(response.tool_calls[0].id, "x")]
        return responses

    first, second = asyncio.run(main())
    ids = [first.tool_calls[0].id, second.tool_calls[0].id]
    assert ids[0] != ids[1]
    assert all(GENERATED_ID.fullmatch(i) for i in ids), ids


def test_server_without_usage_chunk_gets_an_estimate_flagged_as_estimated(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(text="a fairly long answer " * 20, send_usage=False)])

    async def main() -> object:
        async with make_engine(fake) as engine:
            return await engine.complete(HISTORY, [READ_FILE]).final()

    response = asyncio.run(main())
    # The client asked for usage; the server (like llama.cpp) ignored it.
    assert fake.requests[0].body["stream_options"] == {"include_usage": True}
    assert response.usage.estimated is True
    assert response.usage.output_tokens >= 80  # 20 x "a fairly long answer " is about 80 tokens
    assert response.usage.total_input_tokens > 30


def test_reasoning_round_trips_into_the_next_request(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [
        Step(reasoning="Step one: read the file.", tool_calls=[ToolCallSpec("read_file", {"path": "a.py"})]),
        Step(text="done"),
    ])

    async def main() -> None:
        async with make_engine(fake) as engine:
            history = HISTORY[:2]
            first = await engine.complete(history, [READ_FILE]).final()
            history = [*history, first.message(), Message.tool(first.tool_calls[0].id, "contents")]
            await engine.complete(history, [READ_FILE]).final()

    asyncio.run(main())
    second = fake.requests[1].body["messages"]
    assert second[2]["reasoning_content"] == "Step one: read the file."
    assert second[3] == {"role": "tool", "tool_call_id": second[2]["tool_calls"][0]["id"], "content": "contents"}


def test_non_streaming_response_is_parsed(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(text="plain", reasoning="hmm",
                                                 tool_calls=[ToolCallSpec("read_file", {"path": "x"})],
                                                 usage=UsageSpec(50, 7, 20))])

    async def main() -> object:
        async with make_engine(fake) as engine:
            return await engine.complete(HISTORY[:2], options=CallOptions(stream=False)).final()

    response = asyncio.run(main())
    body = fake.requests[0].body
    assert body["stream"] is False and "stream_options" not in body
    assert (response.text, response.reasoning) == ("plain", "hmm")
    assert response.tool_calls[0].name == "read_file"
    assert response.usage == Usage(50, 7, 20)
