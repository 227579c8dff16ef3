"""Tool-call pairing repair and the message model's JSON round trip."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.fake_provider import FakeProvider, Step
from tests.llm.conftest import SYSTEM, make_engine
from yagent.workers.llm import (
    MISSING_TOOL_RESULT,
    FinishReason,
    Message,
    Response,
    ThinkingBlock,
    ToolCall,
    ToolDefinition,
    Usage,
    repair_tool_pairing,
    with_unique_call_ids,
)
from yagent.workers.memory.conversation import load_memory

CALLS = (ToolCall("c1", "read_file", '{"path": "a"}'), ToolCall("c2", "grep", '{"pattern": "b"}'))


def test_missing_result_is_filled_and_results_follow_their_call_in_call_order() -> None:
    messages = [Message.system("s"), Message.user("u"), Message.assistant("x", tool_calls=CALLS),
                Message.user("interrupting note"), Message.tool("c2", "B")]
    repaired = repair_tool_pairing(messages)
    assert [(m.role, m.tool_call_id) for m in repaired] == [
        ("system", ""), ("user", ""), ("assistant", ""), ("tool", "c1"), ("tool", "c2"), ("user", "")]
    assert repaired[3].content == MISSING_TOOL_RESULT and repaired[3].name == "read_file"
    assert repaired[4].content == "B"


def test_second_result_for_the_same_call_replaces_the_first() -> None:
    messages = [Message.user("u"), Message.assistant(tool_calls=CALLS[:1]), Message.tool("c1", "first (timed out)"),
                Message.user("resume"), Message.tool("c1", "second (replayed)")]
    repaired = repair_tool_pairing(messages)
    results = [m for m in repaired if m.role == "tool"]
    assert [m.content for m in results] == ["second (replayed)"]


def test_orphan_results_are_dropped_and_input_is_untouched() -> None:
    messages = [Message.user("u"), Message.tool("ghost", "no call"), Message.assistant("done")]
    snapshot = list(messages)
    assert repair_tool_pairing(messages) == [messages[0], messages[2]]
    assert messages == snapshot


def test_repair_is_idempotent() -> None:
    messages = [Message.user("u"), Message.assistant(tool_calls=CALLS), Message.tool("c2", "B"),
                Message.tool("zzz", "orphan"), Message.tool("c2", "B2")]
    once = repair_tool_pairing(messages)
    assert repair_tool_pairing(once) == once
    assert len([m for m in once if m.role == "tool"]) == 2


@pytest.mark.parametrize("api_format", ["openai", "anthropic"])
def test_requests_are_repaired_before_sending(fake: FakeProvider, api_format: str) -> None:
    fake.script("coding", "Coding agent", [Step(text="ok")])
    broken = [Message.system(SYSTEM), Message.user("u"), Message.assistant(tool_calls=CALLS),
              Message.tool("c1", "A"), Message.tool("c1", "A again")]

    async def main() -> None:
        async with make_engine(fake, api_format) as engine:
            await engine.complete(broken).final()

    asyncio.run(main())
    raw = fake.requests[0].raw.decode()
    assert "A again" in raw and '"A"' not in raw
    assert MISSING_TOOL_RESULT[:40] in raw


def test_messages_round_trip_through_json() -> None:
    messages = [Message.system("s"), Message.user("u"),
                Message.assistant("t", reasoning="r", reasoning_signature="sig", tool_calls=CALLS),
                Message.tool("c1", "result", name="read_file")]
    lines = [json.dumps(m.to_dict()) for m in messages]
    assert [Message.from_dict(json.loads(line)) for line in lines] == messages
    assert json.loads(lines[0]) == {"role": "system", "content": "s"}  # empty fields are not persisted
    tool = ToolDefinition("grep", "search", {"type": "object", "properties": {"p": {"type": "string"}}})
    assert ToolDefinition.from_dict(json.loads(json.dumps(tool.to_dict()))) == tool


def test_thinking_blocks_persist_in_order_and_older_memory_files_still_load(tmp_path: Path) -> None:
    path = tmp_path / "task.jsonl"
    old_line = {"role": "assistant", "content": "t", "reasoning": "r", "reasoning_signature": "sig",
                "tool_calls": [CALLS[0].to_dict()]}  # written before thinking_blocks existed
    path.write_text(json.dumps(old_line) + "\n", encoding="utf-8")
    memory = load_memory(path)
    assert memory.snapshot() == [Message.assistant("t", reasoning="r", reasoning_signature="sig",
                                                   tool_calls=CALLS[:1])]
    blocks = (ThinkingBlock("a", "sig-a"), ThinkingBlock(redacted_data="opaque"), ThinkingBlock("b", "sig-b"))
    memory.append(Message.tool("c1", "A"), Message.assistant("x", reasoning="ab", thinking_blocks=blocks))
    memory.save()
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert lines[0] == old_line and "thinking_blocks" not in lines[1]  # omitted when empty
    assert lines[2]["thinking_blocks"] == [{"type": "thinking", "thinking": "a", "signature": "sig-a"},
                                           {"type": "redacted_thinking", "data": "opaque"},
                                           {"type": "thinking", "thinking": "b", "signature": "sig-b"}]
    assert load_memory(path).snapshot()[2].thinking_blocks == blocks


def test_message_validation() -> None:
    with pytest.raises(ValueError, match="tool_call_id"):
        Message("tool", "x")
    with pytest.raises(ValueError, match="role"):
        Message("robot", "x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Expecting|Unterminated"):
        ToolCall("c", "n", '{"a": ').parsed_arguments()
    with pytest.raises(ValueError, match="not an object"):
        ToolCall("c", "n", "[1, 2]").parsed_arguments()


def test_the_conversation_is_snapshotted_when_complete_is_called(fake: FakeProvider) -> None:
    fake.script("coding", "Coding agent", [Step(text="ok")])
    history = [Message.system(SYSTEM), Message.user("first")]

    async def main() -> None:
        async with make_engine(fake) as engine:
            stream = engine.complete(history)
            history.append(Message.user("appended before the stream was iterated"))
            await stream.final()

    asyncio.run(main())
    assert [m["content"] for m in fake.requests[0].body["messages"]] == [SYSTEM, "first"]


def _response(*calls: ToolCall) -> Response:
    return Response(text="", reasoning="", tool_calls=calls, finish_reason=FinishReason.TOOL_USE, usage=Usage(),
                    provider="p", model="m")


def test_call_ids_already_used_in_the_conversation_or_the_response_are_replaced() -> None:
    history = [Message.user("u"), Message.assistant("", tool_calls=CALLS), Message.tool("c1", "A"),
               Message.tool("orphan", "O")]
    fresh = _response(ToolCall("c9", "read_file"))
    assert with_unique_call_ids(fresh, history) is fresh  # nothing to change: the same object
    clashing = _response(ToolCall("c1", "read_file"), ToolCall("c9", "grep"), ToolCall("c9", "grep"),
                         ToolCall("orphan", "grep"), ToolCall("", "grep"))
    ids = [c.id for c in with_unique_call_ids(clashing, history).tool_calls]
    assert ids[1] == "c9" and len(set(ids)) == 5
    assert not {ids[0], ids[2], ids[3], ids[4]} & {"c1", "c2", "c9", "orphan", ""}
