"""Conversation memory of a task: the Director's messages across turns, one JSONL file per task.

The message list is private: readers get copies (`snapshot`), writers go through methods. Each
turn's director worker loads the file, follows the turn as it goes (`follow_turn`, saved at most every
`DEBOUNCE_SECONDS` by `save_debounced`, without fsync) and saves at the end of the turn with fsync;
saving appends the new lines when the history only grew, and rewrites the file atomically when it was
replaced or an already-saved line changed.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from yagent.ipc.atomic_file import write_atomic
from yagent.ipc.state_files import StateFileError, open_state_file
from yagent.ipc.state_layout import MEMORY_FILE, task_dir
from yagent.workers.llm import Message

__all__ = ["DEBOUNCE_SECONDS", "ConversationMemory", "MemoryFileError", "load_memory", "memory_path"]

DEBOUNCE_SECONDS = 5.0  # a turn's intermediate saves: at most one per this many seconds


def memory_path(home: Path, task: str) -> Path:
    return task_dir(home, task) / MEMORY_FILE


class ConversationMemory:
    def __init__(self, messages: list[Message] | None = None, *, path: Path | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._messages: list[Message] = list(messages or [])
        self._path = path
        self._persisted = len(self._messages)  # lines already on disk
        self._rewrite = False
        self._clock = clock
        self._saved_at: float | None = None
        self._turn_start: int | None = None

    def snapshot(self) -> list[Message]:
        with self._lock:
            return list(self._messages)

    def size(self) -> int:
        with self._lock:
            return len(self._messages)

    def last_message(self) -> Message | None:
        with self._lock:
            return Message.from_dict(self._messages[-1].to_dict()) if self._messages else None

    def append(self, *messages: Message) -> None:
        with self._lock:
            self._messages.extend(messages)

    def replace(self, messages: list[Message]) -> None:
        """Load a whole history at once (e.g. after compression); the file is rewritten on save."""
        with self._lock:
            self._messages = list(messages)
            self._rewrite = True

    def follow_turn(self, turn: Sequence[Message]) -> None:
        """The current turn's messages so far (the user's message first): they replace the turn's previous
        state. A message already saved that changed (a refused exit's result rewritten) makes the next save
        a rewrite."""
        with self._lock:
            if self._turn_start is None:
                self._turn_start = len(self._messages)
            start = self._turn_start
            old = self._messages[start:]
            new = list(turn)
            saved = max(0, self._persisted - start)
            if old[:saved] != new[:saved]:
                self._rewrite = True
            self._messages[start:] = new

    def end_turn(self) -> None:
        """The turn is over: the next `follow_turn` starts a new one."""
        with self._lock:
            self._turn_start = None

    def save_debounced(self) -> bool:
        """Save without fsync unless the last save was under `DEBOUNCE_SECONDS` ago; True when it saved."""
        now = self._clock()
        if self._saved_at is not None and now - self._saved_at < DEBOUNCE_SECONDS:
            return False
        self.save(sync=False)
        return True

    def has_exchange(self) -> bool:
        """True once the model has answered in this task (an assistant or tool message exists)."""
        with self._lock:
            return any(m.role in ("assistant", "tool") for m in self._messages)

    def save(self, *, sync: bool = True) -> None:
        """Write what changed; `sync` (the end of a turn) fsyncs it."""
        self._saved_at = self._clock()
        if self._path is None:
            return
        with self._lock:
            messages = list(self._messages)
            rewrite = self._rewrite or self._persisted > len(messages)
            start = 0 if rewrite else self._persisted
            lines = "".join(json.dumps(m.to_dict(), ensure_ascii=False) + "\n" for m in messages[start:])
            self._rewrite = False
            self._persisted = len(messages)
        self._path.parent.mkdir(parents=True, exist_ok=True)
        if rewrite:
            write_atomic(self._path, lines.encode("utf-8"))  # a link at the name is replaced, never written through
        elif lines:
            # A StateFileError (an OSError) for what was planted at the name: a save fails as on a full disk.
            with os.fdopen(open_state_file(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "a",
                           encoding="utf-8") as fh:
                fh.write(lines)
                fh.flush()
                if sync:
                    os.fsync(fh.fileno())


class MemoryFileError(ValueError):
    """A line in the middle of a task's memory file is not a message (the file was edited or damaged), or the file
    is not a regular file of its own (a link or a pipe put in its place)."""


def _open_memory_to_load(path: Path) -> int:
    """The memory file opened for reading (`state_files.open_state_file`: what sits at the name may not be
    yagent's); anything but a regular file is a MemoryFileError, as a damaged one is."""
    try:
        return open_state_file(path, os.O_RDONLY)
    except StateFileError as exc:
        raise MemoryFileError(f"{exc.strerror}; the task's earlier conversation is then forgotten, or put the memory "
                              "file itself there") from exc


def load_memory(path: Path) -> ConversationMemory:
    """Read a task's memory; a torn last line (crash mid-write) is dropped, the rest is kept.

    A file that does not end in a newline is rewritten on the next save, so new lines never glue onto it.
    """
    messages: list[Message] = []
    try:
        # A crash can cut a multi-byte character in two; the damaged last line is then dropped below.
        with os.fdopen(_open_memory_to_load(path), "rb") as fh:
            text = fh.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ConversationMemory(path=path)
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            data: Any = json.loads(line)
            messages.append(Message.from_dict(data))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            if i == len(lines) - 1:
                break
            raise MemoryFileError(
                f"{path}:{i + 1}: not a conversation message ({type(exc).__name__}: {exc}). Repair that line, "
                "or move the file aside to continue the task without its earlier conversation."
            ) from exc
    memory = ConversationMemory(messages, path=path)
    torn = len(messages) != sum(1 for ln in lines if ln.strip())
    if torn or (text and not text.endswith("\n")):
        memory.replace(messages)  # rewrite on the next save: drops a torn tail, ends the file with a newline
    return memory
