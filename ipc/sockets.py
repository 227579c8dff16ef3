"""Socket construction with the options every yagent socket needs.

ROUTER sockets set ROUTER_MANDATORY: without it a reply to a peer that has gone is dropped silently,
and we would rather know. MAXMSGSIZE makes libzmq drop a peer that sends an oversized frame before
we allocate it. ROUTER_HANDOVER stays off: a connection claiming an identity that is already connected
is ignored instead of taking that peer's place (and its run, or its authenticated mark). DEALERs connect
with a random identity nobody can guess, so nobody can claim theirs after they leave either.

events.sock speaks ZeroMQ's PLAIN mechanism: the daemon's ZAP handler (`daemon/subscriber_auth.py`) admits
a subscriber only with the client token as its password, because PUB/SUB has no per-message check and a
subscription to "" would otherwise show every task's content to any process that can connect.
"""

from __future__ import annotations

import secrets

import zmq

from .client_token import EVENTS_USER
from .records import MAX_FRAME_BYTES

__all__ = ["MIN_RANDOM_IDENTITY", "bind_publisher", "bind_router", "connect_dealer", "connect_subscriber",
           "random_identity"]

# A frame carries up to a few dozen coalesced events, so these are generous in events.
_HWM = 100_000
# Identities shorter than this could be guessed (libzmq's own are 5 bytes, a counter from a random start).
MIN_RANDOM_IDENTITY = 16


def random_identity() -> bytes:
    """128 random bits; the first byte is never 0, which libzmq reserves for identities it makes itself."""
    return b"y" + secrets.token_bytes(MIN_RANDOM_IDENTITY)


def bind_router(ctx: zmq.Context, endpoint: str, hwm: int = _HWM) -> zmq.Socket:
    """`hwm` is per peer and direction; with ROUTER_MANDATORY a send to a peer at it raises `zmq.Again`."""
    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
    sock.setsockopt(zmq.ROUTER_HANDOVER, 0)  # a second connection with a live identity never takes it over
    sock.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME_BYTES + 1024)
    sock.setsockopt(zmq.SNDHWM, hwm)
    sock.setsockopt(zmq.RCVHWM, hwm)
    sock.setsockopt(zmq.LINGER, 0)
    sock.bind(endpoint)
    return sock


def bind_publisher(ctx: zmq.Context, endpoint: str, sndhwm: int = _HWM, *, zap_domain: bytes) -> zmq.Socket:
    """A PUB socket that takes only PLAIN subscribers, each checked by the ZAP handler bound in `ctx` for
    `zap_domain` (bind that handler first: without one, libzmq refuses every PLAIN peer)."""
    sock = ctx.socket(zmq.PUB)
    sock.setsockopt(zmq.SNDHWM, sndhwm)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.PLAIN_SERVER, 1)
    sock.setsockopt(zmq.ZAP_DOMAIN, zap_domain)
    sock.bind(endpoint)
    return sock


def connect_dealer(ctx: zmq.Context, endpoint: str, identity: bytes | None = None, linger_ms: int = 0) -> zmq.Socket:
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.IDENTITY, identity if identity is not None else random_identity())
    sock.setsockopt(zmq.SNDHWM, _HWM)
    sock.setsockopt(zmq.RCVHWM, _HWM)
    sock.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME_BYTES + 1024)
    sock.setsockopt(zmq.LINGER, linger_ms)
    sock.connect(endpoint)
    return sock


def connect_subscriber(ctx: zmq.Context, endpoint: str, topics: list[bytes], rcvhwm: int | None = None, *,
                       token: str) -> zmq.Socket:
    """`token` is the client token (`client_token.read_client_token`): events.sock admits no one without it."""
    sock = ctx.socket(zmq.SUB)
    sock.setsockopt(zmq.RCVHWM, _HWM if rcvhwm is None else rcvhwm)
    sock.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME_BYTES + 1024)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.PLAIN_USERNAME, EVENTS_USER)
    sock.setsockopt(zmq.PLAIN_PASSWORD, token.encode())
    for topic in topics:
        sock.setsockopt(zmq.SUBSCRIBE, topic)
    sock.connect(endpoint)
    return sock
