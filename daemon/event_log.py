"""Per-task event logs on disk: `$YAGENT_HOME/events/{task}.log`, one framed record per published frame.

They answer replays older than the memory ring and survive daemon restarts, so a late client can replay
a task from its first event. A log that grows past its cap keeps only its newest half (a long-lived
daemon must not fill the disk); a sparse in-memory index of record offsets lets a replay seek instead of
reading from the start. The record format, and reading past damage, live in `event_log_format`.

Damage is never repaired by a reader: opening a log to replay it modifies nothing. Damage in the middle
is skipped (its events count as dropped in replays) and logged once per file. Only the tail after the
last readable record (a crash mid-write) is cut, when the log is next opened for appending, and the cut
bytes are appended to `{task}.log.torn` first. A log written before records had a frame (bare msgpack
frames) is read as such; appending to it adds records after its last frame, so the old part is never
rewritten — it ages out through compaction, which keeps the newest half byte for byte.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import msgpack

from yagent.ipc.atomic_file import write_atomic

from .event_log_format import Item, ItemKind, Window, frame_record, legacy_end, legacy_needle, walk

__all__ = ["DEFAULT_LOG_MAX_BYTES", "TORN_SUFFIX", "EventLogDir", "TaskLog"]

DEFAULT_LOG_MAX_BYTES = 64 * 1024 * 1024
# One index entry per this many bytes of log: a replay reads at most this much before its first event.
_INDEX_STRIDE = 64 * 1024
TORN_SUFFIX = ".torn"  # `{task}.log.torn`: the tails cut off the log, kept for whoever wants to look

log = logging.getLogger(__name__)

Span = tuple[int, int]


class _LogScan:
    """What one pass over a log file found: the index, the last seq, the damage and the torn tail."""

    __slots__ = ("damage", "good_end", "index", "last_seq", "legacy_end", "tail")

    def __init__(self) -> None:
        self.good_end = 0  # where the last readable record (or bare frame) ends
        self.index: list[tuple[int, int]] = []
        self.last_seq = 0
        self.legacy_end = 0  # bare frames before this offset, records after it
        self.damage: list[Span] = []  # unreadable stretches with readable records after them
        self.tail: Span | None = None  # unreadable bytes after the last readable record


def _events(item: Item) -> list[list[Any]]:
    if item.kind is ItemKind.LEGACY:
        return item.value["events"]
    try:
        frame = msgpack.unpackb(item.value, raw=False, strict_map_key=False)
    except Exception:  # checksummed, so only a bug could write this: skip it like damage
        return []
    events = frame.get("events") if isinstance(frame, dict) else None
    if not isinstance(events, list):
        return []
    seq, run, agent = frame.get("seq"), frame.get("run"), frame.get("agent")
    if type(seq) is int and type(run) is str and type(agent) is str:  # one run's batch, seq stamped from the first
        return [[n, run, agent, *e] for n, e in enumerate(events, seq) if type(e) is list and len(e) == 3]
    # Written by a daemon before protocol 3: every event a full `[seq, run, agent, type, ts, data]`.
    return [e for e in events if type(e) is list and e and type(e[0]) is int]


def _open_regular(path: Path) -> BinaryIO | None:
    """The file opened for reading, or None when it is missing, unreadable or not a regular file."""
    try:
        # Non-blocking: opening a FIFO to read would wait for a writer (the flag does nothing to a file).
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:  # unreadable (permissions, EIO): replays report its events as dropped
        log.error("cannot read event log %s: %s", path, exc)
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO would block, /dev/zero never end
        os.close(fd)
        log.error("event log %s is not a regular file; ignoring it", path)
        return None
    return os.fdopen(fd, "rb")


def _scan(path: Path, stride: int, needle: bytes) -> _LogScan:
    scan = _LogScan()
    fh = _open_regular(path)
    if fh is None:
        return scan
    with fh:
        try:
            scan.legacy_end = legacy_end(fh)
            last_record: Item | None = None
            for item in walk(Window(fh, 0), 0, scan.legacy_end, needle):
                if item.kind is ItemKind.DAMAGE:
                    scan.damage.append((item.start, item.end))
                    continue
                if not scan.index or item.start - scan.index[-1][1] >= stride:
                    scan.index.append((item.first_seq, item.start))
                scan.good_end = item.end
                if item.kind is ItemKind.LEGACY:
                    scan.last_seq = max(scan.last_seq, *(e[0] for e in item.value["events"]))
                else:
                    last_record = item
            if last_record is not None:  # records follow any bare frames, and seqs only grow
                scan.last_seq = max(scan.last_seq, last_record.first_seq,
                                    *(e[0] for e in _events(last_record)))
        except OSError as exc:
            log.error("cannot read event log %s: %s", path, exc)
    if scan.damage and scan.damage[-1][0] >= scan.good_end:
        scan.tail = scan.damage.pop()
    return scan


def _open_append(path: Path) -> BinaryIO:
    # Non-blocking: a FIFO put in a log's place fails (ENXIO) rather than waiting for a reader.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NONBLOCK, 0o600)
    return os.fdopen(fd, "ab")


class TaskLog:
    """The log of one task: an append handle opened on demand, its size and its offset index."""

    __slots__ = ("_handle", "_max_bytes", "_needle", "_stride", "damage", "failing", "index", "last_seq",
                 "legacy_end", "path", "size", "tail")

    def __init__(self, path: Path, max_bytes: int) -> None:
        self.path = path
        self._max_bytes = max_bytes
        # Fine enough that compaction can cut close to half the cap at an indexed record start.
        self._stride = max(1, min(_INDEX_STRIDE, max_bytes // 16))
        self._needle = legacy_needle(path.stem)
        self._handle: BinaryIO | None = None
        self.failing = False  # the last append failed (disk full?); logged once until one succeeds
        self._load(_scan(path, self._stride, self._needle))

    def _load(self, scan: _LogScan) -> None:
        self.size = scan.good_end  # where the next record goes
        self.index = scan.index  # (first seq of a record, its byte offset), ascending
        self.last_seq = scan.last_seq  # the newest seq the file held when it was read
        self.legacy_end = scan.legacy_end
        self.damage = scan.damage
        self.tail = scan.tail

    @property
    def first_seq(self) -> int | None:
        return self.index[0][0] if self.index else None

    def append(self, first_seq: int, frame: bytes) -> None:
        """Append one frame as a record. A failed write (disk full, EIO) costs the log these events, never
        the caller: it is logged once per failing streak, and whatever part of the record got out is cut."""
        record = frame_record(first_seq, frame)
        try:
            if self._handle is None:
                self._open_for_append()
            assert self._handle is not None
            self._handle.write(record)
            self._handle.flush()
        except OSError as exc:
            self._write_failed(exc)
            return
        if not self.index or self.size - self.index[-1][1] >= self._stride:
            self.index.append((first_seq, self.size))
        self.size += len(record)
        if self.failing:
            self.failing = False
            log.warning("event log %s is writable again; the events published while it was not are missing "
                        "from it (replays report them as dropped once they leave the memory ring)", self.path)
        if self.size > self._max_bytes:
            try:
                self._compact()
            except OSError as exc:
                self._write_failed(exc)

    def _open_for_append(self) -> None:
        try:
            st: os.stat_result | None = os.stat(self.path)
        except FileNotFoundError:
            st = None
        on_disk = self.tail[1] if self.tail else self.size
        if st is None:
            if on_disk:  # deleted since it was read: start a new one
                self._load(_LogScan())
        elif stat.S_ISREG(st.st_mode) and st.st_size != on_disk:  # changed by someone else: read it again
            self._load(_scan(self.path, self._stride, self._needle))
        if self.tail is not None:
            self._cut_tail()
        self._handle = _open_append(self.path)

    def _cut_tail(self) -> None:
        """Move the bytes after the last readable record to `{log}.torn`, so new records follow readable ones.

        If they cannot be kept aside they stay where they are: readers skip them like any damage."""
        assert self.tail is not None
        start, end = self.tail
        self.tail = None
        torn = self.path.with_name(self.path.name + TORN_SUFFIX)
        try:
            with self.path.open("rb") as src, _open_append(torn) as out:
                src.seek(start)
                left = end - start
                while left > 0 and (chunk := src.read(min(1 << 20, left))):
                    out.write(chunk)
                    left -= len(chunk)
                out.flush()
                os.fsync(out.fileno())  # kept on disk before they leave the log
            os.truncate(self.path, start)
        except OSError as exc:
            log.error("cannot move the %d unreadable bytes at the end of event log %s to %s: %s; leaving them "
                      "in place (readers skip them)", end - start, self.path, torn, exc)
            self.size = end
            if self.legacy_end > start:
                self.legacy_end = end
            self.damage.append((start, end))
            return
        self.legacy_end = min(self.legacy_end, start)
        log.warning("event log %s ended with %d bytes after its last complete record (a crash mid-write?); "
                    "moved them to %s before appending", self.path, end - start, torn)

    def read(self, after_seq: int) -> Iterator[list[Any]]:
        """Events from the log, starting at the indexed record at or before `after_seq + 1`; unreadable
        stretches are skipped (the caller sees their seqs missing)."""
        if self._handle is not None:
            with contextlib.suppress(OSError):  # the failed write is reported by `append`
                self._handle.flush()
        fh = _open_regular(self.path)
        if fh is None:
            return
        at = bisect.bisect_right(self.index, (after_seq + 1, float("inf"))) - 1
        start = self.index[at][1] if at > 0 else 0
        with fh:
            try:
                for item in walk(Window(fh, start), start, self.legacy_end, self._needle):
                    if item.kind is not ItemKind.DAMAGE:
                        yield from _events(item)
            except OSError as exc:
                log.error("cannot read event log %s: %s", self.path, exc)

    def close(self) -> None:
        if self._handle is not None:
            with contextlib.suppress(OSError):
                self._handle.close()  # closes the file even when its final flush fails again
            self._handle = None

    def _compact(self) -> None:
        """Keep the newest records that fit about half the cap; older events become `dropped` for replays.

        The cut is made at an indexed record start, so no scan is needed: this runs on the daemon's loop.
        """
        keep_from = next((off for _, off in self.index if self.size - off <= self._max_bytes // 2), None)
        if keep_from is None:  # the newest indexed record alone is over half the cap: keep from it
            keep_from = self.index[-1][1] if self.index else 0
        if keep_from <= 0:
            return
        self.close()
        with self.path.open("rb") as src:
            src.seek(keep_from)
            write_atomic(self.path, iter(lambda: src.read(1 << 20), b""), mode=0o600)
        kept = self.size - keep_from
        self.index = [(seq, off - keep_from) for seq, off in self.index if off >= keep_from]
        self.legacy_end = max(0, self.legacy_end - keep_from)
        self.damage = [(s - keep_from, e - keep_from) for s, e in self.damage if s >= keep_from]
        self.size = kept
        log.info("event log %s passed %d bytes; kept the newest %d bytes (from seq %d)", self.path,
                 self._max_bytes, kept, self.index[0][0])

    def _write_failed(self, exc: OSError) -> None:
        if not self.failing:  # once per failing streak: a full disk must not also flood the daemon log
            self.failing = True
            log.error("cannot write event log %s: %s; the task's events still reach attached clients, but late "
                      "replays will miss them — free disk space under %s", self.path, exc, self.path.parent)
        self.close()
        # Cut whatever part of the record got out (our own bytes, known incomplete), so records appended
        # later follow readable ones.
        with contextlib.suppress(OSError):
            if self.path.is_file() and self.path.stat().st_size > self.size:
                os.truncate(self.path, self.size)


class EventLogDir:
    """The directory of task logs: where each lives, reporting damage, and deleting those past their
    retention."""

    def __init__(self, directory: Path, max_bytes: int = DEFAULT_LOG_MAX_BYTES) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self._reported: set[tuple[str, tuple[Span, ...], Span | None]] = set()
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)

    def path_for(self, task: str) -> Path:
        return self.directory / f"{task}.log"

    def open(self, task: str) -> TaskLog:
        task_log = TaskLog(self.path_for(task), self.max_bytes)
        self._report(task, task_log)
        return task_log

    def _report(self, task: str, task_log: TaskLog) -> None:
        """Say once per file (and again only if its damage changes) what could not be read."""
        key = (task, tuple(task_log.damage), task_log.tail)
        if key in self._reported or not (task_log.damage or task_log.tail):
            return
        self._reported.add(key)
        if task_log.damage:
            lost = sum(end - start for start, end in task_log.damage)
            log.warning("event log %s is damaged: %d bytes in %d places (the first at byte %d) cannot be read and "
                        "are skipped; replays report the events in them as dropped and read on after them. The "
                        "file is left as it is; if this recurs, check the disk (`dmesg`)", task_log.path, lost,
                        len(task_log.damage), task_log.damage[0][0])
        if task_log.tail:
            start, end = task_log.tail
            log.warning("event log %s ends with %d unreadable bytes after its last complete record (a crash "
                        "mid-write?); replays ignore them, and they are moved to %s%s before the next append",
                        task_log.path, end - start, task_log.path.name, TORN_SUFFIX)

    def prune(self, older_than: float, keep: Callable[[str], bool], now: float | None = None) -> list[str]:
        """Delete the logs not written for `older_than` seconds whose task `keep` does not protect (and the
        tails cut off them); returns those tasks. The registry keeps the tasks and their conversations."""
        cutoff = (time.time() if now is None else now) - older_than  # file times are wall-clock times
        pruned: list[str] = []
        try:
            paths = list(self.directory.glob("*.log"))
        except OSError as exc:
            log.warning("cannot list event logs in %s: %s", self.directory, exc)
            return pruned
        for path in paths:
            task = path.stem
            if keep(task):
                continue
            try:
                if path.stat().st_mtime >= cutoff:
                    continue
                path.unlink()
            except OSError:
                continue  # gone already, or not ours to delete: the next pass looks again
            with contextlib.suppress(OSError):
                path.with_name(path.name + TORN_SUFFIX).unlink(missing_ok=True)
            pruned.append(task)
        return pruned
