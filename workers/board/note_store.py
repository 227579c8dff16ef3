"""A task's notes on disk: `notes/{agent}/{stem}.md`, one per delegation, written atomically.

A note is a front-matter of JSON between two `---` lines (schema 2: `handoff`, the system's `artifacts`,
the agent, the delegated task) and a body, the full deliverable. A write goes to `{stem}.md.tmp` (created
exclusively) and is linked to `{stem}.md` (which fails if that exists), so two writers — processes of the
same task — can never take the same stem; the `.md.tmp` suffix does not end in `.md`, so the index and
the count cap never see a write in progress. Readers never follow a symbolic link.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yagent.ipc.state_files import is_own_dir, state_dir

from .exclusive_file import place_exclusive
from .handoff_parse import Handoff, parse_handoff

__all__ = ["NOTE_SUFFIX", "SCHEMA", "TMP_SUFFIX", "Note", "NoteRef", "NoteStore", "agent_dir_name"]

SCHEMA = 2
NOTE_SUFFIX = ".md"
TMP_SUFFIX = ".md.tmp"
FRONT_MAX_BYTES = 64 * 1024  # a front-matter is a hand-off; past this the note is read as damaged
BODY_MAX_BYTES = 16 * 1024 * 1024  # what a reader loads of a body at most
_FENCE = "---"
_STEM = re.compile(r"^\d{8}-\d{6}-\d{6}-[0-9a-f]{8}$")  # UTC time to the microsecond, then 32 random bits
_AGENT = re.compile(r"[^a-z0-9_-]+")
_MAX_TRIES = 64


def agent_dir_name(agent: str) -> str:
    """The directory an agent's notes go to: its name reduced to [a-z0-9_-] (a custom agent's `custom:x`)."""
    return _AGENT.sub("_", agent.strip().lower()).strip("_") or "agent"


@dataclass(frozen=True, slots=True)
class NoteRef:
    agent: str  # the agent directory's name
    stem: str

    @property
    def handle(self) -> str:
        """How the model names the note (the index shows it, `read_note` takes it)."""
        return f"note:{self.agent}/{self.stem}"


@dataclass(frozen=True, slots=True)
class Note:
    ref: NoteRef
    handoff: Handoff
    body: str
    artifacts: tuple[str, ...] = ()  # ids the system stored, never ones the model reported
    task: str = ""  # the delegated task, as the parent wrote it
    damaged: str = ""  # why the file could not be read as written ("" = it could)


def _strict_json(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")
    return json.loads(text, parse_constant=refuse)


def _split(raw: bytes) -> tuple[Any, str, str]:
    """(front-matter value, body, why damaged) of a note's bytes; a damaged front-matter decodes to None."""
    text = raw.decode("utf-8", errors="replace")
    if not text.startswith(_FENCE + "\n"):
        return None, text, "no front-matter"
    end = text.find("\n" + _FENCE + "\n", len(_FENCE))
    if end < 0:
        end_at_eof = text.endswith("\n" + _FENCE)
        if not end_at_eof:
            return None, "", "the front-matter does not end (the file is cut)"
        end = len(text) - len(_FENCE) - 1
    try:
        front = _strict_json(text[len(_FENCE) + 1: end])
    except (ValueError, RecursionError) as exc:
        return None, text[end + len(_FENCE) + 2:], f"the front-matter is not JSON ({str(exc)[:80]})"
    return front, text[end + len(_FENCE) + 2:], ""


