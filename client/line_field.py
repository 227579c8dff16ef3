"""A one-line text field with a cursor, for dialogs and wizard forms rendered by our own renderers.

The main TUI editor is a prompt_toolkit `Buffer`; these small fields are plain state so that a whole
dialog or wizard screen can be rendered to exact-width lines by one pure function.
"""

from __future__ import annotations

from .cells import Line, clean, text_width

__all__ = ["LineField"]


class LineField:
    """Text plus a cursor index; `secret` fields render as bullets."""

    def __init__(self, text: str = "", *, secret: bool = False) -> None:
        self.text = text
        self.cursor = len(text)
        self.secret = secret

    def set(self, text: str) -> None:
        self.text = text
        self.cursor = len(text)

    def insert(self, text: str) -> None:
        # Pasted text may carry newlines or control characters; a one-line field keeps neither.
        text = clean(text).replace("\n", "")
        self.text = self.text[: self.cursor] + text + self.text[self.cursor:]
        self.cursor += len(text)

    def backspace(self) -> None:
        if self.cursor > 0:
            self.text = self.text[: self.cursor - 1] + self.text[self.cursor:]
            self.cursor -= 1

    def delete(self) -> None:
        self.text = self.text[: self.cursor] + self.text[self.cursor + 1:]

    def left(self) -> None:
        self.cursor = max(0, self.cursor - 1)

    def right(self) -> None:
        self.cursor = min(len(self.text), self.cursor + 1)

    def home(self) -> None:
        self.cursor = 0

    def end(self) -> None:
        self.cursor = len(self.text)

    def clear(self) -> None:
        self.set("")

    def shown(self) -> str:
        return "•" * len(self.text) if self.secret else self.text

    def render(self, width: int, *, focused: bool, style: str = "class:field",
               cursor_style: str = "class:field.cursor") -> Line:
        """At most `width` cells, scrolled horizontally so the cursor stays visible."""
        text = self.shown()
        width = max(1, width)
        cursor = self.cursor
        # Scroll: drop characters from the left until the cursor (plus its cell) fits.
        start = 0
        while text_width(text[start:cursor]) + 1 > width and start < cursor:
            start += 1
        visible = text[start:]
        out: Line = []
        used = 0
        for i, ch in enumerate(visible):
            w = text_width(ch)
            if used + w > width:
                break
            at_cursor = focused and start + i == cursor
            out.append((cursor_style if at_cursor else style, ch))
            used += w
        if focused and cursor >= len(text) and used < width:
            out.append((cursor_style, " "))
            used += 1
        if used < width:
            out.append((style, " " * (width - used)))
        return out
