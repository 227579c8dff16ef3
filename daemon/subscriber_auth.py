"""Who may subscribe to events.sock: only a client that shows the client token.

PUB/SUB has no per-message check, and a subscription to "" would show every task's content (prompts, file
contents, model output) to any process that can connect() to the socket, which Landlock does not mediate.
So events.sock speaks ZeroMQ's PLAIN mechanism and libzmq asks this handler (the ZAP protocol, RFC 27, on
`inproc://zeromq.zap.01` of the daemon's context) about every connection before it gets a single frame:
user `client_token.EVENTS_USER`, password the token. PLAIN sends the password in the clear, which is sound
here: the socket is a Unix socket in the 0700 runtime directory, and nobody without ptrace rights over the
client or the daemon can read what crosses it.

The handler must be bound before events.sock is: libzmq refuses every PLAIN peer while no handler listens.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Callable

import zmq
import zmq.asyncio

from yagent.ipc.client_token import EVENTS_USER

from .refused_peers import RefusedPeers

__all__ = ["ZAP_DOMAIN", "SubscriberAuth"]

log = logging.getLogger(__name__)

ZAP_DOMAIN = b"yagent-events"
_ZAP_ENDPOINT = "inproc://zeromq.zap.01"
_ZAP_VERSION = b"1.0"


class SubscriberAuth:
    """Answers libzmq's questions about events.sock subscribers; `run` is a loop for the daemon's task group."""

    def __init__(self, ctx: zmq.asyncio.Context, token: str, clock: Callable[[], float]) -> None:
        self._token = token.encode()
        self._sock = ctx.socket(zmq.REP)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.bind(_ZAP_ENDPOINT)
        self.refused = RefusedPeers("events.sock", clock)
        self.admitted = 0  # for tests and benches

    def close(self) -> None:
        self._sock.close(linger=0)

    async def run(self) -> None:
        while True:
            frames = await self._sock.recv_multipart()
            try:
                reply = self.answer(frames)
            except Exception:  # a request libzmq sent wrong must not end the loop events.sock needs
                log.exception("answering a ZAP request for events.sock failed")
                reply = [_ZAP_VERSION, frames[1] if len(frames) > 1 else b"", b"500", b"internal error", b"", b""]
            await self._sock.send_multipart(reply)

    def answer(self, frames: list[bytes]) -> list[bytes]:
        """The ZAP reply to one request: 200 for the client token on this domain, 400 for anything else."""
        if len(frames) < 6 or frames[0] != _ZAP_VERSION:
            return [_ZAP_VERSION, frames[1] if len(frames) > 1 else b"", b"400", b"not a ZAP 1.0 request", b"", b""]
        request_id, domain, mechanism, credentials = frames[1], frames[2], frames[5], frames[6:]
        ok = (domain == ZAP_DOMAIN and mechanism == b"PLAIN" and len(credentials) == 2
              and hmac.compare_digest(credentials[0], EVENTS_USER) and hmac.compare_digest(credentials[1], self._token))
        if ok:
            self.admitted += 1
            return [_ZAP_VERSION, request_id, b"200", b"OK", EVENTS_USER, b""]
        # A stale client retries with the same wrong password every reconnect: one line for it, not one a try.
        shown = credentials[1] if len(credentials) == 2 else b""
        self.refused.first(hashlib.sha256(shown).digest()[:8],
                           f"a {mechanism.decode(errors='replace') or 'NULL'} subscriber without the client token "
                           "(a client of a previous yagentd start resubscribes once it has said hello again)")
        return [_ZAP_VERSION, request_id, b"400", b"the client token is required", b"", b""]