def _read_regular(directory: str, name: str, limit: int, identity: list[tuple[int, ...]] | None = None) -> bytes | None:
    """At most `limit` bytes of `directory/name` if it is a regular file and neither it nor `directory` is a
    link (opened beneath the directory's descriptor: a swap after the listing cannot redirect it). `identity`
    receives the file's (device, inode, size, mtime) as read from the open file."""
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return None
    finally:
        os.close(dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        if identity is not None:
            identity.append(_identity(st))
        chunks, size = [], 0
        while size < limit and (chunk := os.read(fd, min(limit - size, 1 << 20))):
            chunks.append(chunk)
            size += len(chunk)
            if limit == FRONT_MAX_BYTES and b"\n---\n" in chunk:
                break  # the front-matter ended: a head read needs no more
        return b"".join(chunks)
    finally:
        os.close(fd)


def _identity(st: os.stat_result) -> tuple[int, ...]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


class NoteStore:
    """The notes of one board (a task): `root` is `state_layout.notes_dir(home, task)`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._root_text = os.fspath(root)  # `heads` stats every listed note at every model call: no Path per note
        # Front-matters read before, by the identity of the file they were read from (`head`).
        self._heads: dict[NoteRef, tuple[tuple[int, ...], Note | None]] = {}

    # -- writing ----------------------------------------------------------------------------------------

    def write(self, agent: str, handoff: Handoff | None, body: str, *, task: str = "",
              artifacts: tuple[str, ...] = (), summary: str = "", status: str = "") -> NoteRef:
        """Write one note and return its ref. `handoff` None: the child left none (`summary` and `status`
        stand in; the note reads back as degraded=absent)."""
        name = agent_dir_name(agent)
        # Each level checked in turn: a run may write its task's directory, so either may be a link to elsewhere.
        directory = state_dir(state_dir(self.root) / name)
        front: dict[str, Any] = {"schema": SCHEMA, "agent": agent, "task": task,
                                 "handoff": handoff.to_json() if handoff is not None else None,
                                 "artifacts": list(artifacts)}
        if summary:
            front["summary"] = summary
        if status:
            front["status"] = status
        data = f"{_FENCE}\n{json.dumps(front, ensure_ascii=False)}\n{_FENCE}\n{body}".encode("utf-8", "replace")
        for _ in range(_MAX_TRIES):
            stem = _new_stem()
            placed: list[os.stat_result] = []
            if self._place(directory, stem, data, placed):
                ref = NoteRef(name, stem)
                if placed:  # its head as a read would make it, from the bytes written: the next index opens nothing
                    self._heads[ref] = (_identity(placed[0]), _note_of(ref, data[:FRONT_MAX_BYTES], head_only=True))
                return ref
        raise OSError(f"could not find a free note name in {directory} after {_MAX_TRIES} tries")

    def _place(self, directory: Path, stem: str, data: bytes, placed: list[os.stat_result] | None = None) -> bool:
        return place_exclusive(directory / (stem + TMP_SUFFIX), directory / (stem + NOTE_SUFFIX), data, placed)

    # -- reading ----------------------------------------------------------------------------------------

    def refs(self) -> list[NoteRef]:
        """Every note of the board, oldest first (by file name across agent directories). Links (the board's
        own directory among them), writes in progress and names that are not notes are left out."""
        found: list[NoteRef] = []
        if not is_own_dir(self.root):  # missing, or a link a run put there: nothing is listed through it
            return found
        try:
            agents = list(os.scandir(self.root))
        except OSError:
            return found
        for agent in agents:
            if not agent.is_dir(follow_symlinks=False):
                continue
            try:
                entries = list(os.scandir(agent.path))
            except OSError:
                continue
            for entry in entries:
                name = entry.name
                if not name.endswith(NOTE_SUFFIX) or not entry.is_file(follow_symlinks=False):
                    continue
                stem = name[: -len(NOTE_SUFFIX)]
                if _STEM.match(stem):
                    found.append(NoteRef(agent.name, stem))
        found.sort(key=lambda ref: (ref.stem, ref.agent))
        return found

    def path(self, ref: NoteRef) -> Path:
        return Path(self._path_text(ref))

    def _path_text(self, ref: NoteRef) -> str:
        return f"{self._root_text}/{ref.agent}/{ref.stem}{NOTE_SUFFIX}"

    def heads(self, refs: list[NoteRef]) -> list[Note | None]:
        """`read(ref, head_only=True)` of each of `refs`, a note read before taken from memory while its file is
        the same one (same inode, size and time: a note is placed whole and never rewritten), which costs a
        `stat` instead of two opens, a read and a parse. The index reads them at every model call."""
        kept: dict[NoteRef, tuple[tuple[int, ...], Note | None]] = {}
        notes = []
        for ref in refs:
            note: Note | None = None
            known = self._heads.get(ref)
            try:
                now = _identity(os.lstat(self._path_text(ref)))
            except (OSError, ValueError):
                now = None
            if known is not None and now is not None and known[0] == now:
                note = known[1]
                kept[ref] = known
            else:
                identity: list[tuple[int, ...]] = []
                note = self._read(ref, head_only=True, identity=identity)
                if identity:  # what was read, by the file it was read from: a swap since the stat is not cached wrong
                    kept[ref] = (identity[0], note)
            notes.append(note)
        self._heads = kept  # notes no longer listed (removed by the count cap) are forgotten
        return notes

    def read(self, ref: NoteRef, *, head_only: bool = False) -> Note | None:
        """The note, or None when there is no such regular file. `head_only` reads the front-matter only."""
        return self._read(ref, head_only=head_only)

    def _read(self, ref: NoteRef, *, head_only: bool, identity: list[tuple[int, ...]] | None = None) -> Note | None:
        if not _STEM.match(ref.stem) or agent_dir_name(ref.agent) != ref.agent:
            return None
        raw = _read_regular(os.path.join(self.root, ref.agent), ref.stem + NOTE_SUFFIX,
                            FRONT_MAX_BYTES if head_only else BODY_MAX_BYTES, identity)
        return None if raw is None else _note_of(ref, raw, head_only=head_only)


def _note_of(ref: NoteRef, raw: bytes, *, head_only: bool) -> Note:
    """The note `raw` (a file's first bytes, as many as a read takes) holds."""
    front, body, damaged = _split(raw)
    if head_only and damaged.startswith("the front-matter does not end") and len(raw) >= FRONT_MAX_BYTES:
        damaged = "the front-matter is larger than a hand-off can be"
    handoff = parse_handoff(front)
    meta = front if isinstance(front, dict) else {}
    artifacts = meta.get("artifacts")
    task = meta.get("task")
    return Note(ref, handoff, "" if head_only else body,
                tuple(a for a in artifacts if isinstance(a, str))[:16] if isinstance(artifacts, list) else (),
                task if isinstance(task, str) else "", damaged)


def _new_stem() -> str:
    # Microseconds keep one writer's notes in order (the count cap removes the oldest by name).
    now = datetime.datetime.now(datetime.UTC)
    return f"{now:%Y%m%d-%H%M%S-%f}-{secrets.token_hex(4)}"
