"""Tool-call pairing repair, applied to every request before it is sent.

Providers reject a conversation where a tool call has no result, or a result answers no call. Runs get
interrupted, resumed and replayed, so the history can hold both; a replayed delegation also appends a
second result for the same call id, which must replace the first (last wins).
"""

from __future__ import annotations

from collections.abc import Sequence

from ._messages import Message

__all__ = ["MISSING_TOOL_RESULT", "repair_tool_pairing"]

MISSING_TOOL_RESULT = ("Error: no result was recorded for this tool call (the run stopped before the tool "
                       "finished). Call the tool again if its result is still needed.")


def repair_tool_pairing(messages: Sequence[Message]) -> list[Message]:
    """Each tool call followed by exactly one result, in call order; orphan results dropped.

    Pure and idempotent: the input is not modified, and repairing a repaired list changes nothing.
    """
    last_result: dict[str, Message] = {}
    has_calls = False
    for message in messages:
        if message.role == "tool":
            last_result[message.tool_call_id] = message
        elif message.tool_calls:
            has_calls = True
    if not has_calls and not last_result:
        return list(messages)
    repaired: list[Message] = []
    for message in messages:
        if message.role == "tool":
            continue
        repaired.append(message)
        if message.role == "assistant":
            for call in message.tool_calls:
                result = last_result.get(call.id)
                repaired.append(result if result is not None
                                else Message.tool(call.id, MISSING_TOOL_RESULT, name=call.name))
    return repaired
