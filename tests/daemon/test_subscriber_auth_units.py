"""The ZAP handler for events.sock: 200 only for the client token on its domain, a reply to anything."""

from __future__ import annotations

import zmq
import zmq.asyncio
from hypothesis import given, settings
from hypothesis import strategies as st

from yagent.daemon.subscriber_auth import ZAP_DOMAIN, SubscriberAuth
from yagent.ipc.client_token import EVENTS_USER

TOKEN = "ab" * 32


def _request(*credentials: bytes, domain: bytes = ZAP_DOMAIN, mechanism: bytes = b"PLAIN") -> list[bytes]:
    return [b"1.0", b"req-1", domain, b"", b"", mechanism, *credentials]


def test_only_the_token_on_the_events_domain_is_admitted_and_garbage_always_gets_a_refusal() -> None:
    ctx = zmq.asyncio.Context()
    auth = SubscriberAuth(ctx, TOKEN, lambda: 0.0)
    try:
        assert auth.answer(_request(EVENTS_USER, TOKEN.encode()))[2] == b"200"
        refused = [
            _request(EVENTS_USER, TOKEN.encode()[:-1] + b"0"),
            _request(EVENTS_USER, b""),
            _request(b"someone", TOKEN.encode()),
            _request(EVENTS_USER, TOKEN.encode(), domain=b"other"),
            _request(mechanism=b"NULL"),
            _request(EVENTS_USER, TOKEN.encode(), mechanism=b"CURVE"),
        ]
        for request in refused:
            reply = auth.answer(request)
            assert reply[:3] == [b"1.0", b"req-1", b"400"] and len(reply) == 6

        @settings(max_examples=300, deadline=None)
        @given(st.lists(st.binary(max_size=40), max_size=10))
        def garbage(frames: list[bytes]) -> None:
            reply = auth.answer(frames)
            assert len(reply) == 6 and reply[2] == b"400"

        garbage()
        assert auth.admitted == 1
    finally:
        auth.close()
        ctx.term()
