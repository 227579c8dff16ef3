"""A prompt_toolkit control that shows lines a pure renderer produced (already exactly `width` wide).

Every full-screen surface of the client (conversation, status, dialogs, setup wizard) renders to
lines first and hands them to prompt_toolkit through this control, so tests can check the same lines
at any size without a terminal.
"""

from __future__ import annotations

from collections.abc import Callable

from prompt_toolkit.key_binding import KeyBindingsBase
from prompt_toolkit.layout.controls import UIContent, UIControl

from .cells import Line

__all__ = ["LinesControl"]


class LinesControl(UIControl):
    def __init__(self, render: Callable[[int, int], list[Line]], *, focusable: bool = False,
                 key_bindings: KeyBindingsBase | None = None) -> None:
        self.render = render
        self._focusable = focusable
        self._key_bindings = key_bindings

    def create_content(self, width: int, height: int) -> UIContent:
        lines = self.render(width, height)
        return UIContent(get_line=lambda i: lines[i], line_count=len(lines), show_cursor=False)

    def is_focusable(self) -> bool:
        return self._focusable

    def get_key_bindings(self) -> KeyBindingsBase | None:
        return self._key_bindings
