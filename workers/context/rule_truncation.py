"""The first compression tier: cut tool results the model has already read, keeping the head of each.

Order: results that are cheap to fetch again (listings, searches, command output) before file contents and
delegation reports, oldest first within each; the caller's `priority_of` ranks a tool by what its spec
declares and returns None for what is never cut (results a model made — deepthinking, design, micro_agent —
reflections, short control results). The results of the latest step are never cut: the model has not read
them yet. A cut result keeps about its first `keep_tokens` tokens, the `note:` / `artifact:` references of
the part that went, and a line saying how to see it again.

Accounting is incremental: each cut recounts only the message it replaced (`TokenLedger.replace`), and the
cutting stops once the tokens saved reach what was needed.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .token_ledger import TokenLedger

__all__ = ["CHEAP", "COSTLY", "CUT_MARK", "Truncation", "cut_result", "truncate_tool_results"]

CHEAP = 0  # listings, search hits, command output: cut first
COSTLY = 1  # file contents, diffs, delegation reports: cut after every cheap one
CUT_MARK = "[yagent: this tool result was cut"
_CHARS_PER_TOKEN = 4  # a head of about keep_tokens tokens without running the tokenizer over the whole text
_MARK_ALLOWANCE = 60  # tokens the marker itself takes: a result not longer than head + marker is left alone
_REFERENCE = re.compile(r"\b(?:note:[\w.-]+/[\w.-]+|artifact:[\w.-]+)")
_MAX_REFERENCES = 12


@dataclass(frozen=True, slots=True)
class Truncation:
    saved: int = 0  # tokens, local estimate
    cut: int = 0  # results cut


def _is_cut(message: Any) -> bool:
    return CUT_MARK in (message.content or "")


def _head(text: str, keep_tokens: int) -> str:
    head = text[:keep_tokens * _CHARS_PER_TOKEN]
    line_end = head.rfind("\n")
    return head[:line_end] if line_end > len(head) // 2 else head


def cut_result(message: Any, keep_tokens: int, tokens: int) -> Any:
    """`message` (a tool result) shortened to its head and a marker saying what went and how to get it back."""
    content = message.content or ""
    head = _head(content, keep_tokens)
    gone = content[len(head):]
    refs = list(dict.fromkeys(_REFERENCE.findall(gone)))[:_MAX_REFERENCES]
    again = (f"read {', '.join(refs)} for what it held" if refs
             else f"call {message.name or 'the tool'} again if you need the rest")
    mark = (f"{CUT_MARK} from about {tokens:,} tokens to its first {keep_tokens:,} to fit the context window; "
            f"{again}]")
    cut = dataclasses.replace(message, content=f"{head}\n… {mark}" if head else mark)
    # A cut result's images go too: they are what costs the most of it.
    return dataclasses.replace(cut, images=()) if getattr(message, "images", ()) else cut


def truncate_tool_results(messages: list[Any], ledger: TokenLedger, *, priority_of: Callable[[str], int | None],
                          keep_tokens: int, needed: int) -> Truncation:
    """Cut results in order until about `needed` tokens are saved (or nothing is left to cut)."""
    if needed <= 0:
        return Truncation()
    last_reply = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "assistant"), 0)
    candidates: list[tuple[int, int]] = []
    for index, message in enumerate(messages[:last_reply]):
        if message.role != "tool" or _is_cut(message):
            continue
        rank = priority_of(message.name or "")
        if rank is not None:
            candidates.append((rank, index))
    candidates.sort()
    saved = cut = 0
    counts = ledger.counts(messages)
    for _rank, index in candidates:
        if saved >= needed:
            break
        tokens = counts[index]
        if tokens <= keep_tokens + _MARK_ALLOWANCE:
            continue
        gained = ledger.replace(messages, index, cut_result(messages[index], keep_tokens, tokens))
        saved += gained
        cut += 1
    return Truncation(saved, cut)
