"""What a request to the model holds, part by part, in tokens (local estimate): the system prompt, the project
instructions, the conversation's words, the tool results, the per-call context (the board's index) and the tool
definitions. It travels with each `context_status` event, which `/context` shows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .token_ledger import TokenLedger
from .tokens import count_tokens

__all__ = ["context_breakdown"]


def context_breakdown(messages: Sequence[Any], ledger: TokenLedger, *, instructions: str, call_context: int,
                      tools: int) -> dict[str, int]:
    counts = ledger.counts(messages)
    system = history = results = 0
    instructions_tokens = 0
    for message, tokens in zip(messages, counts, strict=True):
        if message.role == "system":
            system += tokens
        elif message.role == "tool":
            results += tokens
        else:
            history += tokens
            if instructions and message.role == "user" and instructions in (message.content or ""):
                instructions_tokens = count_tokens(instructions)
    history = max(0, history - instructions_tokens)
    return {"system": system, "instructions": instructions_tokens, "history": history, "tool_results": results,
            "call_context": call_context, "tools": tools}
