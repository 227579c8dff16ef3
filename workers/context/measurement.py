"""How full the context is: what the provider reported for the last request, plus what was added since.

A provider counts a request with its own tokenizer, tool definitions and the per-call context included; the
local estimate (cl100k, `token_ledger`) never sees the tool definitions. So the measure is the provider's
count of the last request (`Prefix`) plus the local estimate of the messages appended after the ones it
covered. It falls back to the local estimate of the whole conversation when there is no report yet, when
the provider sent none (the engine estimated it), or when a compression tier rewrote the list (tiers 2 and 3
invalidate it; tier 1 deducts what it saved). `over_threshold` is the one test every compression decision
makes; `surely_under` spares it the tokenizer when a bound of bytes already shows the request fits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .token_ledger import TokenLedger

__all__ = ["Prefix", "measure", "over_threshold", "surely_under"]


@dataclass
class Prefix:
    """The provider's input-token count of the last request and how many conversation messages it covered."""

    tokens: int = 0
    covers: int = 0
    valid: bool = False

    def record(self, input_tokens: int, *, estimated: bool, covers: int) -> None:
        if estimated or input_tokens <= 0:
            self.invalidate()
            return
        self.tokens, self.covers, self.valid = int(input_tokens), covers, True

    def invalidate(self) -> None:
        self.tokens, self.covers, self.valid = 0, 0, False

    def deduct(self, tokens: int) -> None:
        """A message the count covered was shortened by about `tokens` (a tool result the first tier cut)."""
        if self.valid:
            self.tokens = max(0, self.tokens - tokens)


def measure(messages: Sequence[Any], prefix: Prefix, ledger: TokenLedger) -> int:
    """The tokens the next request's conversation holds, by the rule above."""
    if prefix.valid and prefix.covers <= len(messages):
        return prefix.tokens + ledger.total(messages, start=prefix.covers)
    return ledger.total(messages)


def over_threshold(messages: Sequence[Any], prefix: Prefix, ledger: TokenLedger, threshold: int) -> bool:
    return measure(messages, prefix, ledger) > threshold


def surely_under(messages: Sequence[Any], prefix: Prefix, ledger: TokenLedger, threshold: int) -> bool:
    """True when `measure` cannot be over `threshold`, known without the tokenizer (a message's tokens are at most
    its bytes); False says only that it has to be measured. Most steps are far from the threshold: they need not
    count what they add before their request goes out."""
    if prefix.valid and prefix.covers <= len(messages):
        bound = ledger.upper_bound(messages, start=prefix.covers)
        return bound is not None and prefix.tokens + bound <= threshold
    bound = ledger.upper_bound(messages)
    return bound is not None and bound <= threshold
