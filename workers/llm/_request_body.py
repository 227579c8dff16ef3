"""A request body's bytes, with the tool definitions encoded once per set of tools instead of once per request.

Every model call of a run sends the same tool definitions until its tool surface changes (a cold tool loaded, MCP
tools listed anew), and they are most of a short conversation's body: the Director's 18 KB of 26 KB. `ToolEntries`
keeps the wire-format entries made for one tuple of definitions and their JSON text; `encode_body` writes a body
whose "tools" is those very entries by writing the rest and appending that text. Any other body — its tools
replaced by a caller's extra fields, or none — is encoded whole, as before.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Sequence
from typing import Any

from ._messages import ToolDefinition

__all__ = ["ToolEntries", "encode_body"]

TOOLS_KEY = "tools"


class ToolEntries:
    """The wire-format entries of the last tool definitions asked for, and their JSON text, made once for them."""

    __slots__ = ("_definitions", "_entries", "_make", "_text")

    def __init__(self, make: Callable[[ToolDefinition], dict[str, Any]]) -> None:
        self._make = make
        self._definitions: tuple[ToolDefinition, ...] = ()
        self._entries: list[dict[str, Any]] | None = None
        self._text = ""

    def entries(self, tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
        """The entries for `tools`: the same list while the same definition objects are asked for (a run's calls
        share them until its surface changes; a definition is frozen, and its schema a copy nobody else holds)."""
        held = self._definitions
        if self._entries is None or len(held) != len(tools) or not all(map(operator.is_, held, tools)):
            self._definitions = tuple(tools)
            self._entries = [self._make(t) for t in tools]
            self._text = ""
        return self._entries

    def text_of(self, listed: object) -> str | None:
        """The JSON text of `listed` when it is the entries this made last (encoded on first use); else None."""
        if listed is None or listed is not self._entries:
            return None
        if not self._text:
            self._text = json.dumps(listed, ensure_ascii=False)
        return self._text


def encode_body(body: dict[str, Any], tools: ToolEntries | None = None) -> bytes:
    """The body as UTF-8 JSON; its "tools", when they are `tools`' own entries, from their text made once."""
    text = tools.text_of(body.get(TOOLS_KEY)) if tools is not None else None
    if text is None:
        return json.dumps(body, ensure_ascii=False).encode()
    rest = json.dumps({k: v for k, v in body.items() if k != TOOLS_KEY}, ensure_ascii=False)
    # `rest` is an object's text: "{...}". The tools go in as its last member, written as json.dumps writes one.
    joint = ", " if len(rest) > 2 else ""
    return f'{rest[:-1]}{joint}"{TOOLS_KEY}": {text}}}'.encode()
