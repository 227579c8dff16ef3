"""Per-task event logs on disk: `$YAGENT_HOME/events/{task}.log`, a stream of the very frames published.

They answer replays older than the memory ring and survive daemon restarts, so a late client can replay
a task from its first event. A log that grows past its cap keeps only its newest half (a long-lived
daemon must not fill the disk); a sparse in-memory index of frame offsets lets a replay seek instead of
reading from the start. A torn final frame (a crash mid-write) is cut when the log is opened for
appending, or frames written after it would be unreadable.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import msgpack

from yagent.ipc.atomic_file import write_atomic

__all__ = ["DEFAULT_LOG_MAX_BYTES", "EventLogDir", "TaskLog"]

DEFAULT_LOG_MAX_BYTES = 64 * 1024 * 1024
# One index entry per this many bytes of log: a replay reads at most this much before its first event.
_INDEX_STRIDE = 64 * 1024

log = logging.getLogger(__name__)


class _LogScan:
    """What one pass over a log file found: the frame index, the last seq, and where a torn tail starts."""

    __slots__ = ("good_end", "index", "last_seq", "size")

    def __init__(self) -> None:
        self.good_end = 0  # where the last complete frame ends
        self.index: list[tuple[int, int]] = []
        self.last_seq = 0
        self.size = 0


def _scan(path: Path, stride: int) -> _LogScan:
    scan = _LogScan()
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        return scan
    except OSError as exc:  # unreadable (permissions, EIO): replays report its events as dropped
        log.error("cannot read event log %s: %s", path, exc)
        return scan
    with fh:
        unpacker = msgpack.Unpacker(fh, raw=False)
        try:
            for frame in unpacker:
                start = scan.good_end
                scan.good_end = unpacker.tell()
                if isinstance(frame, dict) and isinstance(frame.get("events"), list) and frame["events"]:
                    seqs = [item[0] for item in frame["events"]]
                    if not scan.index or start - scan.index[-1][1] >= stride:
                        scan.index.append((seqs[0], start))
                    scan.last_seq = max(scan.last_seq, *seqs)
        except Exception:  # a torn or garbled tail: everything from good_end on is cut off
            pass
        scan.size = fh.seek(0, 2)
    return scan


class TaskLog:
    """The log of one task: an append handle opened on demand, its size and its offset index."""

    __slots__ = ("_handle", "_max_bytes", "_stride", "failing", "index", "last_seq", "path", "size")

    def __init__(self, path: Path, max_bytes: int) -> None:
        self.path = path
        self._max_bytes = max_bytes
        # Fine enough that compaction can cut close to half the cap at an indexed frame start.
        self._stride = max(1, min(_INDEX_STRIDE, max_bytes // 16))
        self._handle: BinaryIO | None = None
        self.failing = False  # the last append failed (disk full?); logged once until one succeeds
        scan = _scan(path, self._stride)
        if scan.good_end < scan.size:
            log.warning("event log %s ends with %d bytes of a partial frame; cutting them off",
                        path, scan.size - scan.good_end)
            try:
                with path.open("r+b") as out:
                    out.truncate(scan.good_end)
            except OSError as exc:  # the next append fails and says so; reading must go on
                log.error("cannot cut the partial frame off event log %s: %s", path, exc)
        self.size = scan.good_end
        self.index = scan.index  # (first seq of a frame, byte offset of that frame), ascending
        self.last_seq = scan.last_seq  # the newest seq the file held when it was opened

    @property
    def first_seq(self) -> int | None:
        return self.index[0][0] if self.index else None

    def append(self, first_seq: int, frame: bytes) -> None:
        """Append one frame. A failed write (disk full, EIO) costs the log these events, never the caller:
        it is logged once per failing streak, and whatever part of the frame got out is cut."""
        try:
            if self._handle is None:
                self._handle = self.path.open("ab")
            self._handle.write(frame)
            self._handle.flush()
        except OSError as exc:
            self._write_failed(exc)
            return
        if not self.index or self.size - self.index[-1][1] >= self._stride:
            self.index.append((first_seq, self.size))
        self.size += len(frame)
        if self.failing:
            self.failing = False
            log.warning("event log %s is writable again; the events published while it was not are missing "
                        "from it (replays report them as dropped once they leave the memory ring)", self.path)
        if self.size > self._max_bytes:
            try:
                self._compact()
            except OSError as exc:
                self._write_failed(exc)

    def read(self, after_seq: int) -> Iterator[list[Any]]:
        """Events from the log, starting at the indexed frame at or before `after_seq + 1`."""
        if self._handle is not None:
            self._handle.flush()
        try:
            fh = self.path.open("rb")
        except FileNotFoundError:
            return
        except OSError as exc:
            log.error("cannot read event log %s: %s", self.path, exc)
            return
        at = bisect.bisect_right(self.index, (after_seq + 1, float("inf"))) - 1
        with fh:
            if at > 0:
                fh.seek(self.index[at][1])
            unpacker = msgpack.Unpacker(fh, raw=False)
            try:
                for frame in unpacker:
                    if isinstance(frame, dict) and isinstance(frame.get("events"), list):
                        yield from frame["events"]
            except Exception:  # a torn write still being recovered: everything before it is intact
                log.warning("event log %s ends with a partial frame; ignoring the tail", self.path)

    def close(self) -> None:
        if self._handle is not None:
            with contextlib.suppress(OSError):
                self._handle.close()  # closes the file even when its final flush fails again
            self._handle = None

    def _compact(self) -> None:
        """Keep the newest frames that fit about half the cap; older events become `dropped` for replays.

        The cut is made at an indexed frame start, so no scan is needed: this runs on the daemon's loop.
        """
        keep_from = next((off for _, off in self.index if self.size - off <= self._max_bytes // 2), None)
        if keep_from is None:  # the newest indexed frame alone is over half the cap: keep from it
            keep_from = self.index[-1][1] if self.index else 0
        if keep_from <= 0:
            return
        self.close()
        with self.path.open("rb") as src:
            src.seek(keep_from)
            write_atomic(self.path, iter(lambda: src.read(1 << 20), b""))
        kept = self.size - keep_from
        self.index = [(seq, off - keep_from) for seq, off in self.index if off >= keep_from]
        self.size = kept
        log.info("event log %s passed %d bytes; kept the newest %d bytes (from seq %d)", self.path,
                 self._max_bytes, kept, self.index[0][0])

    def _write_failed(self, exc: OSError) -> None:
        if not self.failing:  # once per failing streak: a full disk must not also flood the daemon log
            self.failing = True
            log.error("cannot write event log %s: %s; the task's events still reach attached clients, but late "
                      "replays will miss them — free disk space under %s", self.path, exc, self.path.parent)
        self.close()
        # Cut whatever part of the frame got out, so frames appended later stay readable.
        with contextlib.suppress(OSError):
            if self.path.is_file() and self.path.stat().st_size > self.size:
                os.truncate(self.path, self.size)


class EventLogDir:
    """The directory of task logs: where each lives, and deleting those past their retention."""

    def __init__(self, directory: Path, max_bytes: int = DEFAULT_LOG_MAX_BYTES) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        directory.mkdir(parents=True, exist_ok=True)

    def path_for(self, task: str) -> Path:
        return self.directory / f"{task}.log"

    def open(self, task: str) -> TaskLog:
        return TaskLog(self.path_for(task), self.max_bytes)

    def prune(self, older_than: float, keep: Callable[[str], bool], now: float | None = None) -> list[str]:
        """Delete the logs not written for `older_than` seconds whose task `keep` does not protect;
        returns those tasks. The registry keeps the tasks and their conversations."""
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
            pruned.append(task)
        return pruned
