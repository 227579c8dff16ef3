"""An answer the model sends again after a reminder is shown once.

A Director that replied without delegating is reminded, and told it may send the same answer again as
its final one. That second reply streams like any other before anyone can tell it is the same; its
`ai_response` says so (`repeats`, decided by the worker, the one judge of "the same"). Until then, text
of a run's step that so far matches the run's previous plain reply is held back rather than shown: a
repeat is then dropped whole, and a reply that turns out different is shown from the moment it differs
(or at its `ai_response`).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["ReplyEcho", "reply_words"]


def reply_words(text: str) -> str:
    """Text as two replies are compared: spacing evened out."""
    return " ".join(text.split())


def _as_is(text: str) -> str:
    return text


class _Held:
    """A step's text held back, and how much of it (thought hidden, spacing evened) matched so far."""

    __slots__ = ("matched", "pending_space", "seen", "text")

    def __init__(self) -> None:
        self.text = ""
        self.seen = 0  # characters of its visible text already compared
        self.matched = 0  # characters of the previous reply's words they matched
        self.pending_space = False  # the compared text ended in spacing that a next word turns into one space


class ReplyEcho:
    """Per run: the words of its last plain reply, and what of the current step is held back.

    A chunk costs the visible text's new part only (it only grows while a reply streams), so holding back a
    long reply stays linear.
    """

    def __init__(self, visible: Callable[[str], str] = _as_is) -> None:
        self._visible = visible  # what of held text a person would see (thought blocks hidden)
        self._previous: dict[str, str] = {}  # run -> words of its last reply without tool calls
        self._held: dict[str, _Held] = {}  # run -> its current step's text, not shown yet
        self._differs: set[str] = set()  # runs whose current step already showed that it is another answer

    def feed(self, run: str, text: str) -> str:
        """What to show now of the step's next `text` (with whatever was held back before it)."""
        previous = self._previous.get(run)
        if not previous or run in self._differs:
            return text
        held = self._held.setdefault(run, _Held())
        held.text += text
        if self._still_matches(held, previous):
            return ""
        del self._held[run]
        self._differs.add(run)
        return held.text

    def _still_matches(self, held: _Held, previous: str) -> bool:
        visible = self._visible(held.text) if "<" in held.text else held.text.lstrip("\n")
        fresh, held.seen = visible[held.seen:], len(visible)
        for char in fresh:
            if char.isspace():
                held.pending_space = held.matched > 0
                continue
            expected = (" " if held.pending_space else "") + char
            if previous[held.matched:held.matched + len(expected)] != expected:
                return False
            held.matched += len(expected)
            held.pending_space = False
        return True

    def holding(self, run: str) -> bool:
        held = self._held.get(run)
        return held is not None and bool(held.text)

    def restart(self, run: str) -> None:
        """The step's stream starts over: what it held is void, and the new attempt is compared afresh."""
        self._held.pop(run, None)
        self._differs.discard(run)

    def response(self, run: str, visible_text: str, tool_calls: int, repeats: bool) -> str:
        """The step's complete reply arrived: the held text to show now ("" for a repeat)."""
        held = self.release(run)
        if tool_calls:
            self._previous.pop(run, None)  # only a reply answered with a reminder is sent again
        elif words := reply_words(visible_text):
            self._previous[run] = words
        return "" if repeats else held

    def release(self, run: str) -> str:
        """The step ended without a complete reply (an error, the run's end): show what was held."""
        self._differs.discard(run)
        held = self._held.pop(run, None)
        return held.text if held is not None else ""

    def forget(self, run: str) -> str:
        """The run ended: what it still held, and nothing kept about it."""
        self._previous.pop(run, None)
        return self.release(run)
