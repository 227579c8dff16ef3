"""The full-screen application: wires controller, layout, keys and the embedded setup wizard.

`input` and `output` are prompt_toolkit's own seams: production passes nothing (the terminal), tests
pass `create_pipe_input()` and `DummyOutput()` (or a sized fake output).
"""

from __future__ import annotations

import gc
import os
from pathlib import Path
from typing import Any

from prompt_toolkit.application import Application
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.filters import Condition
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import merge_key_bindings
from prompt_toolkit.layout import Window
from prompt_toolkit.output import Output

from yagent.ipc.private_files import make_private_dirs

from ..setup.view import ProbeFn, SetupView, build_setup_bindings
from ..theme import STYLE
from .commands import SlashCompleter
from .controller import ExitInfo, TuiController
from .keys import build_key_bindings
from .layout import TuiLayout
from .pacing import FRAME_INTERVAL, FramePacer, Timer

__all__ = ["TuiApp", "run_tui"]


class TuiApp:
    def __init__(self, controller: TuiController, *, input: Input | None = None, output: Output | None = None,
                 history: History | None = None, probe: ProbeFn | None = None,
                 frame_interval: float = FRAME_INTERVAL, frame_timer: Timer | None = None) -> None:
        self.c = controller
        self.probe = probe
        self.setup_view: SetupView | None = None
        self.buffer = Buffer(multiline=True, history=history or InMemoryHistory(),
                             completer=SlashCompleter(lambda: controller.facts().providers),
                             complete_while_typing=True, name="input")
        self.layout = TuiLayout(controller, self.buffer, self._setup_container)
        keys = build_key_bindings(controller, self.buffer, self.layout.scroll, self._plan_scroll,
                                  self.layout.scroll_edge)
        self._setup_keys = _SetupKeys(self)
        self.application: Application[ExitInfo] = Application(
            layout=self.layout.layout,
            key_bindings=merge_key_bindings([keys, self._setup_keys.bindings]),
            style=STYLE,
            full_screen=True,
            # The wheel scrolls the conversation and the plans (without it, terminals that turn the wheel
            # into arrow keys on the alternate screen walk the input history instead). Selecting text with
            # the mouse takes shift, as in every full-screen program that reads the mouse.
            mouse_support=True,
            input=input,
            output=output,
            refresh_interval=1.0,  # the elapsed clock
            # No interval and no postponing here: a key is drawn on the loop's next pass. Stream output is paced
            # by `self.pacer` instead, so many chunks a second still draw at most once a frame.
            min_redraw_interval=None,
            max_render_postpone_time=0,
            before_render=self._before_render,
            after_render=self._after_render,
        )
        self.pacer = FramePacer(self.application.invalidate, frame_interval, timer=frame_timer)
        controller.listeners.append(self.application.invalidate)
        controller.stream_listeners.append(self.pacer.request)
        self.application.key_processor.after_key_press += self._key_pressed
        controller.exit_app = self._exit
        controller.restore_input = self._restore_input
        controller.open_setup = self._open_setup

    def _exit(self, info: ExitInfo) -> None:
        if self.application.is_running and not self.application.future.done():  # type: ignore[union-attr]
            self.application.exit(result=info)

    def _restore_input(self, text: str) -> None:
        if not self.buffer.text.strip():
            self.buffer.text = text
            self.buffer.cursor_position = len(text)

    def _plan_scroll(self, delta: int) -> None:
        self.layout.scroll_plans(delta * 5)

    def _focus(self) -> None:
        """The wizard has the focus while it is shown, the input otherwise. Dialogs never take it: their
        keys are application bindings that win over the editor's, so no key is lost between two renders."""
        layout = self.layout.layout
        target = self.setup_view.window if self.c.mode == "setup" and self.setup_view is not None \
            else self.layout.input_window
        if layout.current_window is not target:
            try:
                layout.focus(target)
            except ValueError:
                pass  # not in the layout yet; the next render focuses it

    def _before_render(self, app: Application[Any]) -> None:
        self._focus()

    def _key_pressed(self, _processor: object) -> None:
        self.c.input_first.key_pressed()
        self.application.invalidate()  # a key no binding changes anything for still releases the event pump

    def _after_render(self, app: Application[Any]) -> None:
        self.pacer.drawn()
        self.c.input_first.drawn()

    # -- embedded setup wizard ----------------------------------------------------------------------

    def _setup_container(self) -> Any:
        return self.setup_view.container if self.setup_view is not None else Window()

    def _open_setup(self) -> None:
        config_path = self.c.options.config_path
        if config_path is None:
            self.c.mode = "main"
            self.c.say("no configuration file path is known to this client", error=True)
            return
        self.setup_view = SetupView.open(config_path, on_done=self._setup_done, probe=self.probe,
                                         environ=self.c.environ, spawn=self.c.spawn,
                                         invalidate=self.application.invalidate)
        self._focus()
        self.c.changed()

    def _setup_done(self, note: str) -> None:
        self.setup_view = None
        self.c.setup_finished(note)
        self._focus()


class _SetupKeys:
    """Forwards keys to the embedded wizard while it is shown (and only then)."""

    def __init__(self, app: TuiApp) -> None:
        self.bindings = build_setup_bindings(lambda: app.setup_view,
                                             Condition(lambda: app.c.mode == "setup" and app.setup_view is not None))


async def run_tui(controller: TuiController, *, task: str | None, latest: bool, input: Input | None = None,
                  output: Output | None = None, history_path: Path | None = None) -> ExitInfo:
    """Attach (errors raise before the screen is taken), run until detach, then clean up."""
    history: History | None = None
    if history_path is not None:
        make_private_dirs(history_path.parent)
        os.close(os.open(history_path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))  # what was typed is private
        history = FileHistory(str(history_path))
    tui = TuiApp(controller, input=input, output=output, history=history)
    try:
        await controller.start(task, latest=latest)
        # What exists now (prompt_toolkit, the screen, the attached history) lives as long as the client: left out
        # of every later collection. Measured with bench/tui_render.py: a generation-2 collection walked it for up
        # to 52 ms while a chunk stream was drawn, the keypress latency's p95 (47–54 → 15–18 ms with it frozen).
        gc.freeze()
        result = await tui.application.run_async()
    finally:
        tui.pacer.close()
        await controller.aclose()
    return result or controller.exit_info or ExitInfo("detached", controller.view.task, controller.view.display_state)
