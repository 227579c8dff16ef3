"""Tool-call pairing repair, applied to every request before it is sent.

Providers reject a conversation where a tool call has no result, or a result answers no call. Runs get
interrupted, resumed and replayed, so the history can hold both; a replayed delegation also appends a
second result for the same call id, which must replace the first (last wins).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ._messages import Message, new_call_id
from ._response import Response

__all__ = ["MISSING_TOOL_RESULT", "repair_tool_pairing", "with_unique_call_ids"]

MISSING_TOOL_RESULT = ("Error: no result was recorded for this tool call (the run stopped before the tool "
                       "finished). Call the tool again if its result is still needed.")


def repair_tool_pairing(messages: Sequence[Message], *, missing: str = MISSING_TOOL_RESULT) -> list[Message]:
    """Each tool call followed by exactly one result, in call order; orphan results dropped.

    Pure and idempotent: the input is not modified, and repairing a repaired list changes nothing. `missing`
    is the result a call without one gets (a resumed run says the call was interrupted).
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
                                else Message.tool(call.id, missing, name=call.name))
    return repaired


def with_unique_call_ids(response: Response, history: Sequence[Message]) -> Response:
    """`response` with every tool-call id that `history` (or an earlier call of the response) already uses
    replaced by a fresh one.

    Some servers number calls per response (`call_0` on every step); since results pair by id and the last
    result wins, a repeated id would hand an earlier call a later call's result. The id only has to be
    consistent within our own conversation: the server reads it back, it never looks it up.
    """
    if not response.tool_calls:
        return response
    used = {m.tool_call_id for m in history if m.role == "tool"}
    used.update(call.id for m in history for call in m.tool_calls)
    calls = []
    for call in response.tool_calls:
        if not call.id or call.id in used:
            call = dataclasses.replace(call, id=new_call_id())
        used.add(call.id)
        calls.append(call)
    if all(a is b for a, b in zip(calls, response.tool_calls, strict=True)):
        return response
    return dataclasses.replace(response, tool_calls=tuple(calls))
