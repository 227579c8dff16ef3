"""Conversation memory during a turn: saves debounced, the end of the turn saved (and fsynced), shape stable."""

from __future__ import annotations

import json
from pathlib import Path

from yagent.workers.llm import Message, ToolCall
from yagent.workers.memory import load_memory
from yagent.workers.memory.conversation import DEBOUNCE_SECONDS, ConversationMemory


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_turn_is_saved_at_most_once_per_debounce_interval_then_whole_at_its_end(tmp_path: Path) -> None:
    path = tmp_path / "memory.jsonl"
    clock = Clock()
    memory = ConversationMemory(path=path, clock=clock)
    memory.follow_turn([Message.user("earlier")])
    memory.end_turn()
    memory.save()
    turn = [Message.user("now")]
    memory.follow_turn(turn)
    clock.now += 1
    assert not memory.save_debounced()  # too soon after the last save
    clock.now += DEBOUNCE_SECONDS
    assert memory.save_debounced()
    assert [m["content"] for m in _lines(path)] == ["earlier", "now"]
    turn.append(Message.assistant("reply"))
    memory.follow_turn(turn)
    assert not memory.save_debounced()
    memory.end_turn()
    memory.save()
    assert [m["content"] for m in _lines(path)] == ["earlier", "now", "reply"]
    assert load_memory(path).snapshot() == [Message.user("earlier"), *turn]


def test_a_saved_message_that_changed_within_the_turn_rewrites_the_file(tmp_path: Path) -> None:
    path = tmp_path / "memory.jsonl"
    memory = ConversationMemory(path=path)
    call = Message.assistant("", tool_calls=(ToolCall("c1", "agent_exit", "{}"),))
    memory.follow_turn([Message.user("q"), call, Message.tool("c1", "accepted")])
    memory.save(sync=False)
    memory.follow_turn([Message.user("q"), call, Message.tool("c1", "refused: fix the hand-off")])
    memory.save()
    assert [m["content"] for m in _lines(path)] == ["q", "", "refused: fix the hand-off"]


def test_the_json_shape_of_existing_files_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "memory.jsonl"
    path.write_text('{"role": "user", "content": "old"}\n{"role": "assistant", "content": "a", '
                    '"reasoning": "r", "reasoning_signature": "s"}\n')
    memory = load_memory(path)
    assert memory.snapshot() == [Message.user("old"), Message.assistant("a", reasoning="r", reasoning_signature="s")]
    memory.follow_turn([Message.user("new")])
    memory.save()
    assert _lines(path)[:2] == [{"role": "user", "content": "old"},
                                {"role": "assistant", "content": "a", "reasoning": "r", "reasoning_signature": "s"}]
