"""Token estimates of a conversation, one per message, recounted only where a message changed.

The ledger keeps, for each place in the message list, the message object it counted there and its count. A
look at the list compares objects by identity (a few microseconds for hundreds of messages) and counts only a
message that is new at its place: appended by the loop, or put there by a compression tier. So a check that
runs at every step, or after every truncated tool result, never re-runs the tokenizer over the conversation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .tokens import estimate_message_tokens, message_token_bound

__all__ = ["TokenLedger"]


class TokenLedger:
    """`estimate` counts one message (the default includes reasoning and tool calls); `recounts` says how many
    messages it has counted so far."""

    def __init__(self, estimate: Callable[[Any], int] = estimate_message_tokens,
                 bound: Callable[[Any], int] | None = None) -> None:
        self._estimate = estimate
        # What bounds `estimate` from above without counting; the default estimate has one of its own.
        self._bound = bound if bound is not None or estimate is not estimate_message_tokens else message_token_bound
        self._seen: list[Any] = []
        self._counts: list[int] = []
        self._total = 0
        self.recounts = 0

    def sync(self, messages: Sequence[Any]) -> None:
        """Bring the ledger in step with `messages`, counting each message not seen at its place before."""
        seen, counts = self._seen, self._counts
        known = len(seen)
        # The usual step: nothing changed but what was appended. A list compare takes objects that are the same
        # as equal without looking inside them, in C: a few nanoseconds a message.
        start = known if known <= len(messages) and seen == messages[:known] else 0
        for index in range(start, len(messages)):
            message = messages[index]
            if index < len(seen):
                if seen[index] is message:
                    continue
                self._total -= counts[index]
                seen[index] = message
                counts[index] = self._count(message)
                self._total += counts[index]
            else:
                seen.append(message)
                counts.append(self._count(message))
                self._total += counts[-1]
        if len(seen) > len(messages):
            self._total -= sum(counts[len(messages):])
            del seen[len(messages):], counts[len(messages):]

    def _count(self, message: Any) -> int:
        self.recounts += 1
        return self._estimate(message)

    def total(self, messages: Sequence[Any], start: int = 0) -> int:
        """The estimate of `messages[start:]`."""
        self.sync(messages)
        if start <= 0:
            return self._total
        return sum(self._counts[start:])

    def upper_bound(self, messages: Sequence[Any], start: int = 0) -> int | None:
        """At least `total(messages, start)`, counting nothing: the counts it holds for messages it saw at their
        place, the bound for the others (the ledger is left as it was). None when its estimate has no bound."""
        if self._bound is None:
            return None
        seen, counts, bound = self._seen, self._counts, self._bound
        known = len(seen)
        if start <= 0 and known <= len(messages) and seen == messages[:known]:
            return self._total + sum(bound(m) for m in messages[known:])
        total = 0
        for index in range(max(start, 0), len(messages)):
            message = messages[index]
            total += counts[index] if index < known and seen[index] is message else bound(message)
        return total

    def count(self, messages: Sequence[Any], index: int) -> int:
        self.sync(messages)
        return self._counts[index]

    def counts(self, messages: Sequence[Any]) -> Sequence[int]:
        """Every message's count, in order (a live view: valid until the list changes without the ledger)."""
        self.sync(messages)
        return self._counts

    def replace(self, messages: list[Any], index: int, message: Any) -> int:
        """Put `message` at `index`, counting only it; returns the tokens that saved (old minus new)."""
        self.sync(messages)
        old = self._counts[index]
        messages[index] = message
        self._seen[index] = message
        self._counts[index] = self._count(message)
        self._total += self._counts[index] - old
        return old - self._counts[index]
