"""Terminal cell arithmetic shared by every full-screen surface (TUI and setup wizard).

A *line* is a list of `(style, text)` fragments, prompt_toolkit's own formatted-text shape. Every
renderer in this package hands prompt_toolkit lines that are already exactly `width` cells wide:
text is cleaned of control characters, wrapped (breaking over-long words and never splitting a
double-width character), then padded. Counting happens after wrapping, so a layout's line budget is
the number of lines the terminal actually shows.

Widths follow `prompt_toolkit.utils.get_cwidth` (wcwidth), the measure prompt_toolkit's screen uses.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence

from prompt_toolkit.utils import get_cwidth

__all__ = [
    "Fragment",
    "Line",
    "clean",
    "fit",
    "line_width",
    "pad_line",
    "text_width",
    "truncate",
    "wrap",
    "wrap_fragments",
    "wrap_spans",
]

Fragment = tuple[str, str]
Line = list[Fragment]

TAB = "    "
ELLIPSIS = "…"


def text_width(text: str) -> int:
    """Cells `text` occupies; ASCII printable text is its length."""
    if text.isascii() and text.isprintable():
        return len(text)
    return get_cwidth(text)


def line_width(line: Sequence[Fragment]) -> int:
    return sum(text_width(t) for _s, t in line)


def _printable(ch: str) -> bool:
    if ch == " ":
        return True
    cat = unicodedata.category(ch)
    # Controls, formats and combining marks would render as ^X or merge into a neighbour:
    # either way the cell count we computed would be wrong.
    return not (cat.startswith("C") or cat in ("Mn", "Me", "Zl", "Zp")) and get_cwidth(ch) > 0


def clean(text: str) -> str:
    """Text safe to put on screen: tabs expanded, NFC-composed, no control or zero-width characters.

    Newlines are kept (they are line breaks for `wrap`); carriage returns are dropped.
    """
    if text.isascii() and text.isprintable():
        return text
    text = unicodedata.normalize("NFC", text.replace("\t", TAB))
    return "".join(ch for ch in text if ch == "\n" or _printable(ch))


def wrap_spans(text: str, width: int) -> list[tuple[int, int]]:
    """(start, end) index pairs of the lines `text` (one paragraph, already cleaned) wraps into.

    Breaks at spaces (the space is dropped), next to double-width characters, or anywhere in a word
    longer than the line. The characters between two spans are the dropped break spaces.
    """
    width = max(1, width)
    n = len(text)
    spans: list[tuple[int, int]] = []
    if text.isascii():
        pos = 0
        while n - pos > width:
            cut = text.rfind(" ", pos, pos + width + 1)
            if cut <= pos:
                spans.append((pos, pos + width))
                pos += width
            else:
                spans.append((pos, cut))
                pos = cut + 1
        spans.append((pos, n))
        return spans
    start, used = 0, 0
    cand: tuple[int, int] | None = None  # (end of this line, start of the next) at the last break point
    for i, ch in enumerate(text):
        w = get_cwidth(ch)
        if used + w > width and used > 0:
            if ch == " ":
                spans.append((start, i))
                start, used, cand = i + 1, 0, None
                continue
            if w == 2 or cand is None:
                spans.append((start, i))
                start, used = i, 0
            else:
                spans.append((start, cand[0]))
                start = cand[1]
                used = sum(get_cwidth(c) for c in text[start:i])
                if used + w > width:
                    spans.append((start, i))
                    start, used = i, 0
            cand = None
        used += w
        if ch == " ":
            cand = (i, i + 1)
        elif w == 2:
            cand = (i + 1, i + 1)
    spans.append((start, n))
    return spans


def wrap(text: str, width: int) -> list[str]:
    """Split text into lines of at most `width` cells (see `wrap_spans`); newlines are kept as breaks."""
    out: list[str] = []
    for paragraph in clean(text).split("\n"):
        out.extend(paragraph[a:b] for a, b in wrap_spans(paragraph, width))
    return out


def truncate(text: str, width: int) -> str:
    """The longest prefix of one-line `text` that fits in `width` cells, with … when cut."""
    text = clean(text).replace("\n", " ")
    if text_width(text) <= width:
        return text
    if width <= 0:
        return ""
    budget = width - 1
    out: list[str] = []
    used = 0
    for ch in text:
        w = get_cwidth(ch)
        if used + w > budget:
            break
        out.append(ch)
        used += w
    return "".join(out) + ELLIPSIS


def fit(text: str, width: int) -> str:
    """One-line `text` truncated or padded to exactly `width` cells."""
    cut = truncate(text, width)
    return cut + " " * (width - text_width(cut))


def pad_line(line: Iterable[Fragment], width: int, style: str = "") -> Line:
    """Cut a fragment line to `width` cells and pad it so it is exactly `width` cells wide."""
    out: Line = []
    used = 0
    for frag_style, text in line:
        if used >= width:
            break
        w = text_width(text)
        if used + w > width:
            text = truncate(text, width - used)
            w = text_width(text)
        if text:
            out.append((frag_style, text))
            used += w
    if used < width:
        out.append((style, " " * (width - used)))
    return out


def wrap_fragments(line: Sequence[Fragment], width: int) -> list[Line]:
    """Wrap a styled line (newlines inside are breaks) into lines of at most `width` cells, keeping styles."""
    chars: list[str] = []
    styles: list[str] = []
    for style, text in line:
        text = clean(text)
        chars.append(text)
        styles.extend([style] * len(text))
    plain = "".join(chars)
    out: list[Line] = []
    offset = 0
    for paragraph in plain.split("\n"):
        for a, b in wrap_spans(paragraph, width):
            frags: Line = []
            for k in range(offset + a, offset + b):
                style, ch = styles[k], plain[k]
                if frags and frags[-1][0] == style:
                    frags[-1] = (style, frags[-1][1] + ch)
                else:
                    frags.append((style, ch))
            out.append(frags)
        offset += len(paragraph) + 1
    return out
