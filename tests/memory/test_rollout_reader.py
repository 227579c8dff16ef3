"""Reading a rollout back: faithful messages, a torn tail tolerated, a damaged middle named, compacted, pairing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.fake_provider import FakeProvider, Step
from tests.memory.rollout_fixtures import conversation, write_rollout
from yagent.ipc.provider_config import parse_llm_config
from yagent.workers.llm import CallOptions, Message, ToolCall, build_engine
from yagent.workers.memory import rollout_records as records
from yagent.workers.memory.replay import load_for_replay
from yagent.workers.memory.resume_repair import INTERRUPTED_TOOL_RESULT
from yagent.workers.memory.rollout_reader import MAX_ROLLOUT_BYTES, RolloutReadError, read_rollout
from yagent.workers.memory.rollout_writer import RolloutWriter


def test_messages_come_back_exactly_reasoning_thinking_and_full_tool_output(tmp_path: Path) -> None:
    messages = conversation()
    replay = load_for_replay(write_rollout(tmp_path / "r.jsonl", messages))
    assert replay.messages == messages
    assert replay.messages[2].thinking_blocks[0].signature == "sig-1"
    assert len(replay.messages[3].content) == len("print('hello')\n") * 2000
    assert replay.meta["delegation_id"] == "call_repo" and replay.meta["parent_session_id"] == "run-parent"
    assert replay.turn_context is not None and replay.turn_context["tier"] == "fast"


def test_a_torn_last_line_is_dropped_and_reported(tmp_path: Path) -> None:
    path = write_rollout(tmp_path / "r.jsonl", conversation(), stop=None)
    whole = path.read_bytes()
    extra = json.dumps(records.response_item(Message.assistant("never finished é"), 3)).encode()
    path.write_bytes(whole + extra[: len(extra) - 7])  # cut inside the line, as a kill -9 mid-write does
    replay = load_for_replay(path)
    assert replay.messages == conversation()
    assert len(replay.problems) == 1 and "torn last line" in replay.problems[0]


def test_a_damaged_middle_line_is_an_error_naming_file_and_line(tmp_path: Path) -> None:
    path = write_rollout(tmp_path / "r.jsonl", conversation())
    lines = path.read_bytes().split(b"\n")
    lines[3] = lines[3][:20] + b"\x00garbage" + lines[3][40:]
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(RolloutReadError) as err:
        read_rollout(path)
    assert f"{path}:4:" in str(err.value) and "move it aside" in str(err.value)


@pytest.mark.parametrize("bad", [b'{"type": "response_item", "payload": {"message": {"role": "wizard"}}}',
                                 b'{"type": "no_such_type", "payload": {}}', b"[1, 2]", b'"text"',
                                 b'{"type": "compacted", "payload": {"messages": 3}}'])
def test_a_forged_record_in_the_middle_is_refused(tmp_path: Path, bad: bytes) -> None:
    path = write_rollout(tmp_path / "r.jsonl", conversation())
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join([*lines[:2], bad, *lines[2:]]))
    with pytest.raises(RolloutReadError, match=":3:"):
        read_rollout(path)


def test_the_newest_compacted_record_replaces_everything_before_it(tmp_path: Path) -> None:
    summary_1 = [Message.system("sys"), Message.user("summary one")]
    summary_2 = [Message.system("sys"), Message.user("summary two"), Message.assistant("ack")]
    after = [Message.user("go on"), Message.assistant("going")]
    extra = [records.compacted(summary_1, 3), records.response_item(Message.user("between"), 3),
             records.compacted(summary_2, 4), *(records.response_item(m, 5) for m in after)]
    replay = load_for_replay(write_rollout(tmp_path / "r.jsonl", conversation(), extra=extra))
    assert replay.messages == [*summary_2, *after]


# One fixture feeds both sides: what the engine sends the provider and what the reader rebuilds.
PAIRING_FIXTURE = [
    Message.system("You are the yagent Repo agent (test)"),
    Message.user("q"),
    Message.tool("orphan", "a result nobody asked for"),
    Message.assistant("", tool_calls=(ToolCall("a", "read_file", "{}"), ToolCall("b", "list_dir", "{}"))),
    Message.tool("b", "b first"),
    Message.tool("a", "a first"),
    Message.assistant("", tool_calls=(ToolCall("c", "delegate_repo", "{}"),)),
    Message.tool("c", "the delegation was interrupted"),
    Message.user("more"),
    Message.tool("c", "the child's result, replayed"),  # the second output of the same call: last wins
    Message.assistant("", tool_calls=(ToolCall("d", "read_file", "{}"),)),  # no result at all
]


def test_the_reader_and_the_engine_pair_tool_results_the_same_way(tmp_path: Path) -> None:
    replay = load_for_replay(write_rollout(tmp_path / "r.jsonl", PAIRING_FIXTURE))
    with FakeProvider() as fake:
        fake.script("repo", "You are the yagent Repo agent", [Step(text="ok")])
        config = {"global": {"llm": {"use_provider": "fake", "providers": {"fake": fake.provider_table()}}},
                  "llm": {"max_retries": 0}}
        engine = build_engine(parse_llm_config(config, {}), agent="repo")

        async def send() -> None:
            async with engine.complete(PAIRING_FIXTURE, [], CallOptions()) as stream:
                await stream.final()

        asyncio.run(send())
        sent = fake.requests_for("repo")[0].body["messages"]

    def shape_sent(m: dict) -> tuple:
        return (m["role"], m.get("tool_call_id", ""), tuple(c["id"] for c in m.get("tool_calls") or ()))

    def shape_read(m: Message) -> tuple:
        return (m.role, m.tool_call_id, tuple(c.id for c in m.tool_calls))

    assert [shape_sent(m) for m in sent] == [shape_read(m) for m in replay.messages]
    sent_results = {m["tool_call_id"]: m["content"] for m in sent if m["role"] == "tool"}
    read_results = {m.tool_call_id: m.content for m in replay.messages if m.role == "tool"}
    assert sent_results["c"] == read_results["c"] == "the child's result, replayed"
    assert sent_results["a"] == read_results["a"] == "a first"
    assert "orphan" not in read_results
    # Only the wording for a call with no result differs: a resume says it was interrupted.
    assert read_results["d"] == INTERRUPTED_TOOL_RESULT != sent_results["d"]


def test_an_empty_or_missing_file(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_bytes(b"")
    assert read_rollout(tmp_path / "empty.jsonl").records == []
    with pytest.raises(OSError):
        load_for_replay(tmp_path / "missing.jsonl")


def test_a_rollout_past_what_any_run_writes_is_refused_unread_saying_what_to_do(tmp_path: Path) -> None:
    path = write_rollout(tmp_path / "r.jsonl", conversation())
    with open(path, "r+b") as fh:
        fh.truncate(MAX_ROLLOUT_BYTES + 1)  # sparse: a file that would cost the worker its memory to read
    with pytest.raises(OSError) as raised:
        load_for_replay(path)
    assert str(path) in str(raised.value) and "move it aside to resume without replay" in str(raised.value)


def test_a_writer_that_was_killed_mid_batch_leaves_a_readable_prefix(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    writer = RolloutWriter(path)
    for message in conversation():
        writer.enqueue(records.response_item(message, 1))
    writer.close(10)
    data = path.read_bytes()
    for cut in (len(data) - 1, len(data) - 300, len(data) // 2):
        path.write_bytes(data[:cut])
        content = read_rollout(path)
        assert content.records and len(content.problems) <= 1
