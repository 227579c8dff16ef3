"""prompt_toolkit containers for the TUI: every surface is a `LinesControl` over a pure renderer.

Heights are decided in one place (`Budget`) from the terminal size, and the same numbers are given
to the renderers, so the screen never holds more rows than the terminal has.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from prompt_toolkit.application.current import get_app
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.filters import Condition
from prompt_toolkit.layout import (
    BufferControl,
    ConditionalContainer,
    DynamicContainer,
    Float,
    FloatContainer,
    HSplit,
    Layout,
    VSplit,
    Window,
)
from prompt_toolkit.layout.dimension import Dimension
from prompt_toolkit.layout.menus import CompletionsMenu
from prompt_toolkit.mouse_events import MouseEvent, MouseEventType

from ..cells import Line, fit, text_width
from ..lines_control import LinesControl
from .controller import TuiController
from .render import message_line, plans_window, render_status, render_title, status_height

__all__ = ["Budget", "TuiLayout"]

MIN_LOG_ROWS = 3
MIN_DIALOG_ROWS = 3
WHEEL_LINES = 3  # lines one notch of the mouse wheel scrolls


class _WheelLines(LinesControl):
    """Pre-rendered lines that scroll with the mouse wheel (the renderer, not the Window, knows the offset)."""

    def __init__(self, render: Callable[[int, int], list[Line]], on_wheel: Callable[[int], None]) -> None:
        super().__init__(render)
        self.on_wheel = on_wheel

    def mouse_handler(self, mouse_event: MouseEvent) -> object:
        if mouse_event.event_type == MouseEventType.SCROLL_UP:
            self.on_wheel(-WHEEL_LINES)
            return None
        if mouse_event.event_type == MouseEventType.SCROLL_DOWN:
            self.on_wheel(WHEEL_LINES)
            return None
        return NotImplemented


@dataclass(frozen=True, slots=True)
class Budget:
    """Rows of each part of the main screen for a terminal of `rows` rows."""

    rows: int
    status: int
    message: int
    banner: int
    input_max: int
    dialog_max: int

    @classmethod
    def of(cls, controller: TuiController, rows: int) -> Budget:
        status = status_height(controller.view, rows)
        message = 1 if controller.message else 0
        banner = 1 if controller.connection != "ok" else 0
        fixed = 1 + status + message + banner  # title row + status area + optional lines
        input_max = max(1, min(6, rows // 4))
        dialog_max = max(MIN_DIALOG_ROWS, rows - fixed - MIN_LOG_ROWS)
        return cls(rows, status, message, banner, input_max, dialog_max)


def _size() -> tuple[int, int]:
    size = get_app().output.get_size()
    return size.columns, size.rows


class TuiLayout:
    """The main screen: title, conversation (or plans), message, banner, status, dialog or input."""

    def __init__(self, controller: TuiController, buffer: Buffer, setup_container: Callable[[], object]) -> None:
        self.c = controller
        self.buffer = buffer
        self.last_log_height = 10
        self.last_log_width = 80
        self.plan_scroll = 0
        self.lines_below = 0  # of the conversation, when it is scrolled back (the log renders before the status)
        c = controller

        dialog_open = Condition(lambda: c.dialog is not None and c.mode == "main")
        in_setup = Condition(lambda: c.mode == "setup")
        in_plans = Condition(lambda: c.mode == "plans")

        self.title_window = Window(LinesControl(self._title), height=1)
        self.log_window = Window(_WheelLines(self._log, self.scroll_lines))
        self.plans_window = Window(_WheelLines(self._plans, lambda n: self.scroll_plans(-n)))
        self.dialog_control = LinesControl(self._dialog)
        self.dialog_window = Window(self.dialog_control, height=self._dialog_height)
        self.input_window = Window(BufferControl(buffer=buffer), wrap_lines=True, height=self._input_height)
        prompt = Window(LinesControl(lambda w, h: [[("class:prompt", "› "[:w])]]), width=2)
        main = HSplit([
            self.title_window,
            ConditionalContainer(self.log_window, filter=~in_plans),
            ConditionalContainer(self.plans_window, filter=in_plans),
            ConditionalContainer(Window(LinesControl(self._message), height=1),
                                 filter=Condition(lambda: c.message is not None)),
            ConditionalContainer(Window(LinesControl(self._banner), height=1),
                                 filter=Condition(lambda: c.connection != "ok")),
            Window(LinesControl(self._status), height=lambda: self._budget().status),
            ConditionalContainer(self.dialog_window, filter=dialog_open),
            ConditionalContainer(VSplit([prompt, self.input_window]), filter=~dialog_open & ~in_setup),
        ])
        body = FloatContainer(
            content=main,
            floats=[Float(xcursor=True, ycursor=True,
                          content=CompletionsMenu(max_height=8, scroll_offset=1, display_arrows=False))],
        )
        self.root = HSplit([
            ConditionalContainer(body, filter=~in_setup),
            ConditionalContainer(DynamicContainer(setup_container), filter=in_setup),  # type: ignore[arg-type]
        ])
        self.layout = Layout(self.root, focused_element=self.input_window)

    def _input_height(self) -> Dimension:
        """As many rows as the message needs (wrapped at the terminal width), up to the budget."""
        columns, rows = _size()
        room = max(1, columns - 2)
        needed = sum(max(1, -(-(text_width(line) + 1) // room)) for line in self.buffer.text.split("\n"))
        return Dimension.exact(max(1, min(Budget.of(self.c, rows).input_max, needed)))

    def _budget(self) -> Budget:
        return Budget.of(self.c, _size()[1])

    # -- renderers handed to LinesControl ----------------------------------------------------------

    def _title(self, width: int, height: int) -> list[Line]:
        hints: list[tuple[str, str]] = [("ctrl+q", "detach")]
        if self.c.connection != "ok":
            hints.insert(0, ("ctrl+r", "reconnect"))
        if self.c.deferred and self.c.dialog is None:
            hints.insert(0, ("f2", "question"))
        hints += [("ctrl+o", "tools"), ("ctrl+t", "plans"), ("/help", "help")]
        return [render_title(self.c.view, width, hints)]

    def _log(self, width: int, height: int) -> list[Line]:
        self.last_log_height, self.last_log_width = height, width
        lines, total, top = self.c.renderer.window(self.c.view, width, height, self.c.tools_expanded,
                                                   self.c.scroll_top)
        if self.c.scroll_top is not None:
            self.c.scroll_top = top
            self.lines_below = max(0, total - top - height)
        else:
            self.lines_below = 0
        return lines

    def _plans(self, width: int, height: int) -> list[Line]:
        lines, self.plan_scroll = plans_window(self.c.view.plans, width, height, self.c.plan_filter,
                                               self.plan_scroll)
        return lines

    def _message(self, width: int, height: int) -> list[Line]:
        text, error = self.c.message or ("", False)
        return [message_line(text, width, error=error)]

    def _banner(self, width: int, height: int) -> list[Line]:
        if self.c.connection == "connecting":
            text = " connecting to yagentd…"
        else:
            text = f" connection to yagentd lost: {self.c.lost_reason} — ctrl+r reconnects (starts it if needed)"
        return [[("class:banner", fit(text, width))]]

    def _status(self, width: int, height: int) -> list[Line]:
        below = self.lines_below if self.c.scroll_top is not None and self.c.mode == "main" else 0
        return render_status(self.c.view, width, _size()[1], self.c.clock(), model_override=self.c.model_override,
                             lines_below=below)[:max(1, height)]

    def _dialog(self, width: int, height: int) -> list[Line]:
        if self.c.dialog is None:
            return []
        return self.c.dialog.render(width, min(height, self._budget().dialog_max))

    def _dialog_height(self) -> Dimension:
        if self.c.dialog is None:
            return Dimension.exact(0)
        columns, rows = _size()
        return Dimension.exact(len(self.c.dialog.render(columns, Budget.of(self.c, rows).dialog_max)))

    # -- scrolling ---------------------------------------------------------------------------------

    def scroll(self, pages: int) -> None:
        self.scroll_lines(pages * max(1, self.last_log_height - 2))

    def scroll_lines(self, delta: int) -> None:
        """Move the conversation by `delta` lines; reaching the bottom follows the stream again."""
        c = self.c
        height = max(1, self.last_log_height)
        _lines, total, _top = c.renderer.window(c.view, self.last_log_width, height, c.tools_expanded, 0)
        bottom_top = max(0, total - height)
        current = bottom_top if c.scroll_top is None else c.scroll_top
        target = current + delta
        c.scroll_top = None if target >= bottom_top else max(0, target)
        c.changed()

    def scroll_plans(self, lines: int) -> None:
        """`lines` > 0 goes back to older plans (the view is anchored at the newest)."""
        self.plan_scroll = max(0, self.plan_scroll + lines)
        self.c.changed()

    def scroll_edge(self, bottom: bool) -> None:
        """To the first line of the conversation, or back to following its tail."""
        self.c.scroll_top = None if bottom else 0
        self.c.changed()
