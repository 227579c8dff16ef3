"""Conversation memory during a turn: saves debounced, the end of the turn saved (and fsynced), shape stable."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from yagent.workers.llm import Message, ToolCall
from yagent.workers.memory import MemoryFileError, load_memory
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


def _planted_link(tmp_path: Path) -> tuple[Path, Path]:
    target = tmp_path / "elsewhere.txt"
    target.write_text("precious\n")
    path = tmp_path / "task" / "memory.jsonl"
    path.parent.mkdir()
    path.symlink_to(target)
    return path, target


def test_a_link_planted_at_the_memory_file_is_neither_read_nor_appended_to(tmp_path: Path) -> None:
    # A run may write its task's directory: a link put where the memory file goes must not feed the next turn
    # another file, nor take its conversation.
    path, target = _planted_link(tmp_path)
    with pytest.raises(MemoryFileError, match=r"symbolic link to .*elsewhere\.txt.*earlier conversation"):
        load_memory(path)
    memory = ConversationMemory(path=path)
    memory.follow_turn([Message.user("hello"), Message.assistant("hi")])
    with pytest.raises(OSError, match="symbolic link"):  # as a full disk would: the turn's saves take OSError
        memory.save()  # new lines only: an append, which would go through the link
    assert target.read_text() == "precious\n"


def test_a_pipe_planted_at_the_memory_file_fails_the_load_at_once(tmp_path: Path) -> None:
    path = tmp_path / "memory.jsonl"
    os.mkfifo(path)  # no writer ever comes: a plain open for reading would wait for one forever
    with pytest.raises(MemoryFileError, match="a named pipe"):
        load_memory(path)


def test_a_pipe_put_at_the_memory_file_during_a_turn_fails_its_save_as_an_os_error(tmp_path: Path) -> None:
    # The Director's saves within a turn give way to an OSError (the end of the turn reports it): what was planted
    # at the name must fail a save that way, never with another exception and never by waiting on the pipe.
    path = tmp_path / "memory.jsonl"
    memory = load_memory(path)
    memory.follow_turn([Message.user("hello")])
    memory.save()
    path.unlink()
    os.mkfifo(path)
    memory.follow_turn([Message.user("hello"), Message.assistant("hi")])
    with pytest.raises(OSError, match="named pipe"):
        memory.save()
