"""The thinklink: what the user asked and every thought/plan block of a run, in order.

It is what the third compression tier rebuilds a run from once the conversation itself has to go, and what
the second tier's digest is made of. Each run appends to a log of its own, `tasks/{task}/thinklink/{run}.jsonl`
(one JSON object a line, written as it goes), and keeps the entries in memory for itself.

A reply whose block cannot be read as the contract says (never closed, several blocks, an empty goal or
reason, more than one `[>]`) is a parse failure: counted here, made visible by the loop (an event and a log
line), never dropped in silence. A log write that fails is reported once; the entries stay in memory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yagent.ipc.state_files import is_own_dir, open_state_file, read_state_bytes, state_dir

from .project_instructions import INSTRUCTIONS_HEADING
from .thought import ThoughtPlan, ThoughtReading, read_thought

__all__ = ["ThinkLink", "ThinkLinkEntry", "read_thinklink"]

INPUT = "input"
THOUGHT = "thought"
# What `read_thinklink` loads at most: far above any run's log (a line per input and per plan; one input arrives
# in one 8 MiB frame), low enough that a file planted in the task's directory cannot exhaust the worker's memory.
MAX_LOG_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ThinkLinkEntry:
    kind: str  # INPUT (the user's words, or a delegated task) | THOUGHT (a reply's block)
    text: str = ""  # INPUT: the words
    plan: ThoughtPlan | None = None  # THOUGHT: the block as read
    at_step: int = 0
    problems: tuple[str, ...] = ()

    def key(self) -> tuple[Any, ...]:
        if self.plan is None:
            return (self.kind, self.text)
        return (self.kind, self.plan.goal, self.plan.step, self.plan.reason, tuple(self.plan.plan))

    def to_json(self) -> dict[str, Any]:
        if self.plan is None:
            return {"kind": self.kind, "at_step": self.at_step, "text": self.text}
        return {"kind": self.kind, "at_step": self.at_step, "goal": self.plan.goal, "step": self.plan.step,
                "reason": self.plan.reason, "plan": [list(item) for item in self.plan.plan],
                "problems": list(self.problems)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ThinkLinkEntry:
        kind = data["kind"]
        if kind == INPUT:
            return cls(INPUT, text=str(data["text"]), at_step=int(data.get("at_step", 0)))
        if kind != THOUGHT:
            raise ValueError(f"unknown entry kind {kind!r}")
        plan = ThoughtPlan(goal=str(data.get("goal", "")), step=str(data.get("step", "")),
                           reason=str(data.get("reason", "")),
                           plan=[(str(status), str(text)) for status, text in data.get("plan", [])])
        return cls(THOUGHT, plan=plan, at_step=int(data.get("at_step", 0)),
                   problems=tuple(str(p) for p in data.get("problems", [])))


@dataclass
class ThinkLink:
    """One run's thinklink. `path` None keeps it in memory only (a run without state, a test)."""

    path: Path | None = None
    on_problem: Callable[[str], None] | None = None
    entries: list[ThinkLinkEntry] = field(default_factory=list)
    parse_failures: int = 0
    _seen: set[tuple[Any, ...]] = field(default_factory=set, init=False, repr=False)
    _write_failed: bool = field(default=False, init=False, repr=False)
    _held: list[ThinkLinkEntry] | None = field(default=None, init=False, repr=False)  # `hold`: not written yet

    def seed(self, entries: Iterable[ThinkLinkEntry]) -> None:
        """Entries an earlier run of the same work recorded (a resumed turn): kept in memory, not written again."""
        for entry in entries:
            if entry.key() not in self._seen:
                self._seen.add(entry.key())
                self.entries.append(entry)

    def record_input(self, text: str, at_step: int = 0) -> None:
        if text.strip():
            self._add(ThinkLinkEntry(INPUT, text=text, at_step=at_step))

    def record_reply(self, text: str, at_step: int) -> ThoughtReading:
        """Read a reply's block, keep it, count a failure; the caller shows the reading."""
        reading = read_thought(text)
        if reading.failed:
            self.parse_failures += 1
        if reading.plan is not None:
            self._add(ThinkLinkEntry(THOUGHT, plan=reading.plan, at_step=at_step, problems=reading.problems))
        return reading

    def absorb(self, messages: Iterable[Any]) -> int:
        """The user inputs and thought blocks of `messages` not recorded yet (what a compaction is about to
        fold away: earlier turns, an earlier run's history); returns how many were added."""
        before = len(self.entries)
        for message in messages:
            role, content = getattr(message, "role", ""), getattr(message, "content", "") or ""
            if role == "user":  # the user's words, without the project instructions a first turn carries
                self.record_input(content.split(f"\n\n{INSTRUCTIONS_HEADING}", 1)[0])
            elif role == "assistant":
                reading = read_thought(content)
                if reading.plan is not None:
                    self._add(ThinkLinkEntry(THOUGHT, plan=reading.plan, problems=reading.problems))
        return len(self.entries) - before

    def plans(self) -> list[ThinkLinkEntry]:
        return [e for e in self.entries if e.kind == THOUGHT]

    def inputs(self) -> list[str]:
        return [e.text for e in self.entries if e.kind == INPUT]

    def latest_plan(self) -> ThoughtPlan | None:
        for entry in reversed(self.entries):
            if entry.plan is not None and (entry.plan.goal or entry.plan.plan):
                return entry.plan
        return None

    def _add(self, entry: ThinkLinkEntry) -> None:
        key = entry.key()
        if key in self._seen:
            return
        self._seen.add(key)
        self.entries.append(entry)
        self._append(entry)

    def hold(self) -> None:
        """Keep the entries added from now on in memory only until `release` writes them: a run's task is recorded
        on its way to its first model request, and its line is written once that request is out."""
        if self._held is None:
            self._held = []

    def release(self) -> None:
        """Write what `hold` kept back, in one append (nothing when nothing is held)."""
        held, self._held = self._held, None
        if held:
            self._write("".join(map(_line, held)))

    def _append(self, entry: ThinkLinkEntry) -> None:
        if self._held is not None:
            self._held.append(entry)
            return
        self._write(_line(entry))

    def _write(self, line: str) -> None:
        if self.path is None or self._write_failed:
            return
        try:
            state_dir(self.path.parent)  # a run may write its task's directory: `thinklink` may be a link elsewhere
            fd = open_state_file(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
            try:
                os.write(fd, line.encode("utf-8", errors="replace"))
            finally:
                os.close(fd)
        except OSError as exc:
            self._write_failed = True  # reported once; the entries stay in memory for this run
            if self.on_problem is not None:
                self.on_problem(f"the thinklink log {self.path} cannot be written ({exc.strerror or exc}); "
                                "it is kept in memory for this run only")


def _line(entry: ThinkLinkEntry) -> str:
    return json.dumps(entry.to_json(), ensure_ascii=False) + "\n"


def read_thinklink(path: Path) -> tuple[list[ThinkLinkEntry], list[str]]:
    """A run's log as it was written, with what was left out: a torn last line (a crash mid-write) and any
    damaged line are skipped and named, never repaired. A missing file has no entries."""
    if path.parent.exists() and not is_own_dir(path.parent):  # a link in place of `thinklink/`: not read through
        return [], [f"{path.parent}: not a directory of yagent's (a link?); the run goes on without this thinklink"]
    try:
        text = read_state_bytes(path, MAX_LOG_BYTES).decode("utf-8", errors="replace")
    except FileNotFoundError:
        return [], []
    except OSError as exc:  # a planted link, pipe or huge file (`StateFileError`), or no permission: no thinklink
        return [], [f"{path}: not read ({exc.strerror or exc}); the run goes on without this thinklink"]
    lines = text.split("\n")
    entries: list[ThinkLinkEntry] = []
    problems: list[str] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            if not isinstance(data, dict):
                raise ValueError("not an object")
            entries.append(ThinkLinkEntry.from_json(data))
        except (ValueError, KeyError, TypeError) as exc:
            torn = number == len(lines) and not text.endswith("\n")
            what = "torn last line (the run stopped mid-write)" if torn else f"damaged line ({exc})"
            problems.append(f"{path}:{number}: {what}; skipped")
    return entries, problems
