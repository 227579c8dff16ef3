"""A request body's bytes, with what repeats from call to call encoded once instead of at every request.

Every model call of a run sends the same tool definitions until its tool surface changes (a cold tool loaded, MCP
tools listed anew), and they are most of a short conversation's body: the Director's 18 KB of 26 KB. `ToolEntries`
keeps the wire-format entries made for one tuple of definitions and their JSON text. A conversation grows by its
end, so each call's messages are the last call's plus a few: `MessageTexts` keeps each message's JSON text and
reuses it for an equal message at the same place (equal, not identical: the wire dicts are made anew at every call;
their strings are the conversation's own, so comparing them is cheap; Python's equality holds 1 == 1.0 == True,
which a message at the same place of a conversation does not turn into one another). `encode_body` writes the body
member by member in its own order, taking those texts where they apply: the bytes are exactly what encoding the
whole body would write. A body's messages and tools must not be changed in place once encoded.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Sequence
from typing import Any

from ._messages import ToolDefinition

__all__ = ["MESSAGES_KEY", "MessageTexts", "ToolEntries", "encode_body"]

TOOLS_KEY = "tools"
MESSAGES_KEY = "messages"


class ToolEntries:
    """The wire-format entries of the last tool definitions asked for, and their JSON text, made once for them."""

    __slots__ = ("_definitions", "_entries", "_make", "_text")

    def __init__(self, make: Callable[[ToolDefinition], dict[str, Any]]) -> None:
        self._make = make
        self._definitions: tuple[ToolDefinition, ...] = ()
        self._entries: list[dict[str, Any]] | None = None
        self._text = b""

    def entries(self, tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
        """The entries for `tools`: the same list while the same definition objects are asked for (a run's calls
        share them until its surface changes; a definition is frozen, and its schema a copy nobody else holds)."""
        held = self._definitions
        if self._entries is None or len(held) != len(tools) or not all(map(operator.is_, held, tools)):
            self._definitions = tuple(tools)
            self._entries = [self._make(t) for t in tools]
            self._text = b""
        return self._entries

    def text_of(self, listed: object) -> bytes | None:
        """The JSON of `listed` when it is the entries this made last (encoded on first use); else None."""
        if listed is None or listed is not self._entries:
            return None
        if not self._text:
            self._text = json.dumps(listed, ensure_ascii=False).encode()
        return self._text


class MessageTexts:
    """The JSON of each message of the last list encoded, for the next list's equal messages at the same place."""

    __slots__ = ("_messages", "_texts")

    def __init__(self) -> None:
        self._messages: list[Any] = []
        self._texts: list[bytes] = []

    def text_of(self, messages: list[Any]) -> bytes:
        """`messages` as json.dumps writes the list, in UTF-8 (a compacted or edited conversation is encoded anew from
        where it differs: a message is reused only at its own place)."""
        kept, kept_texts = self._messages, self._texts
        texts = [kept_texts[i] if i < len(kept) and message == kept[i]
                 else json.dumps(message, ensure_ascii=False).encode() for i, message in enumerate(messages)]
        self._messages, self._texts = list(messages), texts
        return b"[" + b", ".join(texts) + b"]"


def encode_body(body: dict[str, Any], tools: ToolEntries | None = None, messages: MessageTexts | None = None
                ) -> bytes:
    """The body as UTF-8 JSON, byte for byte as `json.dumps(body, ensure_ascii=False)` writes it; its "tools", when
    they are `tools`' own entries, from their text made once, and its "messages" through `messages`."""
    tools_text = tools.text_of(body.get(TOOLS_KEY)) if tools is not None else None
    listed = body.get(MESSAGES_KEY)
    messages_text = messages.text_of(listed) if messages is not None and isinstance(listed, list) else None
    if tools_text is None and messages_text is None:
        return json.dumps(body, ensure_ascii=False).encode()
    members = []
    for key, value in body.items():
        if key == TOOLS_KEY and tools_text is not None:
            text = tools_text
        elif key == MESSAGES_KEY and messages_text is not None:
            text = messages_text
        else:
            text = json.dumps(value, ensure_ascii=False).encode()
        members.append(json.dumps(key, ensure_ascii=False).encode() + b": " + text)
    return b"{" + b", ".join(members) + b"}"
