"""Hide `<thought>` blocks from the reply text people read; the plans view shows them instead.

Streaming-safe: text that could still turn into an opening tag (a trailing `<th`) is held back until
the next chunk decides, and an open block hides everything until its closing tag arrives. The
visible text therefore only ever grows, which lets renderers append instead of redrawing.
"""

from __future__ import annotations

__all__ = ["ThoughtFilter", "visible_reply"]

OPEN, CLOSE = "<thought>", "</thought>"


def _held_back(tail: str) -> int:
    """How many trailing characters might be the start of an opening tag."""
    for k in range(min(len(OPEN) - 1, len(tail)), 0, -1):
        if OPEN.startswith(tail[-k:]):
            return k
    return 0


def visible_reply(text: str, *, final: bool = False) -> str:
    """The reply so far without thought blocks. While streaming, an open block hides what follows it;
    once the reply is `final`, a block that was never closed is shown as the text it is."""
    out: list[str] = []
    i = 0
    while True:
        start = text.find(OPEN, i)
        if start < 0:
            tail = text[i:]
            out.append(tail if final else tail[: len(tail) - _held_back(tail)])
            break
        out.append(text[i:start])
        end = text.find(CLOSE, start)
        if end < 0:
            if final:
                out.append(text[start:])
            break  # still inside the block
        i = end + len(CLOSE)
    return "".join(out).lstrip("\n")


class ThoughtFilter:
    """Feed one reply's chunks, get the newly visible text of each; `finish` releases what was held."""

    def __init__(self) -> None:
        self._text = ""
        self._shown = 0

    def _take(self, visible: str) -> str:
        fresh = visible[self._shown:]
        self._shown = len(visible)
        return fresh

    def feed(self, chunk: str) -> str:
        self._text += chunk
        return self._take(visible_reply(self._text))

    def finish(self) -> str:
        fresh = self._take(visible_reply(self._text, final=True))
        self._text, self._shown = "", 0
        return fresh
