"""Reasoning tools: thinking (a recorded reflection) and three side-model calls through `ctx.llm`:
deepthinking (draft, then critique), design (a plan before code is written) and micro_agent (one small
self-contained sub-task in a fresh context).
"""

from __future__ import annotations

import logging

from .context import TextLLM
from .registry import register
from .result import ToolResult
from .spec import AuthPolicy, Effect, Frequency, Invocation, ToolSpec, Truncation

log = logging.getLogger(__name__)

_NO_LLM = (
    "{tool} is unavailable: this run has no side model for tools. Reason it through in your own reply "
    "instead."
)
_NO_ANSWER = "{tool} got no answer: {why}. Nothing was produced; reason it through in your own reply instead."


class _NoAnswer(Exception):
    """The side model failed or answered with no text; the message says which, for the calling model."""


async def _ask(llm: TextLLM, tool: str, system: str, prompt: str) -> str:
    """One side-model completion. A provider failure is an expected outcome (rate limits, outages), so it
    becomes `_NoAnswer` rather than a traceback; cancellation propagates."""
    try:
        text = await llm.complete_text(system, prompt, tool=tool)
    except Exception as exc:
        log.warning("%s: side model call failed: %s: %s", tool, type(exc).__name__, exc)
        raise _NoAnswer(f"the side model call failed ({type(exc).__name__}: {exc})") from exc
    if not str(text or "").strip():
        # Typically a reasoning model that spent its whole output budget thinking.
        raise _NoAnswer("the side model answered with no text")
    return str(text)

ANALYST_SYSTEM = (
    "You are a careful analyst helping another agent. Work through the question step by step: restate what "
    "is being asked, list the facts given and the assumptions you must make, consider at least two "
    "approaches, and reach a conclusion. Be concrete and concise."
)
CRITIC_SYSTEM = (
    "You review a draft analysis written for another agent. Check it for wrong facts, gaps, unstated "
    "assumptions and simpler alternatives. Then write the final answer: the conclusion first, then the "
    "reasoning that supports it and the open risks. Do not mention that a draft existed."
)
DESIGN_SYSTEM = (
    "You are a senior engineer writing a short design before any code is changed. Answer with these "
    "sections: Goal; Approach (and the alternative you rejected, with why); Files and interfaces to change; "
    "Steps in order; Risks and edge cases; How to verify. Prefer the smallest change that fully meets the "
    "goal."
)
MICRO_SYSTEM = (
    "You solve one small, self-contained task for another agent. You see only the task and the input given "
    "here. Return just the result it asked for (code, text, data) with at most a short note on assumptions."
)


def _context_block(inv: Invocation) -> str:
    context = str(inv.args.get("context") or "").strip()
    return f"\n\nContext:\n{context}" if context else ""


async def thinking(inv: Invocation) -> ToolResult:
    return ToolResult.ok("Thought recorded.", data={"thought": str(inv.args["thought"])})


register(
    ToolSpec(
        name="thinking",
        description=(
            "Write down your reasoning before acting: what you know, what you will do next and why. It has "
            "no effect besides keeping the thought in the conversation."
        ),
        parameters={
            "type": "object",
            "properties": {"thought": {"type": "string", "description": "Your reasoning, in plain words."}},
            "required": ["thought"],
            "additionalProperties": False,
        },
        effects=Effect.REFLECT,
        executor=thinking,
        auth=AuthPolicy.NEVER,
        truncation=Truncation.NEVER,
    )
)


async def deepthinking(inv: Invocation) -> ToolResult:
    llm = inv.ctx.llm
    if llm is None:
        return ToolResult.error(_NO_LLM.format(tool="deepthinking"))
    question = str(inv.args["question"])
    try:
        draft = await _ask(llm, "deepthinking", ANALYST_SYSTEM, f"Question:\n{question}{_context_block(inv)}")
    except _NoAnswer as exc:
        return ToolResult.error(_NO_ANSWER.format(tool="deepthinking", why=exc))
    try:
        final = await _ask(llm, "deepthinking", CRITIC_SYSTEM,
                           f"Question:\n{question}{_context_block(inv)}\n\nDraft analysis:\n{draft}")
    except _NoAnswer as exc:
        # The draft is already paid for and usually sound: hand it over, saying it was not reviewed.
        return ToolResult.ok(f"[draft analysis, not reviewed: {exc}]\n{draft}",
                             data={"draft": draft, "reviewed": False})
    return ToolResult.ok(final, data={"draft": draft})


