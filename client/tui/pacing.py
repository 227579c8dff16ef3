"""When the screen is redrawn: stream output at most once a frame, a key at once and ahead of queued stream output.

- `FramePacer`: changes that come from the event stream ask for a redraw; all those within one frame make one
  (the first after a quiet spell draws at once, the rest at the next frame boundary). prompt_toolkit's own
  `min_redraw_interval` would hold back a keypress's redraw behind the stream's as well.
- `InputFirst`: the event pump works through a flood in slices; between slices it lets the loop read the
  terminal, and once a key was pressed it waits until a redraw has shown it before it applies more.

Neither knows prompt_toolkit: the application wires them to its invalidate, key and render events.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["FRAME_INTERVAL", "PUMP_SLICE", "FramePacer", "InputFirst", "Timer"]

FRAME_INTERVAL = 1 / 60  # a typical screen's refresh: more redraws than this nobody sees
PUMP_SLICE = 0.004  # the longest the event pump applies events without letting a key in
# A pump never waits longer than this for a keypress's redraw (the application may be leaving meanwhile).
KEY_REDRAW_PATIENCE = 0.25


class Timer(Protocol):
    """What pacing needs of a clock and a scheduler; an asyncio loop is one, a test hands in its own."""

    def time(self) -> float: ...

    def call_at(self, when: float, callback: Callable[[], object]) -> Any: ...


class FramePacer:
    def __init__(self, redraw: Callable[[], None], interval: float = FRAME_INTERVAL, *,
                 timer: Timer | None = None) -> None:
        self._redraw = redraw
        self.interval = interval
        self._timer = timer
        self._scheduled: Any = None  # the handle of the frame already asked for
        self._last = -math.inf  # when the last frame was drawn (by this pacer or by anything else)
        self.requests = 0
        self.frames = 0

    def _clock(self) -> Timer:
        return self._timer if self._timer is not None else asyncio.get_running_loop()

    def request(self) -> None:
        """The stream changed what is shown: draw it now if the last frame is old enough, else at the next one."""
        self.requests += 1
        if self._scheduled is not None:
            return
        timer = self._clock()
        due = self._last + self.interval
        if due <= timer.time():
            self._frame()
        else:
            self._scheduled = timer.call_at(due, self._frame)

    def drawn(self) -> None:
        """Any redraw (a key's too) is a frame: stream output that follows waits for the next boundary."""
        self._last = max(self._last, self._clock().time())

    def close(self) -> None:
        if self._scheduled is not None:
            self._scheduled.cancel()
            self._scheduled = None

    def _frame(self) -> None:
        self._scheduled = None
        self._last = self._clock().time()
        self.frames += 1
        self._redraw()


class InputFirst:
    def __init__(self, patience: float = KEY_REDRAW_PATIENCE) -> None:
        self.patience = patience
        self._shown = asyncio.Event()
        self._shown.set()

    @property
    def key_waiting(self) -> bool:
        """A key was pressed and no redraw has shown it yet."""
        return not self._shown.is_set()

    def key_pressed(self) -> None:
        self._shown.clear()

    def drawn(self) -> None:
        self._shown.set()

    async def turn(self) -> None:
        """Between two slices of stream events: let pending keys in, and wait until the screen shows them."""
        # Two passes of the loop: in the first the terminal is polled and its reader queued behind us, in
        # the second that reader has run, so a key typed during the slice is known here.
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        if self.key_waiting:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.patience):
                    await self._shown.wait()
