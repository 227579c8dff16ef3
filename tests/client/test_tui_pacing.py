"""Redraw pacing: stream output coalesced to frames, a key drawn before a queued flood is applied.

Nothing here depends on speed: frames come from a clock the test moves, and the flood is queued whole
before the key is typed, so only the order in which the client does things decides.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from tests.client.doubles import FakeBackend
from tests.client.tui_harness import running_tui, screen_rows, until
from tests.daemon_harness import arun
from yagent.client.tui.pacing import FramePacer, InputFirst
from yagent.ipc.vocabulary import EventType

FRAME = 0.25  # a binary fraction: the manual clock lands on frame boundaries exactly


class ManualTimer:
    """A clock that moves only when told, and the callbacks scheduled on it, run when their time comes."""

    def __init__(self) -> None:
        self.now = 100.0
        self.scheduled: list[tuple[float, Callable[[], object]]] = []

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Callable[[], object]) -> Any:
        entry = (when, callback)
        self.scheduled.append(entry)
        timer = self

        class Handle:
            def cancel(self) -> None:
                if entry in timer.scheduled:
                    timer.scheduled.remove(entry)

        return Handle()

    def advance(self, seconds: float) -> None:
        self.now += seconds
        due = [e for e in self.scheduled if e[0] <= self.now]
        self.scheduled = [e for e in self.scheduled if e[0] > self.now]
        for _when, callback in due:
            callback()


def _backend() -> FakeBackend:
    b = FakeBackend()
    b.add_task("t1", state="running", title="first task")
    b.emit("t1", EventType.TURN_STARTED, {"turn": 1, "text": "hello", "agent": "director"}, run="r1")
    return b


def test_many_requests_within_one_frame_make_at_most_two_redraws() -> None:
    timer = ManualTimer()
    redraws: list[float] = []
    pacer = FramePacer(lambda: redraws.append(timer.now), FRAME, timer=timer)
    for _ in range(1000):
        pacer.request()
    assert redraws == [100.0]  # the first after a quiet spell is drawn at once
    assert len(timer.scheduled) == 1  # the other 999 wait for one frame
    timer.advance(FRAME / 2)
    for _ in range(1000):
        pacer.request()
    assert redraws == [100.0] and len(timer.scheduled) == 1
    timer.advance(FRAME / 2)
    assert redraws == [100.0, 100.0 + FRAME]
    assert (pacer.requests, pacer.frames) == (2000, 2)


def test_a_frame_drawn_for_a_key_counts_and_close_cancels_the_next() -> None:
    timer = ManualTimer()
    redraws: list[float] = []
    pacer = FramePacer(lambda: redraws.append(timer.now), FRAME, timer=timer)
    pacer.drawn()  # a key was drawn just now
    pacer.request()
    assert redraws == [] and [when for when, _ in timer.scheduled] == [100.0 + FRAME]
    pacer.close()
    timer.advance(1.0)
    assert redraws == []


def test_the_pump_waits_after_a_key_until_the_screen_has_shown_it() -> None:
    async def go() -> None:
        gate = InputFirst(patience=3600)  # the test releases it, not the clock
        await gate.turn()  # no key pressed: a bare yield
        gate.key_pressed()
        turn = asyncio.create_task(gate.turn())
        for _ in range(20):
            await asyncio.sleep(0)
        assert not turn.done()
        gate.drawn()
        await asyncio.wait_for(turn, 10)

    arun(go())


def test_chunks_arriving_within_one_frame_are_coalesced_into_one_redraw() -> None:
    async def go() -> None:
        b = _backend()
        timer = ManualTimer()
        async with running_tui(b, frame_interval=FRAME, frame_timer=timer) as (tui, _pipe):
            timer.advance(1.0)  # whatever the attach drew is a frame ago
            pacer = tui.pacer
            frames, requests = pacer.frames, pacer.requests
            for i in range(500):
                b.emit("t1", EventType.AI_CHUNK, {"text": f"{i} "})
            await until(lambda: tui.c.view.last_seq == 501, "all chunks applied", timeout=20)
            assert pacer.requests - requests == 500
            assert pacer.frames - frames == 1  # the first drawn at once; the other 499 wait for the next frame
            assert len(timer.scheduled) == 1
            drawn = tui.application.render_counter
            timer.advance(FRAME)
            assert pacer.frames - frames == 2
            await until(lambda: tui.application.render_counter > drawn, "the frame to be drawn")
            assert any("499" in row for row in screen_rows(tui, 80, 24))

    arun(go())


def test_a_key_typed_during_a_flood_is_drawn_before_the_flood_is_applied() -> None:
    flood = 10_000

    async def go() -> None:
        b = _backend()
        async with running_tui(b) as (tui, pipe):
            shown_at: list[int] = []  # the events applied when a render first showed the typed text

            def after_render(_app: object) -> None:
                if not shown_at and tui.buffer.text == "hello":
                    shown_at.append(tui.c.view.last_seq)

            tui.application.after_render += after_render
            for i in range(flood):  # queued whole before the client runs again
                b.emit("t1", EventType.AI_CHUNK, {"text": f"{i} "})
            pipe.send_text("hello")
            await until(lambda: tui.c.view.last_seq == flood + 1, "the flood to be applied", timeout=60)
            await until(lambda: shown_at, "the typed text on screen")
            assert shown_at[0] < flood + 1, "the typed text waited until every queued chunk was applied"
            assert tui.buffer.text == "hello"

    arun(go(), timeout=90)