register(
    ToolSpec(
        name="deepthinking",
        description=(
            "Think hard about a difficult question with a separate model: it drafts an analysis, critiques "
            "it and returns the reviewed conclusion. Use it for decisions with several plausible answers; "
            "give it every fact it needs in `context`, it cannot see the conversation or the files."
        ),
        parameters={
            "type": "object",
            "properties": {
                "question": {"type": "string", "description": "The question or decision to think through."},
                "context": {"type": "string", "description": "Facts, constraints and excerpts it should use."},
            },
            "required": ["question"],
            "additionalProperties": False,
        },
        effects=Effect.LLM,
        executor=deepthinking,
        auth=AuthPolicy.NEVER,
        truncation=Truncation.LATE,
    )
)


async def design(inv: Invocation) -> ToolResult:
    llm = inv.ctx.llm
    if llm is None:
        return ToolResult.error(_NO_LLM.format(tool="design"))
    parts = [f"Goal:\n{inv.args['goal']}"]
    if inv.args.get("constraints"):
        parts.append(f"Constraints:\n{inv.args['constraints']}")
    try:
        text = await _ask(llm, "design", DESIGN_SYSTEM, "\n\n".join(parts) + _context_block(inv))
    except _NoAnswer as exc:
        return ToolResult.error(_NO_ANSWER.format(tool="design", why=exc))
    return ToolResult.ok(text)


register(
    ToolSpec(
        name="design",
        description=(
            "Get a short design before a non-trivial change: approach, files to touch, ordered steps, risks "
            "and how to verify. Give it the relevant code excerpts in `context`; it cannot read files."
        ),
        parameters={
            "type": "object",
            "properties": {
                "goal": {"type": "string", "description": "What the change must achieve."},
                "constraints": {"type": "string", "description": "Rules the design must respect."},
                "context": {"type": "string", "description": "Relevant code excerpts and facts."},
            },
            "required": ["goal"],
            "additionalProperties": False,
        },
        effects=Effect.LLM | Effect.DRAFT,
        executor=design,
        frequency=Frequency.COLD,
        auth=AuthPolicy.NEVER,
        truncation=Truncation.LATE,
    )
)


async def micro_agent(inv: Invocation) -> ToolResult:
    llm = inv.ctx.llm
    if llm is None:
        return ToolResult.error(_NO_LLM.format(tool="micro_agent"))
    prompt = f"Task:\n{inv.args['task']}"
    if inv.args.get("input"):
        prompt += f"\n\nInput:\n{inv.args['input']}"
    try:
        return ToolResult.ok(await _ask(llm, "micro_agent", MICRO_SYSTEM, prompt))
    except _NoAnswer as exc:
        return ToolResult.error(_NO_ANSWER.format(tool="micro_agent", why=exc))


register(
    ToolSpec(
        name="micro_agent",
        description=(
            "Hand one small, self-contained sub-task (write a regex, convert data, draft a function) to a "
            "separate model with a fresh context, and get its result back. Include all the input it needs."
        ),
        parameters={
            "type": "object",
            "properties": {
                "task": {"type": "string", "description": "What to produce, precisely."},
                "input": {"type": "string", "description": "The data or code the task works on."},
            },
            "required": ["task"],
            "additionalProperties": False,
        },
        effects=Effect.LLM | Effect.DRAFT,
        executor=micro_agent,
        frequency=Frequency.COLD,
        auth=AuthPolicy.NEVER,
        truncation=Truncation.LATE,
    )
)
