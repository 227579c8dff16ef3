"""Replies on control.sock that never block the daemon, and a bounded cost for a client that does not read them.

A reply goes to libzmq without waiting (NOBLOCK; ROUTER_MANDATORY makes a full or vanished peer raise
instead of losing the reply silently), and libzmq keeps at most `CONTROL_HWM` messages per peer. A reply
it refuses waits in the peer's own small queue, retried on a backoff timer while anything waits there.
A peer with `max_in_flight` requests whose replies have not left gets a `too_fast` error for the next one
at once; a peer that stays at that limit for `stall` seconds, or whose queue does not move for `quiet`
seconds, is dropped: its queue is freed, one error tells it why, and its frames are ignored for
`drop_period` seconds. A peer with nothing pending costs nothing here.

It also remembers which peers have authenticated (a `hello` with the client token): ROUTER never says that a
peer has left, so at most `max_authenticated` are kept, the least recently active forgotten first (such a
peer is refused until it says hello again, which `DaemonClient` does by itself). Only identities nobody can
guess are marked, so no one can take a mark over by connecting with the identity of a client that has left.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import zmq

from yagent.ipc.messages import ErrorReply
from yagent.ipc.records import MAX_FRAME_BYTES, encode
from yagent.ipc.sockets import MIN_RANDOM_IDENTITY
from yagent.ipc.vocabulary import ErrorCode

from .schedule import Timer

__all__ = ["CONTROL_HWM", "ControlPeers", "PeerLimits", "PeerUsage"]

log = logging.getLogger(__name__)

# Messages libzmq keeps per control peer in each direction (the daemon's side of the pipe): a client reads
# its replies as they come, so only one that does not read ever fills this. Each may be a replay page of
# megabytes, so it is small.
CONTROL_HWM = 8
_FIRST_RETRY = 0.005  # seconds before the first retry of a queue libzmq refused; doubled up to _LAST_RETRY
_LAST_RETRY = 0.25

After = Callable[[float, Callable[[], None], str], Timer]


@dataclass(frozen=True, slots=True)
class PeerLimits:
    max_in_flight: int = 16  # requests of one peer whose replies have not left the daemon
    spare: int = 8  # queue slots beyond the in-flight replies, for the `too_fast` errors of refused requests
    max_queued_bytes: int = MAX_FRAME_BYTES  # per peer; a reply past it is replaced by a `too_fast` error
    max_total_bytes: int = 4 * MAX_FRAME_BYTES  # over all peers, the same way
    stall: float = 5.0  # seconds at the in-flight limit before the peer is dropped
    quiet: float = 60.0  # seconds a non-empty queue may go without a frame leaving before the peer is dropped
    drop_period: float = 60.0  # seconds a dropped peer's frames are ignored
    max_authenticated: int = 4096  # peers remembered as authenticated, the least recently active forgotten first


@dataclass(frozen=True, slots=True)
class PeerUsage:
    in_flight: int
    queued: int
    queued_bytes: int
    refused: int


class _Sent(enum.Enum):
    SENT = "sent"
    FULL = "full"  # libzmq keeps CONTROL_HWM messages for the peer already
    GONE = "gone"  # the peer disconnected (or the socket is closing)


class _Peer:
    __slots__ = ("backoff", "in_flight", "limit_since", "moved_at", "queue", "queued_bytes", "refused", "retry",
                 "spare_used")

    def __init__(self, now: float) -> None:
        self.in_flight = 0
        self.queue: deque[tuple[bytes, bool]] = deque()  # (frame, answers an admitted request)
        self.queued_bytes = 0
        self.spare_used = 0
        self.refused = 0
        self.limit_since: float | None = None  # since when it has been at the in-flight limit, unbroken
        self.moved_at = now  # when a frame last left the queue (or the queue started)
        self.retry: Timer | None = None
        self.backoff = _FIRST_RETRY


class _Dropped:
    __slots__ = ("told", "until")

    def __init__(self, until: float) -> None:
        self.until = until
        self.told = False


class ControlPeers:
    """The send side of control.sock, per peer identity; every call returns at once."""

    def __init__(self, sock: zmq.Socket, after: After, clock: Callable[[], float] = time.monotonic,
                 limits: PeerLimits | None = None) -> None:
        self._sock = sock
        self._after = after
        self._clock = clock
        self.limits = limits or PeerLimits()
        self._peers: dict[bytes, _Peer] = {}
        self._dropped: dict[bytes, _Dropped] = {}
        self._authenticated: OrderedDict[bytes, None] = OrderedDict()
        # The accounting, for `yagent`'s own tests and benches: what is held, and the most that ever was.
        self.queued_bytes = 0
        self.peak_queued = 0  # the longest queue of any one peer
        self.peak_queued_bytes = 0  # the most bytes queued for any one peer
        self.refused = 0
        self.drops = 0
        self._notice = self._drop_notice()

    # -- the arbiter's side -------------------------------------------------------------------------------

    def ignores(self, identity: bytes) -> bool:
        """True for a dropped peer, whose frame is then not even read (it is told why once)."""
        record = self._dropped.get(identity)
        if record is None:
            return False
        if self._clock() >= record.until:
            del self._dropped[identity]
            return False
        if not record.told:
            record.told = self._send(identity, self._notice) is not _Sent.FULL
        return True

    def admit(self, identity: bytes, request_id: int) -> bool:
        """May the peer's request be handled? If not, it was answered with a `too_fast` error (or dropped);
        if so, `reply` must follow once with its answer."""
        peer = self._peers.get(identity)
        if peer is not None and peer.queue:
            self._flush(identity, peer)  # it may have read some since: room first
            peer = self._peers.get(identity)  # forgotten if that left nothing pending
        if peer is None:
            peer = self._peers[identity] = _Peer(self._clock())
        if peer.in_flight < self.limits.max_in_flight:
            peer.in_flight += 1
            return True
        now = self._clock()
        if peer.limit_since is None:
            peer.limit_since = now
        peer.refused += 1
        self.refused += 1
        if now - peer.limit_since >= self.limits.stall:
            self._drop(identity, peer)
            return False
        if peer.queue and peer.spare_used >= self.limits.spare:
            return False  # told already, by the errors queued before this one (and no frame built for nothing)
        self._deliver(identity, peer, self._too_fast(request_id), answers=False)
        return False

    def reply(self, identity: bytes, request_id: int, frame: bytes) -> None:
        """The answer to an admitted request: sent now, queued, or (the queue over its bytes) a `too_fast` error."""
        peer = self._peers.get(identity)
        if peer is None:
            return  # dropped or gone while its request was handled
        limits = self.limits
        if peer.queue and (peer.queued_bytes + len(frame) > limits.max_queued_bytes
                           or self.queued_bytes + len(frame) > limits.max_total_bytes):
            frame = self._too_fast(request_id)
        self._deliver(identity, peer, frame, answers=True)

    def usage(self, identity: bytes) -> PeerUsage | None:
        """What the peer holds here now; None for a peer with nothing pending (or dropped)."""
        peer = self._peers.get(identity)
        if peer is None:
            return None
        return PeerUsage(peer.in_flight, len(peer.queue), peer.queued_bytes, peer.refused)

    def authenticate(self, identity: bytes) -> bool:
        """Mark the peer as authenticated; False (and no mark) for an identity short enough to be guessed."""
        if len(identity) < MIN_RANDOM_IDENTITY or identity[0] == 0:
            return False
        self._authenticated[identity] = None
        self._authenticated.move_to_end(identity)
        if len(self._authenticated) > self.limits.max_authenticated:
            self._authenticated.popitem(last=False)
        return True

    def authenticated(self, identity: bytes) -> bool:
        if identity not in self._authenticated:
            return False
        self._authenticated.move_to_end(identity)
        return True

    def is_dropped(self, identity: bytes) -> bool:
        record = self._dropped.get(identity)
        return record is not None and self._clock() < record.until

    # -- sending --------------------------------------------------------------------------------------------

    def _send(self, identity: bytes, frame: bytes) -> _Sent:
        try:
            sent: Any = self._sock.send_multipart([identity, frame], flags=zmq.NOBLOCK)
        except zmq.Again:  # a synchronous socket raises where the asyncio one fails its future
            return _Sent.FULL
        except zmq.ZMQError:
            return _Sent.GONE
        if not isinstance(sent, asyncio.Future):
            return _Sent.SENT
        if not sent.done():  # only if someone queued a blocking send on this socket: it goes out in order
            sent.add_done_callback(_retrieve)
            return _Sent.SENT
        exc = sent.exception()
        if exc is None:
            return _Sent.SENT
        return _Sent.FULL if isinstance(exc, zmq.Again) else _Sent.GONE

    def _deliver(self, identity: bytes, peer: _Peer, frame: bytes, *, answers: bool) -> None:
        if not peer.queue:
            result = self._send(identity, frame)
            if result is _Sent.GONE:
                self._forget(identity, peer)
                return
            if result is _Sent.SENT:
                if answers:
                    peer.in_flight -= 1
                self._settle(identity, peer)
                return
        if not answers:
            if peer.spare_used >= self.limits.spare:
                return  # it is told already, in the errors queued before this one
            peer.spare_used += 1
        if not peer.queue:
            peer.moved_at = self._clock()
        peer.queue.append((frame, answers))
        peer.queued_bytes += len(frame)
        self.queued_bytes += len(frame)
        self.peak_queued = max(self.peak_queued, len(peer.queue))
        self.peak_queued_bytes = max(self.peak_queued_bytes, peer.queued_bytes)
        if peer.retry is None:
            peer.retry = self._after(peer.backoff, lambda: self._retry(identity, peer), "control-peer-retry")

    def _flush(self, identity: bytes, peer: _Peer) -> None:
        """Hand libzmq what it takes of the queue, in order."""
        while peer.queue:
            frame, answers = peer.queue[0]
            result = self._send(identity, frame)
            if result is _Sent.FULL:
                break
            if result is _Sent.GONE:
                self._forget(identity, peer)
                return
            peer.queue.popleft()
            peer.queued_bytes -= len(frame)
            self.queued_bytes -= len(frame)
            if answers:
                peer.in_flight -= 1
            else:
                peer.spare_used -= 1
            peer.moved_at = self._clock()
            peer.backoff = _FIRST_RETRY
        self._settle(identity, peer)

    def _retry(self, identity: bytes, peer: _Peer) -> None:
        peer.retry = None
        if self._peers.get(identity) is not peer:
            return
        self._flush(identity, peer)
        if not peer.queue or self._peers.get(identity) is not peer:
            return
        now = self._clock()
        limits = self.limits
        if ((peer.limit_since is not None and now - peer.limit_since >= limits.stall)
                or now - peer.moved_at >= limits.quiet):
            self._drop(identity, peer)
            return
        peer.backoff = min(_LAST_RETRY, peer.backoff * 2)
        peer.retry = self._after(peer.backoff, lambda: self._retry(identity, peer), "control-peer-retry")

    def _settle(self, identity: bytes, peer: _Peer) -> None:
        if peer.queue:
            if peer.in_flight >= self.limits.max_in_flight and peer.limit_since is None:
                peer.limit_since = self._clock()
            return
        peer.limit_since = None  # caught up: a new streak at the limit starts its own clock
        if peer.in_flight <= 0:
            self._forget(identity, peer)

    # -- ending ---------------------------------------------------------------------------------------------

    def _forget(self, identity: bytes, peer: _Peer) -> None:
        if peer.retry is not None:
            peer.retry.cancel()
            peer.retry = None
        self.queued_bytes -= peer.queued_bytes
        peer.queue.clear()
        peer.queued_bytes = 0
        if self._peers.get(identity) is peer:
            del self._peers[identity]

    def _drop(self, identity: bytes, peer: _Peer) -> None:
        discarded, discarded_bytes = len(peer.queue), peer.queued_bytes
        self._forget(identity, peer)
        now = self._clock()
        for old in [key for key, record in self._dropped.items() if record.until <= now]:
            del self._dropped[old]
        record = self._dropped[identity] = _Dropped(now + self.limits.drop_period)
        self.drops += 1
        log.warning("control.sock: dropped client %s, which sent requests faster than it read the replies "
                    "(%d refused; %d replies, %d bytes, discarded); its frames are ignored for %gs",
                    identity.hex(), peer.refused, discarded, discarded_bytes, self.limits.drop_period)
        record.told = self._send(identity, self._notice) is not _Sent.FULL

    # -- the words ------------------------------------------------------------------------------------------

    def _too_fast(self, request_id: int) -> bytes:
        limits = self.limits
        return encode(ErrorReply(id=request_id, code=ErrorCode.TOO_FAST, message=(
            f"yagentd refused this request: this connection has not read the replies to its earlier ones (at "
            f"most {limits.max_in_flight} requests or {limits.max_queued_bytes // 2**20} MiB of replies wait for "
            f"one connection); read each reply before sending more — a connection that stays at this limit for "
            f"{limits.stall:g}s is dropped")))

    def _drop_notice(self) -> bytes:
        limits = self.limits
        return encode(ErrorReply(id=0, code=ErrorCode.TOO_FAST, message=(
            f"yagentd stopped answering this connection: it sent requests faster than it read the replies for "
            f"{limits.stall:g}s, and its unread replies were discarded; reconnect, and read each reply before "
            f"sending more (this connection is ignored for {limits.drop_period:g}s)")))


def _retrieve(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()  # retrieved, so asyncio does not report it as never retrieved
