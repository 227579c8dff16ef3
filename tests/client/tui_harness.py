"""Drive the real TUI application with prompt_toolkit's own test seams (pipe input, a sized output)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from prompt_toolkit.application.current import set_app
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.input.base import PipeInput
from prompt_toolkit.layout.mouse_handlers import MouseHandlers
from prompt_toolkit.layout.screen import Screen, WritePosition
from prompt_toolkit.utils import get_cwidth

from tests.client.doubles import FakeBackend, SizedOutput
from yagent.client.tui.app import TuiApp
from yagent.client.tui.controller import TuiController, TuiOptions
from yagent.client.tui.pacing import Timer


async def until(predicate: Callable[[], Any], what: str, timeout: float = 5.0) -> Any:
    """Wait for a condition with a deadline, yielding to the event loop in between."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.005)


async def until_async(predicate: Callable[[], Any], what: str, timeout: float = 10.0) -> Any:
    """`until` for a predicate that is a coroutine function (a request to the daemon)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)


def screen_rows(tui: TuiApp, columns: int, rows: int) -> list[str]:
    """The screen prompt_toolkit would draw at this size, one string per row (wide chars counted once)."""
    app = tui.application
    output = app.output
    assert isinstance(output, SizedOutput)
    output.size = type(output.size)(rows=rows, columns=columns)
    screen = Screen()
    with set_app(app):
        tui._before_render(app)
        app.layout.container.write_to_screen(screen, MouseHandlers(), WritePosition(0, 0, columns, rows), "",
                                             erase_bg=False, z_index=None)
        screen.draw_all_floats()
    out = []
    for y in range(rows):
        row = screen.data_buffer[y]
        chars = []
        x = 0
        while x < columns:
            ch = row[x].char
            chars.append(ch)
            x += max(1, get_cwidth(ch))
        out.append("".join(chars))
    return out


@contextlib.asynccontextmanager
async def running_tui(backend: FakeBackend, *, task: str | None = None, latest: bool = True, columns: int = 80,
                      rows: int = 24, config_path: Path | None = None, agent: str = "director",
                      yolo: str = "", frame_interval: float = 0.0, frame_timer: Timer | None = None,
                      **controller_kw: Any) -> AsyncIterator[tuple[TuiApp, PipeInput]]:
    controller = TuiController(backend, TuiOptions(project=Path(backend.project), agent=agent, yolo=yolo,
                                                   config_path=config_path,
                                                   home=config_path.parent.parent if config_path else None),
                               liveness_interval=0.05, **controller_kw)
    with create_pipe_input() as pipe:
        tui = TuiApp(controller, input=pipe, output=SizedOutput(columns, rows), frame_interval=frame_interval,
                     frame_timer=frame_timer)
        await controller.start(task, latest=latest)
        runner = asyncio.create_task(tui.application.run_async())
        await until(lambda: tui.application.is_running, "the application to run")
        try:
            yield tui, pipe
        finally:
            if not runner.done():
                controller.detach()
            await asyncio.wait_for(runner, 5)
            await controller.aclose()
