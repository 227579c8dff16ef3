"""Event hub: stamps a per-task monotonic seq, keeps a bounded ring, appends a log, publishes.

Every published frame is `[topic = task id, PublishedEvents]`. PUB drops silently at its high-water
mark, so clients detect gaps by seq and ask for the range (`replay`). The ring answers recent ranges
from memory; the per-task log file (`$YAGENT_HOME/events/{task}.log`, a stream of the very frames we
published) answers older ones and survives daemon restarts, so a late client can still replay a task
from its first event. A log that grows past its cap keeps only its newest half (a long-lived daemon must
not fill the disk); a sparse in-memory index of frame offsets lets a replay seek instead of reading the
log from its start. `dropped` counts requested events that neither could provide.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import msgpack
import zmq

from yagent.ipc.errors import MessageTooLarge
from yagent.ipc.messages import PublishedEvents
from yagent.ipc.records import MAX_FRAME_BYTES, cut_to_frame, encode

__all__ = ["DEFAULT_LOG_MAX_BYTES", "MAX_IDLE_TASKS", "REPLAY_BYTE_BUDGET", "EventHub", "ReplayPage"]

MAX_IDLE_TASKS = 64
DEFAULT_LOG_MAX_BYTES = 64 * 1024 * 1024
# One index entry per this many bytes of log: a replay reads at most this much before its first event.
_INDEX_STRIDE = 64 * 1024
# A replay page must fit one control frame with room for its envelope.
REPLAY_BYTE_BUDGET = MAX_FRAME_BYTES // 2
# An event whose own frame would pass the cap is published as a stub saying what was cut.
_OVERSIZE_KEEP = 4096

log = logging.getLogger(__name__)


class _TaskEvents:
    __slots__ = ("idle", "index", "last_seq", "log", "log_failing", "log_size", "ring")

    def __init__(self, ring_size: int, last_seq: int, log_size: int, index: list[tuple[int, int]]) -> None:
        self.ring: deque[list[Any]] = deque(maxlen=ring_size)
        self.last_seq = last_seq
        self.log: BinaryIO | None = None
        self.log_size = log_size
        self.log_failing = False  # the last append failed (disk full?); logged once until one succeeds
        self.idle = True  # no turn publishing: may be forgotten (its seq is in the log and the registry)
        self.index = index  # (first seq of a frame, byte offset of that frame), ascending


class _LogScan:
    """What one pass over a log file found: the frame index, the last seq, and where a torn tail starts."""

    __slots__ = ("good_end", "index", "last_seq", "size")

    def __init__(self) -> None:
        self.good_end = 0  # where the last complete frame ends
        self.index: list[tuple[int, int]] = []
        self.last_seq = 0
        self.size = 0


def _scan_log(path: Path, stride: int) -> _LogScan:
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


class ReplayPage:
    __slots__ = ("dropped", "events", "first_available", "last_seq", "more")

    def __init__(self, events: list[list[Any]], last_seq: int, first_available: int, dropped: int, more: bool):
        self.events = events
        self.last_seq = last_seq
        self.first_available = first_available
        self.dropped = dropped
        self.more = more


class EventHub:
    def __init__(self, pub: zmq.Socket, events_dir: Path, ring_size: int,
                 clock: Callable[[], float] = time.time, seq_floor: Callable[[str], int] | None = None,
                 log_max_bytes: int = DEFAULT_LOG_MAX_BYTES) -> None:
        self._pub = pub
        self._log_max_bytes = log_max_bytes
        # Fine enough that compaction can cut close to half the cap at an indexed frame start.
        self._index_stride = max(1, min(_INDEX_STRIDE, log_max_bytes // 16))
        # The registry's record of a task's last seq: a floor in case the log lost its tail in a crash,
        # so seq never goes backwards for a client that saw the lost events.
        self._seq_floor = seq_floor
        self._dir = events_dir
        self._dir.mkdir(parents=True, exist_ok=True)
        self._ring_size = ring_size
        self._tasks: dict[str, _TaskEvents] = {}  # insertion order = least recently used first
        self.max_idle_tasks = MAX_IDLE_TASKS
        self._clock = clock
        self.published = 0

    # -- state --------------------------------------------------------------------------------------

    def _log_path(self, task: str) -> Path:
        return self._dir / f"{task}.log"

    def _state(self, task: str) -> _TaskEvents:
        state = self._tasks.pop(task, None)
        if state is None:
            scan = self._recover_log(task)
            last = scan.last_seq
            if self._seq_floor is not None:
                last = max(last, self._seq_floor(task))
            state = _TaskEvents(self._ring_size, last, scan.good_end, scan.index)
            self._tasks[task] = state  # most recently used goes last
            self._forget_idle()  # replays and lookups of many old tasks must not pile up in memory
        else:
            self._tasks[task] = state
        return state

    def _forget_idle(self) -> None:
        idle = [t for t, s in self._tasks.items() if s.idle]
        for old in idle[: max(0, len(idle) - self.max_idle_tasks)]:
            del self._tasks[old]

    def _recover_log(self, task: str) -> _LogScan:
        """Scan the log; a torn final frame (crash mid-write) is cut off.

        Without the cut, frames appended after the torn bytes would be unreadable forever.
        """
        path = self._log_path(task)
        scan = _scan_log(path, self._index_stride)
        if scan.good_end < scan.size:
            log.warning("event log %s ends with %d bytes of a partial frame; cutting them off",
                        path, scan.size - scan.good_end)
            try:
                with path.open("r+b") as out:
                    out.truncate(scan.good_end)
            except OSError as exc:  # the next append fails and says so; reading must go on
                log.error("cannot cut the partial frame off event log %s: %s", path, exc)
        return scan

    def _read_log(self, task: str, state: _TaskEvents, after_seq: int) -> Iterator[list[Any]]:
        """Events from the log, starting at the indexed frame at or before `after_seq + 1`."""
        path = self._log_path(task)
        try:
            fh = path.open("rb")
        except FileNotFoundError:
            return
        except OSError as exc:
            log.error("cannot read event log %s: %s", path, exc)
            return
        at = bisect.bisect_right(state.index, (after_seq + 1, float("inf"))) - 1
        with fh:
            if at > 0:
                fh.seek(state.index[at][1])
            unpacker = msgpack.Unpacker(fh, raw=False)
            try:
                for frame in unpacker:
                    if isinstance(frame, dict) and isinstance(frame.get("events"), list):
                        yield from frame["events"]
            except Exception:  # a torn write still being recovered: everything before it is intact
                log.warning("event log %s ends with a partial frame; ignoring the tail", path)

    def _compact(self, task: str, state: _TaskEvents) -> None:
        """Keep the newest frames that fit about half the cap; older events become `dropped` for replays.

        The cut is made at an indexed frame start, so no scan is needed: this runs on the daemon's loop.
        """
        keep_from = next((off for _, off in state.index if state.log_size - off <= self._log_max_bytes // 2), None)
        if keep_from is None:  # the newest indexed frame alone is over half the cap: keep from it
            keep_from = state.index[-1][1] if state.index else 0
        if keep_from <= 0:
            return
        path = self._log_path(task)
        if state.log is not None:
            state.log.close()
            state.log = None
        tmp = path.with_suffix(".log.tmp")
        with path.open("rb") as src, tmp.open("wb") as dst:
            src.seek(keep_from)
            while chunk := src.read(1 << 20):
                dst.write(chunk)
            kept = dst.tell()
        os.replace(tmp, path)
        state.index = [(seq, off - keep_from) for seq, off in state.index if off >= keep_from]
        state.log_size = kept
        log.info("event log of task %s passed %d bytes; kept the newest %d bytes (from seq %d)", task,
                 self._log_max_bytes, kept, state.index[0][0])

    def last_seq(self, task: str) -> int:
        return self._state(task).last_seq

    def cached_last_seq(self, task: str) -> int | None:
        """The task's last seq if the hub holds it in memory; None rather than reading its log."""
        state = self._tasks.get(task)
        return state.last_seq if state is not None else None

    def close_task(self, task: str) -> None:
        """Release the task's log handle (its turn ended); the ring stays for late clients.

        Only the most recently used idle tasks keep their ring in memory: an older one is forgotten, and
        a client that asks for it later is served from its log on disk.
        """
        state = self._tasks.get(task)
        if state is not None:
            state.idle = True
            if state.log is not None:
                with contextlib.suppress(OSError):
                    state.log.close()
                state.log = None
        self._forget_idle()

    def close(self) -> None:
        for task in list(self._tasks):
            self.close_task(task)

    def prune(self, older_than: float, busy: Callable[[str], bool], now: float | None = None) -> list[str]:
        """Delete the logs of tasks not written for `older_than` seconds and not `busy`; their tasks.

        The registry keeps the tasks and their conversations; a replay of a pruned task counts its
        events as dropped. Seq continues from the registry's record if the task is used again.
        """
        cutoff = (time.time() if now is None else now) - older_than  # file times are wall-clock times
        pruned: list[str] = []
        try:
            paths = list(self._dir.glob("*.log"))
        except OSError as exc:
            log.warning("cannot list event logs in %s: %s", self._dir, exc)
            return pruned
        for path in paths:
            task = path.stem
            state = self._tasks.get(task)
            if busy(task) or (state is not None and not state.idle):
                continue
            try:
                if path.stat().st_mtime >= cutoff:
                    continue
                path.unlink()
            except OSError:
                continue  # gone already, or not ours to delete: the next pass looks again
            self._tasks.pop(task, None)
            pruned.append(task)
        return pruned

    # -- publishing ---------------------------------------------------------------------------------

    def publish_batch(self, task: str, run: str, agent: str, raw: list[Any]) -> int:
        """Publish a worker's batch of `[type, ts, data]` items; malformed items are skipped."""
        state = self._state(task)
        seq = state.last_seq
        out: list[list[Any]] = []
        for item in raw:
            if (type(item) is list and len(item) == 3 and type(item[0]) is str
                    and isinstance(item[1], int | float) and type(item[2]) is dict):
                seq += 1
                out.append([seq, run, agent, item[0], item[1], item[2]])
        if out:
            state.last_seq = seq
            self._emit(task, state, out)
        return len(out)

    def publish(self, task: str, run: str, agent: str, type_: str, data: dict[str, Any]) -> int:
        """Publish one daemon-originated event; returns its seq."""
        state = self._state(task)
        state.last_seq += 1
        self._emit(task, state, [[state.last_seq, run, agent, type_, self._clock(), data]])
        return state.last_seq

    def _emit(self, task: str, state: _TaskEvents, events: list[list[Any]]) -> None:
        try:
            frame = encode(PublishedEvents(task=task, events=events))
        except MessageTooLarge:
            if len(events) > 1:  # split the batch until each part fits one frame
                half = len(events) // 2
                self._emit(task, state, events[:half])
                self._emit(task, state, events[half:])
                return
            seq, run, agent, type_, ts, data = events[0]
            events = [[seq, run, agent, type_, ts, cut_to_frame(data, _OVERSIZE_KEEP)]]
            frame = encode(PublishedEvents(task=task, events=events))
        state.idle = False
        state.ring.extend(events)
        self._append_log(task, state, events[0][0], frame)
        try:
            self._pub.send_multipart([task.encode(), frame], flags=zmq.NOBLOCK)
        except zmq.Again:
            pass  # PUB at its high-water mark; subscribers fill the gap by replay
        self.published += len(events)

    def _append_log(self, task: str, state: _TaskEvents, first_seq: int, frame: bytes) -> None:
        """Append the frame to the task's log. A failed write (disk full, EIO) costs the log these events,
        never the live stream: the ring and the PUB socket still get them, and the next frame tries again."""
        try:
            if state.log is None:
                state.log = self._log_path(task).open("ab")
            state.log.write(frame)
            state.log.flush()
        except OSError as exc:
            self._log_write_failed(task, state, exc)
            return
        if not state.index or state.log_size - state.index[-1][1] >= self._index_stride:
            state.index.append((first_seq, state.log_size))
        state.log_size += len(frame)
        if state.log_failing:
            state.log_failing = False
            log.warning("event log %s is writable again; the events published while it was not are missing "
                        "from it (replays report them as dropped once they leave the memory ring)",
                        self._log_path(task))
        if state.log_size > self._log_max_bytes:
            try:
                self._compact(task, state)
            except OSError as exc:
                self._log_write_failed(task, state, exc)

    def _log_write_failed(self, task: str, state: _TaskEvents, exc: OSError) -> None:
        path = self._log_path(task)
        if not state.log_failing:  # once per failing streak: a full disk must not also flood the daemon log
            state.log_failing = True
            log.error("cannot write event log %s: %s; events of task %s still reach attached clients, but late "
                      "replays will miss them — free disk space under %s", path, exc, task, self._dir)
        if state.log is not None:
            with contextlib.suppress(OSError):
                state.log.close()  # closes the file even when its final flush fails again
            state.log = None
        # Cut whatever part of the frame got out, so frames appended later stay readable.
        with contextlib.suppress(OSError):
            if path.is_file() and path.stat().st_size > state.log_size:
                os.truncate(path, state.log_size)
        with contextlib.suppress(OSError):
            path.with_suffix(".log.tmp").unlink(missing_ok=True)

    # -- replay -------------------------------------------------------------------------------------

    def replay(self, task: str, after_seq: int, limit: int, byte_budget: int = REPLAY_BYTE_BUDGET) -> ReplayPage:
        """Events after `after_seq`, at most `limit` of them and about `byte_budget` bytes encoded."""
        limit = max(1, min(limit, 5000))
        state = self._state(task)
        ring = state.ring
        if ring and ring[0][0] <= after_seq + 1:
            start = after_seq + 1 - ring[0][0]
            page = [ring[i] for i in range(max(0, start), min(len(ring), max(0, start) + limit))]
            page = _within_budget(page, byte_budget)
            more = bool(page) and page[-1][0] < state.last_seq
            return ReplayPage(page, state.last_seq, 1, 0, more)
        if state.log is not None:
            state.log.flush()
        ring_start = ring[0][0] if ring else state.last_seq + 1
        page: list[list[Any]] = []
        first = 0
        for item in self._read_log(task, state, after_seq):
            if not first:  # the log's first seq (the read may have started past it)
                first = min(item[0], state.index[0][0]) if state.index else item[0]
            if item[0] >= ring_start or len(page) >= limit:
                break
            if item[0] > after_seq:
                page.append(item)
        if len(page) < limit and ring:
            next_seq = max(after_seq + 1, page[-1][0] + 1 if page else 0, ring_start)
            offset = next_seq - ring_start
            page.extend(ring[i] for i in range(offset, min(len(ring), offset + limit - len(page))))
        page = _within_budget(page, byte_budget)
        first = first or ring_start
        # Holes: seqs the caller asked for that neither the log nor the ring still has.
        end = page[-1][0] if page else state.last_seq
        dropped = max(0, end - after_seq - len(page))
        more = bool(page) and page[-1][0] < state.last_seq
        return ReplayPage(page, state.last_seq, first, dropped, more)


def _within_budget(page: list[list[Any]], budget: int) -> list[list[Any]]:
    """The longest prefix of `page` whose encoded size stays within `budget` (never empty if `page` is not)."""
    used = 0
    for i, item in enumerate(page):
        used += len(msgpack.packb(item, use_bin_type=True))
        if used > budget and i > 0:
            return page[:i]
    return page
