"""Event hub: stamps a per-task monotonic seq, keeps a bounded ring, appends a log, publishes.

Every published frame is `[topic = task id, PublishedEvents]`. PUB drops silently at its high-water
mark, so clients detect gaps by seq and ask for the range (`replay`). The ring answers recent ranges
from memory; the per-task log file (`$YAGENT_HOME/events/{task}.log`, a stream of the very frames we
published) answers older ones and survives daemon restarts, so a late client can still replay a task
from its first event. `dropped` counts requested events that neither could provide.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import msgpack
import zmq

from yagent.ipc.errors import MessageTooLarge
from yagent.ipc.messages import PublishedEvents
from yagent.ipc.records import MAX_FRAME_BYTES, encode

__all__ = ["MAX_IDLE_TASKS", "REPLAY_BYTE_BUDGET", "EventHub", "ReplayPage"]

MAX_IDLE_TASKS = 64
# A replay page must fit one control frame with room for its envelope.
REPLAY_BYTE_BUDGET = MAX_FRAME_BYTES // 2
# An event whose own frame would pass the cap is published as a stub saying what was cut.
_OVERSIZE_KEEP = 4096

log = logging.getLogger(__name__)


class _TaskEvents:
    __slots__ = ("last_seq", "log", "ring")

    def __init__(self, ring_size: int, last_seq: int) -> None:
        self.ring: deque[list[Any]] = deque(maxlen=ring_size)
        self.last_seq = last_seq
        self.log: BinaryIO | None = None


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
                 clock: Callable[[], float] = time.time, seq_floor: Callable[[str], int] | None = None) -> None:
        self._pub = pub
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
            last = self._recover_log(task)
            if self._seq_floor is not None:
                last = max(last, self._seq_floor(task))
            state = _TaskEvents(self._ring_size, last)
        self._tasks[task] = state  # most recently used goes last
        return state

    def _recover_log(self, task: str) -> int:
        """Return the last seq on disk; a torn final frame (crash mid-write) is cut off.

        Without the cut, frames appended after the torn bytes would be unreadable forever.
        """
        path = self._log_path(task)
        try:
            fh = path.open("rb")
        except FileNotFoundError:
            return 0
        last = good_end = 0
        torn = False
        with fh:
            unpacker = msgpack.Unpacker(fh, raw=False)
            try:
                for frame in unpacker:
                    good_end = unpacker.tell()
                    if isinstance(frame, dict) and isinstance(frame.get("events"), list):
                        for item in frame["events"]:
                            last = max(last, item[0])
            except Exception:
                torn = True
            size = fh.seek(0, 2)
        if torn or good_end < size:
            log.warning("event log %s ends with %d bytes of a partial frame; cutting them off",
                        path, size - good_end)
            with path.open("r+b") as out:
                out.truncate(good_end)
        return last

    def _read_log(self, task: str) -> Iterator[list[Any]]:
        path = self._log_path(task)
        try:
            fh = path.open("rb")
        except FileNotFoundError:
            return
        with fh:
            unpacker = msgpack.Unpacker(fh, raw=False)
            try:
                for frame in unpacker:
                    if isinstance(frame, dict) and isinstance(frame.get("events"), list):
                        yield from frame["events"]
            except Exception:  # a torn write still being recovered: everything before it is intact
                log.warning("event log %s ends with a partial frame; ignoring the tail", path)

    def last_seq(self, task: str) -> int:
        return self._state(task).last_seq

    def close_task(self, task: str) -> None:
        """Release the task's log handle (its turn ended); the ring stays for late clients.

        Only the most recently used idle tasks keep their ring in memory: an older one is forgotten, and
        a client that asks for it later is served from its log on disk.
        """
        state = self._tasks.get(task)
        if state and state.log is not None:
            state.log.close()
            state.log = None
        idle = [t for t, s in self._tasks.items() if s.log is None]
        for old in idle[: max(0, len(idle) - self.max_idle_tasks)]:
            del self._tasks[old]

    def close(self) -> None:
        for task in list(self._tasks):
            self.close_task(task)

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
            events = [_oversize_stub(events[0])]
            frame = encode(PublishedEvents(task=task, events=events))
        state.ring.extend(events)
        if state.log is None:
            state.log = self._log_path(task).open("ab")
        state.log.write(frame)
        state.log.flush()
        try:
            self._pub.send_multipart([task.encode(), frame], flags=zmq.NOBLOCK)
        except zmq.Again:
            pass  # PUB at its high-water mark; subscribers fill the gap by replay
        self.published += len(events)

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
        for item in self._read_log(task):
            if not first:
                first = item[0]
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


def _oversize_stub(event: list[Any]) -> list[Any]:
    seq, run, agent, type_, ts, data = event
    size = len(msgpack.packb(data, use_bin_type=True))
    preview = {k: (v[:_OVERSIZE_KEEP] if isinstance(v, str) else v) for k, v in data.items()
               if isinstance(v, str | int | float | bool) or v is None}
    preview["truncated"] = f"event data was {size} bytes, over the {MAX_FRAME_BYTES}-byte frame cap; cut"
    return [seq, run, agent, type_, ts, preview]
