"""The client's event stream against a real daemon: an event is delivered once it is handed out, not before."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.daemon_harness import arun, collect_turn, script, submit
from yagent.ipc import EventStream

pytestmark = pytest.mark.e2e


def test_an_iterator_left_after_one_event_of_a_replay_leaves_the_rest_to_the_next(
        make_daemon, project: Path) -> None:
    daemon = make_daemon()

    async def go() -> tuple[list[int], list[int]]:
        async with daemon.client() as c:
            sub = await submit(c, project, script({"step": 3}, output="three steps"))
            everything = [ev.seq for ev in await collect_turn(c, sub.task)]
            # The turn is over: one replay page brings all of it to the first iterator, which hands out one event.
            async with EventStream(c, sub.task) as stream:
                first = await asyncio.wait_for(anext(stream.events()), 10.0)
                rest = [first.seq]
                while len(rest) < len(everything):  # each new iterator picks up where the last one's hand-out ended
                    rest.append((await asyncio.wait_for(anext(stream.events()), 10.0)).seq)
            return everything, rest

    everything, handed_out = arun(go())
    assert len(everything) >= 4  # a replay of several events, so a batch's tail is there to be lost
    assert handed_out == everything
