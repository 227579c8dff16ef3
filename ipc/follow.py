"""Follow a task's events in seq order with no gaps and no duplicates.

PUB drops silently at its high-water mark and a SUB misses whatever was published before its
subscription took effect, so live events alone are not enough: the follower subscribes first, then
replays from where it stands, and whenever it sees seq jump (or hears nothing for a while) it asks
the control socket for the missing range.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import zmq
import zmq.asyncio

from .client import DaemonClient
from .errors import MalformedMessage, ProtocolError
from .messages import Event, PublishedEvents, Replay, ReplayReply
from .records import decode
from .runtime_dir import RuntimePaths
from .sockets import connect_subscriber

__all__ = ["EventStream"]


class EventStream:
    """Async iterator over one task's events, starting after `after_seq`.

    `gap_fills` counts replays triggered by a seq jump, `tail_fills` replays on a quiet stream that found
    events the subscriber had missed (PUB dropped the tail of a stream); `dropped` counts events the daemon could
    no longer provide (older than anything it kept).
    """

    def __init__(self, client: DaemonClient, task: str, *, after_seq: int = 0, idle_poll: float = 1.0,
                 rcvhwm: int | None = None) -> None:
        self.client = client
        self.task = task
        self.delivered = after_seq
        self.idle_poll = idle_poll
        self.gap_fills = 0
        self.tail_fills = 0
        self.dropped = 0
        self._sub: zmq.asyncio.Socket | None = None
        self._sub_token = ""
        self._rcvhwm = rcvhwm

    async def __aenter__(self) -> EventStream:
        assert self.client.paths is not None, "connect the client first"
        self._subscribe()
        return self

    def _subscribe(self) -> None:
        """(Re)connect the subscriber with the token the client authenticated with: events.sock takes no other."""
        assert self.client.paths is not None
        if self._sub is not None:
            self._sub.close(linger=0)
        self._sub_token = self.client.token
        self._sub = connect_subscriber(self.client._ctx, RuntimePaths.endpoint(self.client.paths.events),
                                       [self.task.encode()], rcvhwm=self._rcvhwm, token=self._sub_token)

    async def __aexit__(self, *exc: object) -> None:
        if self._sub is not None:
            self._sub.close(linger=0)
            self._sub = None

    async def _replay_until(self, upto: int | None) -> list[Event]:
        """Fetch events after `self.delivered` up to seq `upto` (None = everything the daemon has)."""
        out: list[Event] = []
        after = self.delivered
        while True:
            reply = await self.client.request(Replay(id=0, task=self.task, after_seq=after), ReplayReply)
            self.dropped += reply.dropped
            for item in reply.events:
                ev = Event.from_published(self.task, item)
                if ev.seq <= after:
                    continue
                if upto is not None and ev.seq > upto:
                    return out
                out.append(ev)
                after = ev.seq
            if reply.dropped and reply.first_available > after:
                after = reply.first_available - 1
            if not reply.more or not reply.events:
                return out

    async def backlog(self) -> list[Event]:
        """Everything the daemon has after where the stream stands, without waiting for more."""
        return self._accept(await self._replay_until(None))

    def _accept(self, events: list[Event]) -> list[Event]:
        return list(self._handed_out(events))

    def _handed_out(self, events: list[Event]) -> Iterator[Event]:
        """The events of `events` not delivered yet, each counted as delivered only once it is handed out: an
        iterator of `events()` left after one event of a batch leaves the rest of it to the next iterator."""
        for ev in events:
            if ev.seq > self.delivered:
                self.delivered = ev.seq
                yield ev

    async def events(self) -> AsyncIterator[Event]:
        assert self._sub is not None, "use `async with EventStream(...)`"
        for ev in self._handed_out(await self._replay_until(None)):
            yield ev
        while True:
            try:
                async with asyncio.timeout(self.idle_poll):
                    _topic, payload = await self._sub.recv_multipart()
            except TimeoutError:
                # Quiet: either nothing happened or the tail was dropped; a replay tells which.
                fresh = [ev for ev in await self._replay_until(None) if ev.seq > self.delivered]
                self.tail_fills += bool(fresh)
                if self.client.token != self._sub_token:  # yagentd restarted: its events.sock wants the new token
                    self._subscribe()
                for ev in self._handed_out(fresh):
                    yield ev
                continue
            try:
                msg = decode(payload)
            except ProtocolError:  # malformed or over the cap
                continue
            if not isinstance(msg, PublishedEvents) or msg.task != self.task:
                continue
            try:
                live = Event.from_batch(msg)
            except MalformedMessage:  # the daemon publishes no such batch; a gap fill recovers whatever it was
                continue
            if live and live[0].seq > self.delivered + 1:
                self.gap_fills += 1
                for ev in self._handed_out(await self._replay_until(live[0].seq - 1)):
                    yield ev
                if live[0].seq > self.delivered + 1:
                    # The daemon no longer has the missing range; skip ahead and say so.
                    self.dropped += live[0].seq - self.delivered - 1
                    self.delivered = live[0].seq - 1
            for ev in self._handed_out(live):
                yield ev
