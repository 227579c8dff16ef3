"""The send side of control.sock on real ZeroMQ sockets: replies never wait, a peer that does not read holds a
bounded queue and is refused, then dropped; one that reads late gets every reply in order. The clock that
decides stalls and drops is the test's; retries run on the loop's real timers."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import zmq
import zmq.asyncio

from yagent.daemon.control_peers import CONTROL_HWM, ControlPeers, PeerLimits
from yagent.daemon.schedule import Scheduler
from yagent.ipc.messages import Ack, ErrorReply, StatusRequest
from yagent.ipc.records import decode, encode
from yagent.ipc.sockets import bind_router
from yagent.ipc.vocabulary import ErrorCode

LIMITS = PeerLimits()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Side:
    """The daemon's side: a ROUTER as the arbiter binds it, the peers, and the arbiter's handling of a frame."""

    router: zmq.asyncio.Socket
    peers: ControlPeers
    clock: Clock
    endpoint: str
    ctx: zmq.asyncio.Context
    reply_size: int = 100

    async def serve(self, frames: int) -> list[bytes]:
        """Handle `frames` requests as the arbiter does; returns the identities they came from."""
        seen = []
        for _ in range(frames):
            identity, payload = await self.router.recv_multipart()
            seen.append(identity)
            if self.peers.ignores(identity):
                continue
            request_id = decode(payload).id
            if self.peers.admit(identity, request_id):
                self.peers.reply(identity, request_id, encode(Ack(id=request_id, detail="h" * self.reply_size)))
        return seen

    def dealer(self, rcvhwm: int = 1000) -> zmq.asyncio.Socket:
        sock = self.ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.RCVHWM, rcvhwm)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(self.endpoint)
        return sock


@asynccontextmanager
async def _side(limits: PeerLimits = LIMITS) -> AsyncIterator[Side]:
    short = Path(tempfile.mkdtemp(prefix="yg-", dir="/tmp"))
    ctx = zmq.asyncio.Context()
    endpoint = f"ipc://{short}/control.sock"
    router = bind_router(ctx, endpoint, hwm=CONTROL_HWM)
    clock = Clock()
    try:
        yield Side(router, ControlPeers(router, Scheduler().after, clock, limits), clock, endpoint, ctx)
    finally:
        router.close(0)
        ctx.destroy(0)
        shutil.rmtree(short, ignore_errors=True)


async def _send(dealer: zmq.asyncio.Socket, first: int, count: int) -> None:
    for i in range(first, first + count):
        await dealer.send(encode(StatusRequest(id=i)))


async def _until(predicate: Callable[[], object], what: str, timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)
    assert predicate(), what


def test_a_peer_that_never_reads_is_refused_past_its_limit_then_dropped_told_once_and_later_heard_again() -> None:
    async def main() -> None:
        async with _side() as side:
            side.reply_size = 16 * 1024  # a few fill the kernel's socket buffer
            dealer = side.dealer(rcvhwm=1)
            await _send(dealer, 1, 400)
            identity = (await side.serve(400))[0]
            usage = side.peers.usage(identity)
            assert usage is not None and usage.refused > 0
            assert usage.in_flight <= LIMITS.max_in_flight
            assert side.peers.peak_queued <= LIMITS.max_in_flight + LIMITS.spare
            assert side.peers.drops == 0

            side.clock.now += LIMITS.stall  # at its limit for that long: the next frame drops it
            await _send(dealer, 401, 1)
            await side.serve(1)
            assert side.peers.is_dropped(identity) and side.peers.usage(identity) is None
            assert side.peers.queued_bytes == 0 and side.peers.drops == 1

            # It reads at last: what libzmq held, then one notice, however many frames it sends meanwhile.
            notices = 0
            next_id = 402
            async with asyncio.timeout(20):
                while not notices:
                    await _send(dealer, next_id, 1)
                    next_id += 1
                    await side.serve(1)
                    while await dealer.poll(0):
                        reply = decode(await dealer.recv())
                        if isinstance(reply, ErrorReply) and reply.id == 0:
                            assert reply.code == ErrorCode.TOO_FAST and "reconnect" in reply.message
                            notices += 1
            await _send(dealer, next_id, 5)
            await side.serve(5)
            side.clock.now += LIMITS.drop_period  # heard again
            await _send(dealer, 9999, 1)
            await side.serve(1)
            async with asyncio.timeout(10):
                while True:
                    reply = decode(await dealer.recv())
                    notices += isinstance(reply, ErrorReply) and reply.id == 0
                    if reply.id == 9999:
                        break
            assert isinstance(reply, Ack) and notices == 1
            assert not side.peers.is_dropped(identity)

    asyncio.run(main())


def test_a_peer_that_reads_late_gets_every_reply_once_and_in_order() -> None:
    async def main() -> None:
        async with _side() as side:
            side.reply_size = 1024 * 1024  # the kernel's buffer holds at most a few: the rest wait in the queue
            dealer = side.dealer(rcvhwm=1)
            total = CONTROL_HWM + LIMITS.max_in_flight
            await _send(dealer, 1, total)
            identity = (await side.serve(total))[0]
            assert side.peers.peak_queued > 0 and side.peers.refused == 0
            ids = []
            async with asyncio.timeout(20):
                while len(ids) < total:
                    ids.append(decode(await dealer.recv()).id)
            assert ids == list(range(1, total + 1))
            await _until(lambda: side.peers.usage(identity) is None, "the caught-up peer to cost nothing")
            assert side.peers.queued_bytes == 0 and side.peers.drops == 0

    asyncio.run(main())


def test_past_its_byte_budget_a_reply_becomes_a_too_fast_error_with_its_id() -> None:
    limits = PeerLimits(max_queued_bytes=2 * 1024 * 1024)

    async def main() -> None:
        async with _side(limits) as side:
            side.reply_size = 1024 * 1024
            dealer = side.dealer(rcvhwm=1)
            total = CONTROL_HWM + limits.max_in_flight
            await _send(dealer, 1, total)
            await side.serve(total)
            assert side.peers.peak_queued_bytes <= limits.max_queued_bytes + limits.max_in_flight * 1024
            replies = []
            async with asyncio.timeout(20):
                while len(replies) < total:
                    replies.append(decode(await dealer.recv()))
            assert [r.id for r in replies] == list(range(1, total + 1))
            cut = [r for r in replies if isinstance(r, ErrorReply)]
            assert cut and all(r.code == ErrorCode.TOO_FAST for r in cut)

    asyncio.run(main())


def test_a_peer_that_disconnects_with_replies_queued_is_forgotten() -> None:
    async def main() -> None:
        async with _side() as side:
            side.reply_size = 16 * 1024
            dealer = side.dealer(rcvhwm=1)
            await _send(dealer, 1, 200)
            identity = (await side.serve(200))[0]
            assert side.peers.usage(identity) is not None and side.peers.queued_bytes > 0
            dealer.close(0)
            # The arbiter always has a receive pending: that is what reads the disconnect off the peer's pipe.
            receiving = asyncio.ensure_future(side.router.recv_multipart())
            try:
                await _until(lambda: side.peers.usage(identity) is None, "the vanished peer's queue to be freed")
            finally:
                receiving.cancel()
            assert side.peers.queued_bytes == 0 and side.peers.drops == 0

    asyncio.run(main())
