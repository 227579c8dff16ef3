"""Refused peers are logged once each, within a budget, and remembered within a bound; authenticated control
peers are remembered within a bound too, and only identities nobody can guess are marked."""

from __future__ import annotations

import logging

import pytest
import zmq

from yagent.daemon.control_peers import ControlPeers, PeerLimits
from yagent.daemon.refused_peers import RefusedPeers
from yagent.ipc.sockets import random_identity


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "refused peer" in r.getMessage()]


def test_a_peer_is_logged_once_and_a_swarm_of_identities_costs_a_bounded_log_and_memory(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    refused = RefusedPeers("workers.sock", clock, capacity=100, log_budget=5, window=60.0)
    with caplog.at_level(logging.WARNING, logger="yagent.daemon.refused_peers"):
        assert refused.first(b"peer-a", "a forged hello")
        assert not refused.first(b"peer-a", "a forged hello")  # the same peer again: neither logged nor answered
        for i in range(1000):  # an impostor cycling through identities
            refused.first(f"swarm-{i}".encode(), "a frame before a hello")
        assert len(_lines(caplog)) == 5 and "more this minute are counted" in _lines(caplog)[-1]
        assert len(refused._seen) == 100  # the oldest forgotten first
        clock.now += 61.0
        refused.first(b"peer-b", "a forged hello")
    lines = _lines(caplog)
    assert len(lines) == 6 and "996 other peers refused before this one were not logged" in lines[-1]
    assert refused.refusals == 1003


def test_only_unguessable_identities_are_marked_authenticated_and_the_least_recent_is_forgotten_first() -> None:
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    try:
        peers = ControlPeers(sock, lambda delay, fn, name: None, Clock(), PeerLimits(max_authenticated=3))
        assert not peers.authenticate(b"short")  # a name another process could take once this one leaves
        assert not peers.authenticate(b"\x00" + random_identity()[1:])  # libzmq's own kind: a counter
        a, b, c, d = (random_identity() for _ in range(4))
        assert all(peers.authenticate(p) for p in (a, b, c))
        assert peers.authenticated(a)  # a is now the most recently active
        assert peers.authenticate(d)  # over the bound: b, the least recent, is forgotten
        assert [peers.authenticated(p) for p in (a, b, c, d)] == [True, False, True, True]
        assert not peers.authenticated(b"short")
    finally:
        sock.close(0)
        ctx.term()
