"""The history repair before a resumed run's first model call: a provider never sees a dangling tool call.

A run stopped mid-tool (a `kill -9`, a lost daemon) can leave a call without a result. Resuming, that call
gets an explicit result saying it was interrupted and may be re-issued — not the engine's generic "no
result was recorded" and never a failure, so the model does not take an interruption for a failed tool.
Pairing is the engine's own last-wins rule (`workers.llm.repair_tool_pairing`); the order is then checked.
"""

from __future__ import annotations

from collections.abc import Sequence

from yagent.workers.llm import Message, repair_tool_pairing

__all__ = ["INTERRUPTED_TOOL_RESULT", "ResumeOrderError", "pairing_problems", "repair_for_resume"]

INTERRUPTED_TOOL_RESULT = ("Interrupted: this tool call was interrupted before it finished (the run stopped), "
                           "so it has no result; it may be re-issued if its result is still needed.")


class ResumeOrderError(ValueError):
    """The repaired history still pairs a call and a result wrongly: a bug in the repair, never sent on."""


def pairing_problems(messages: Sequence[Message]) -> list[str]:
    """Every place where a tool result does not follow its call in call order (empty when all is well)."""
    problems: list[str] = []
    expected: list[str] = []
    for index, message in enumerate(messages):
        if message.role == "tool":
            if not expected or expected[0] != message.tool_call_id:
                problems.append(f"message {index}: result for {message.tool_call_id!r} where "
                                f"{expected[0] if expected else 'no result'!r} was due")
            else:
                expected.pop(0)
            continue
        if expected:
            problems.append(f"message {index}: {message.role} message before the results of {expected}")
            expected = []
        if message.role == "assistant":
            expected = [call.id for call in message.tool_calls]
    if expected:
        problems.append(f"end of history: no result for {expected}")
    return problems


def repair_for_resume(messages: Sequence[Message]) -> list[Message]:
    """`messages` with every call answered (interrupted ones say so), orphans dropped, order checked."""
    repaired = repair_tool_pairing(messages, missing=INTERRUPTED_TOOL_RESULT)
    problems = pairing_problems(repaired)
    if problems:
        raise ResumeOrderError("tool pairing still wrong after repair: " + "; ".join(problems[:5]))
    return repaired
