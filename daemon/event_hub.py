"""Event hub: stamps a per-task monotonic seq, keeps a bounded ring, logs and publishes every event.

Every published frame is `[topic = task id, PublishedEvents]`: one run's events with the first one's seq. A worker's
batch whose every event is well formed goes out as the bytes it came in (`records.encode_with`), only the header
new; one with a malformed event loses that event and is encoded anew. PUB drops silently at its high-water
mark, so clients detect gaps by seq and ask for the range (`replay`). The ring answers recent ranges
from memory; the task's log on disk (`event_log.TaskLog`) answers older ones and survives restarts.
`dropped` counts requested events that neither could provide.

Rings are bounded in events and in bytes, per task and over all tasks: past a budget the oldest events
leave, taken from idle tasks first (least recently used first), then from the largest ring. An event
costs its share of its encoded frame plus `EVENT_OVERHEAD` for the Python objects that hold it.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import zmq

from yagent.ipc.config import DEFAULT_RING_BYTES, DEFAULT_RING_TOTAL_BYTES
from yagent.ipc.errors import MessageTooLarge
from yagent.ipc.messages import PublishedEvents, is_event_item
from yagent.ipc.records import MAX_FRAME_BYTES, cut_to_frame, encode, encode_with

from .event_log import DEFAULT_LOG_MAX_BYTES, EventLogDir, TaskLog

__all__ = ["DEFAULT_LOG_MAX_BYTES", "DEFAULT_RING_BYTES", "DEFAULT_RING_TOTAL_BYTES", "EVENT_OVERHEAD",
           "MAX_IDLE_TASKS", "REPLAY_BYTE_BUDGET", "EventHub", "ReplayPage"]

MAX_IDLE_TASKS = 64
# What an event costs in memory beyond its encoded bytes: the list, dict, str and number objects holding it.
EVENT_OVERHEAD = 256
# A replay page must fit one control frame with room for its envelope.
REPLAY_BYTE_BUDGET = MAX_FRAME_BYTES // 2
# An event whose own frame would pass the cap is published as a stub saying what was cut.
_OVERSIZE_KEEP = 4096

log = logging.getLogger(__name__)


class _TaskEvents:
    __slots__ = ("idle", "last_seq", "log", "ring", "starts", "total")

    def __init__(self, ring_size: int, task_log: TaskLog, last_seq: int) -> None:
        self.ring: deque[list[Any]] = deque(maxlen=ring_size)
        # Beside each event of the ring, the bytes counted before it: the ring's bytes are `total - starts[0]`,
        # also after `maxlen` pushed the oldest out (in C, without a Python step per event).
        self.starts: deque[int] = deque(maxlen=ring_size)
        self.total = 0  # bytes counted up to the newest event
        self.log = task_log
        self.last_seq = last_seq
        self.idle = True  # no turn publishing: may be forgotten (its seq is in the log and the registry)

    @property
    def ring_bytes(self) -> int:
        return self.total - self.starts[0] if self.starts else 0


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
                 log_max_bytes: int = DEFAULT_LOG_MAX_BYTES, ring_bytes: int = DEFAULT_RING_BYTES,
                 ring_total_bytes: int = DEFAULT_RING_TOTAL_BYTES,
                 on_traffic: Callable[[int], None] | None = None) -> None:
        self._pub = pub
        self._logs = EventLogDir(events_dir, log_max_bytes)
        # The registry's record of a task's last seq: a floor in case the log lost its tail in a crash,
        # so seq never goes backwards for a client that saw the lost events.
        self._seq_floor = seq_floor
        self._ring_size = ring_size
        self._ring_bytes = ring_bytes
        self._ring_total_bytes = ring_total_bytes
        self.ring_bytes = 0  # held by every ring together
        self._on_traffic = on_traffic  # told the bytes of every frame published (`heap_trim.HeapTrim.passed`)
        self._tasks: dict[str, _TaskEvents] = {}  # insertion order = least recently used first
        self.max_idle_tasks = MAX_IDLE_TASKS
        self._clock = clock
        self.published = 0

    # -- state --------------------------------------------------------------------------------------

    def _state(self, task: str) -> _TaskEvents:
        state = self._tasks.pop(task, None)
        if state is None:
            task_log = self._logs.open(task)
            last = task_log.last_seq
            if self._seq_floor is not None:
                last = max(last, self._seq_floor(task))
            state = _TaskEvents(self._ring_size, task_log, last)
            self._tasks[task] = state  # most recently used goes last
            self._forget_idle()  # replays and lookups of many old tasks must not pile up in memory
        else:
            self._tasks[task] = state
        return state

    def _forget_idle(self) -> None:
        idle = [t for t, s in self._tasks.items() if s.idle]
        for old in idle[: max(0, len(idle) - self.max_idle_tasks)]:
            self._discard(old)

    def _discard(self, task: str) -> None:
        state = self._tasks.pop(task, None)
        if state is not None:
            self.ring_bytes -= state.ring_bytes
            state.log.close()

    def last_seq(self, task: str) -> int:
        return self._state(task).last_seq

    def cached_last_seq(self, task: str) -> int | None:
        """The task's last seq if the hub holds it in memory; None rather than reading its log."""
        state = self._tasks.get(task)
        return state.last_seq if state is not None else None

    def ring_held(self, task: str) -> tuple[int, int]:
        """(events, bytes) the task's ring holds in memory, by the budgets' accounting; (0, 0) when not in memory."""
        state = self._tasks.get(task)
        return (len(state.ring), state.ring_bytes) if state is not None else (0, 0)

    def close_task(self, task: str) -> None:
        """Release the task's log handle (its turn ended); the ring stays for late clients.

        Only the most recently used idle tasks keep their ring in memory: an older one is forgotten, and
        a client that asks for it later is served from its log on disk.
        """
        state = self._tasks.get(task)
        if state is not None:
            state.idle = True
            state.log.close()
        self._forget_idle()

    def close(self) -> None:
        for task in list(self._tasks):
            self.close_task(task)

    def prune(self, older_than: float, busy: Callable[[str], bool], now: float | None = None) -> list[str]:
        """Delete the logs of tasks not written for `older_than` seconds and not `busy`; returns those tasks.

        A replay of a pruned task counts its events as dropped; seq continues from the registry's record
        if the task is used again.
        """
        def keep(task: str) -> bool:
            state = self._tasks.get(task)
            return busy(task) or (state is not None and not state.idle)

        pruned = self._logs.prune(older_than, keep, now)
        for task in pruned:
            self._discard(task)
        return pruned

    # -- publishing ---------------------------------------------------------------------------------

    def publish_batch(self, task: str, run: str, agent: str, raw: list[Any], encoded: bytes | None = None) -> int:
        """Publish a worker's batch of `[type, ts, data]` items; malformed items are skipped.

        `encoded`: the bytes the items arrived as (`records.decode_keeping`). When every item is well formed they
        are relayed as they are, not packed again; otherwise the well-formed ones are encoded anew."""
        state = self._state(task)
        first = state.last_seq + 1
        items = [item for item in raw if is_event_item(item)]
        if not items:
            return 0
        state.last_seq += len(items)
        frame = None
        if encoded is not None and len(items) == len(raw):
            with contextlib.suppress(MessageTooLarge):  # the header tipped it over the cap: split below
                frame = encode_with(PublishedEvents(task=task, run=run, agent=agent, seq=first, events=[]),
                                    "events", encoded)
        self._emit(task, state, run, agent, first, items, frame)
        return len(items)

    def publish(self, task: str, run: str, agent: str, type_: str, data: dict[str, Any]) -> int:
        """Publish one daemon-originated event; returns its seq."""
        state = self._state(task)
        state.last_seq += 1
        self._emit(task, state, run, agent, state.last_seq, [[type_, self._clock(), data]])
        return state.last_seq

    def _emit(self, task: str, state: _TaskEvents, run: str, agent: str, first: int, items: list[list[Any]],
              frame: bytes | None = None) -> None:
        if frame is None:
            try:
                frame = encode(PublishedEvents(task=task, run=run, agent=agent, seq=first, events=items))
            except MessageTooLarge:
                if len(items) > 1:  # split the batch until each part fits one frame
                    half = len(items) // 2
                    self._emit(task, state, run, agent, first, items[:half])
                    self._emit(task, state, run, agent, first + half, items[half:])
                    return
                type_, ts, data = items[0]
                items = [[type_, ts, cut_to_frame(data, _OVERSIZE_KEEP)]]
                frame = encode(PublishedEvents(task=task, run=run, agent=agent, seq=first, events=items))
        # Out to subscribers first: the ring and the log are written before this call returns, so before any
        # replay request can be read, and a watching client sees the event ~15 µs sooner.
        try:
            self._pub.send_multipart([task.encode(), frame], flags=zmq.NOBLOCK)
        except zmq.Again:
            pass  # PUB at its high-water mark; subscribers fill the gap by replay
        # The ring holds replay's shape, `[seq, run, agent, type, ts, data]`; the frame went as the batch came.
        events = [[seq, run, agent, item[0], item[1], item[2]] for seq, item in enumerate(items, first)]
        state.idle = False
        self._keep(state, events, len(frame) // len(events) + EVENT_OVERHEAD)
        state.log.append(first, frame)
        self.published += len(events)
        if self._on_traffic is not None:
            self._on_traffic(len(frame))

    # -- the rings' budgets --------------------------------------------------------------------------

    def _keep(self, state: _TaskEvents, events: list[list[Any]], cost: int) -> None:
        before = state.ring_bytes
        end = state.total + cost * len(events)
        state.starts.extend(range(state.total, end, cost))
        state.total = end
        state.ring.extend(events)
        while state.ring and end - state.starts[0] > self._ring_bytes:
            state.ring.popleft()
            state.starts.popleft()
        self.ring_bytes += state.ring_bytes - before
        if self.ring_bytes > self._ring_total_bytes:
            self._shed()

    def _evict_oldest(self, state: _TaskEvents) -> None:
        before = state.ring_bytes
        state.ring.popleft()
        state.starts.popleft()
        self.ring_bytes += state.ring_bytes - before

    def _shed(self) -> None:
        """Bring all rings together within their budget: idle tasks' first (least recently used first), then
        the largest ring's oldest events."""
        for state in self._tasks.values():
            if self.ring_bytes <= self._ring_total_bytes:
                return
            while state.idle and state.ring and self.ring_bytes > self._ring_total_bytes:
                self._evict_oldest(state)
        while self.ring_bytes > self._ring_total_bytes:
            rings = sorted((s for s in self._tasks.values() if s.ring), key=lambda s: s.ring_bytes, reverse=True)
            if not rings:
                return
            largest, floor = rings[0], rings[1].ring_bytes if len(rings) > 1 else 0
            while largest.ring and largest.ring_bytes >= floor and self.ring_bytes > self._ring_total_bytes:
                self._evict_oldest(largest)

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
        ring_start = ring[0][0] if ring else state.last_seq + 1
        page: list[list[Any]] = []
        first = 0
        log_first = state.log.first_seq
        for item in state.log.read(after_seq):
            if not first:  # the log's first seq (the read may have started past it)
                first = min(item[0], log_first) if log_first is not None else item[0]
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
