"""Markdown in agent replies, styled for the terminal one source line at a time.

Models answer in Markdown; shown raw, `**`, backticks and `#` get in the way of reading. Replies stream,
so styling works line by line with one bit of state carried from line to line (inside a fenced code
block or not): the log then re-styles only the line that is still growing. What is not recognised is
shown as written, and an emphasis whose closing marker has not streamed in yet stays plain until it does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..cells import Line, wrap_fragments

__all__ = ["StyledLine", "style_markdown_line", "wrap_styled"]

TEXT = "class:text"
CODE = "class:md.code"

_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
_RULE = re.compile(r"^\s{0,3}([-*_])(?:\s*\1){2,}\s*$")
_QUOTE = re.compile(r"^\s{0,3}>\s?(.*)$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_ORDERED = re.compile(r"^(\s*)(\d{1,9}[.)])\s+(.*)$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# **bold** and *italic*: the marker hugs the text, and a lone `*` between words (2 * 3) is not a marker.
_EMPHASIS = re.compile(
    r"\*\*(?P<bold>\S(?:.*?\S)?)\*\*"
    r"|(?<![\w*])\*(?P<italic>[^\s*](?:[^*]*?[^\s*])?)\*(?![\w*])"
)


@dataclass(frozen=True, slots=True)
class StyledLine:
    """One source line for display: `None` fragments means it shows as no line at all (a fence)."""

    fragments: Line | None
    indent: int  # cells that wrapped continuation lines are indented by (bullets, quotes)
    in_fence: bool  # whether the next source line is inside a fenced code block


def style_markdown_line(source: str, in_fence: bool, rule_width: int) -> StyledLine:
    """Style one source line, given whether it starts inside a fenced code block."""
    if _FENCE.match(source):
        return StyledLine(None, 0, not in_fence)
    if in_fence:
        return StyledLine([(CODE, source)], 0, True)
    if m := _HEADING.match(source):
        return StyledLine(_inline(m.group(2), "class:md.heading"), 0, False)
    if _RULE.match(source):
        return StyledLine([("class:md.rule", "─" * max(1, rule_width))], 0, False)
    if m := _QUOTE.match(source):
        return StyledLine([("class:md.quote", "│ "), *_inline(m.group(1), "class:md.quote")], 2, False)
    if m := _BULLET.match(source):
        lead = m.group(1)
        return StyledLine([(TEXT, lead), ("class:md.bullet", "• "), *_inline(m.group(2), TEXT)],
                          len(lead) + 2, False)
    if m := _ORDERED.match(source):
        lead, number = m.group(1), m.group(2)
        return StyledLine([(TEXT, lead), ("class:md.bullet", number + " "), *_inline(m.group(3), TEXT)],
                          len(lead) + len(number) + 1, False)
    return StyledLine(_inline(source, TEXT), 0, False)


def wrap_styled(line: StyledLine, width: int) -> list[Line]:
    """The display lines of a styled source line within `width` cells, continuation lines indented."""
    if line.fragments is None:
        return []
    indent = line.indent if 0 < line.indent < width // 2 else 0
    wrapped = wrap_fragments(line.fragments, max(1, width - indent))
    return [wrapped[0], *([(TEXT, " " * indent), *rest] for rest in wrapped[1:])]


def _inline(text: str, base: str) -> Line:
    out: Line = []
    pos = 0
    for m in _CODE_SPAN.finditer(text):
        out += _emphasis(text[pos:m.start()], base)
        out.append((CODE, m.group(2)))
        pos = m.end()
    out += _emphasis(text[pos:], base)
    return out


def _emphasis(text: str, base: str) -> Line:
    out: Line = []
    pos = 0
    for m in _EMPHASIS.finditer(text):
        out.append((base, text[pos:m.start()]))
        if m.group("bold") is not None:
            out.append((f"{base} class:md.bold", m.group("bold")))
        else:
            out.append((f"{base} class:md.italic", m.group("italic")))
        pos = m.end()
    out.append((base, text[pos:]))
    return [f for f in out if f[1]]
