"""Request bodies whose tool definitions are encoded once per set of definitions (`workers/llm/_request_body.py`):
what reaches the server is what encoding the whole body would send, call after call, and a change of the
definitions, or a caller's own "tools", is never hidden behind the text kept from an earlier call."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.fake_provider import FakeProvider, Step
from tests.llm.conftest import SYSTEM, make_engine
from yagent.workers.llm import CallOptions, Message, ToolDefinition
from yagent.workers.llm._request_body import MessageTexts, ToolEntries, encode_body

READ = ToolDefinition("read_file", "Read a file — whole, or a range of lines.",
                      {"type": "object", "properties": {"path": {"type": "string", "description": "Pfad, «relativ»"}},
                       "required": ["path"]})
GREP = ToolDefinition("grep", "Search the files.", {"type": "object", "properties": {"pattern": {"type": "string"}}})
CONVERSATION = [Message.system(SYSTEM), Message.user("Lis le fichier « a.py » ✓")]


@pytest.mark.parametrize("api_format", ["openai", "anthropic"])
def test_every_call_sends_the_tools_it_was_given_as_a_whole_encoding_would(fake: FakeProvider,
                                                                           api_format: str) -> None:
    fake.script("coding", SYSTEM, [Step(text="ok") for _ in range(4)], regex=True)
    first = (READ,)
    grown = (GREP, READ)
    renamed = (ToolDefinition("read_file", "Read a file (changed).", READ.parameters),)

    async def main() -> list[dict]:
        async with make_engine(fake, api_format) as engine:
            sent = []
            for tools in (first, first, renamed, grown):
                await engine.complete(CONVERSATION, tools).final()
                body = engine.build_request(CONVERSATION, tools, CallOptions())
                sent.append(json.loads(json.dumps(body, ensure_ascii=False)))
            return sent

    expected = asyncio.run(main())
    bodies = [r.body for r in fake.requests]
    assert len(bodies) == 4
    names = [[(t.get("function") or t)["name"] for t in b["tools"]] for b in bodies]
    assert names == [["read_file"], ["read_file"], ["read_file"], ["grep", "read_file"]]
    descriptions = [(b["tools"][0].get("function") or b["tools"][0])["description"] for b in bodies]
    assert descriptions[2] == "Read a file (changed)."  # a new definition, not the text kept for the old one
    for body, whole in zip(bodies, expected, strict=True):
        assert body["tools"] == whole["tools"]
        assert body["messages"] == whole["messages"]
    assert "«relativ»" in fake.requests[0].raw.decode()  # written as UTF-8, as a whole encoding writes it


def test_the_same_definitions_give_the_same_entries_and_other_objects_new_ones() -> None:
    made = []
    entries = ToolEntries(lambda t: made.append(t.name) or {"name": t.name, "parameters": dict(t.parameters)})
    listed = entries.entries((READ, GREP))
    assert entries.entries([READ, GREP]) is listed and made == ["read_file", "grep"]
    equal_but_new = ToolDefinition(READ.name, READ.description, dict(READ.parameters))
    assert entries.entries((equal_but_new, GREP)) is not listed  # identity is what is trusted, never equality
    assert entries.entries((GREP,)) is not listed and made[-1] == "grep"


def test_a_body_whose_tools_are_not_the_kept_entries_is_encoded_whole() -> None:
    entries = ToolEntries(lambda t: {"name": t.name})
    listed = entries.entries((READ,))
    own = {"model": "m", "tools": [{"name": "a caller's own"}]}  # extra_body replaced them
    assert json.loads(encode_body(own, entries)) == own
    assert json.loads(encode_body({"tools": listed}, entries)) == {"tools": [{"name": "read_file"}]}
    body = {"model": "m", "messages": [{"role": "user", "content": "é ✓"}], "tools": listed, "stream": True}
    encoded = encode_body(body, entries)
    assert encoded == json.dumps(body, ensure_ascii=False).encode()  # byte for byte, members in the body's order
    assert encode_body(body, None) == encoded


def test_a_callers_extra_tools_reach_the_server_instead_of_the_kept_text(fake: FakeProvider) -> None:
    fake.script("coding", SYSTEM, [Step(text="ok"), Step(text="ok")], regex=True)
    own = [{"type": "function", "function": {"name": "only_this", "parameters": {"type": "object"}}}]

    async def main() -> None:
        async with make_engine(fake) as engine:
            await engine.complete(CONVERSATION, (READ,)).final()
            await engine.complete(CONVERSATION, (READ,), CallOptions(extra_body={"tools": own})).final()

    asyncio.run(main())
    assert [r.body["tools"] for r in fake.requests][1] == own
    assert fake.requests[0].body["tools"][0]["function"]["name"] == "read_file"


def test_a_growing_conversation_is_written_as_a_whole_encoding_would_and_each_message_is_encoded_once() -> None:
    """Call after call the bytes are json.dumps's own; a message is encoded once while it stays at its place, and
    anew when it changed (an edited turn) or moved (a compaction shortened the list)."""
    texts = MessageTexts()
    encoded: list[object] = []
    real_dumps = json.dumps

    def counting(value: object, **kwargs: object) -> str:
        if isinstance(value, dict) and "role" in value:
            encoded.append(value["content"])
        return real_dumps(value, **kwargs)

    turns = [{"role": "system", "content": "sys"}, {"role": "user", "content": "é ✓"}]
    bodies = []
    for step in range(4):
        turns = [*turns, {"role": "assistant", "content": f"answer {step}", "x": [1.5, None, True]}]
        bodies.append({"model": "m", "messages": [dict(t) for t in turns], "stream": True})  # dicts made anew
    bodies.append({"model": "m", "messages": [dict(t) for t in turns[:1] + turns[2:]], "stream": True})  # compacted
    edited = [dict(t) for t in turns]
    edited[1]["content"] = "é ✓ (edited)"
    bodies.append({"model": "m", "messages": edited, "stream": True})
    bodies.append({"model": "m", "messages": [dict(t) | {"content": 1} if i == 0 else dict(t)
                                              for i, t in enumerate(turns)], "stream": True})
    json.dumps = counting  # type: ignore[assignment]
    try:
        got = [encode_body(body, None, texts) for body in bodies]
    finally:
        json.dumps = real_dumps  # type: ignore[assignment]
    assert got == [real_dumps(body, ensure_ascii=False).encode() for body in bodies]
    # 3 at first, then only the newest one each call; after the compaction every message from its gap on (each
    # moved); after the edit, the edited one and those it put back in their old places; then the changed first one
    # and the one whose edit was undone.
    assert encoded == ["sys", "é ✓", "answer 0", "answer 1", "answer 2", "answer 3",
                       "answer 0", "answer 1", "answer 2", "answer 3",
                       "é ✓ (edited)", "answer 0", "answer 1", "answer 2", "answer 3",
                       1, "é ✓"]


def test_a_callers_own_messages_changed_in_place_between_calls_reach_the_server_as_changed(fake: FakeProvider) -> None:
    """Messages a caller passes in `extra_body` are its own dicts, which it may change in place: they are encoded
    whole at every call, never taken for the kept text of the same (changed) dict."""
    fake.script("coding", SYSTEM, [Step(text="ok"), Step(text="ok")], regex=True)
    own = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "first"}]

    async def main() -> None:
        async with make_engine(fake) as engine:
            await engine.complete(CONVERSATION, (), CallOptions(extra_body={"messages": own})).final()
            own[1]["content"] = "second"
            await engine.complete(CONVERSATION, (), CallOptions(extra_body={"messages": own})).final()

    asyncio.run(main())
    assert [r.body["messages"][1]["content"] for r in fake.requests] == ["first", "second"]
