"""Reasoning tools: thinking (a recorded reflection) and three side-model calls through `ctx.llm`:
deepthinking (draft, then critique), design (a plan before code is written) and micro_agent (one small
self-contained sub-task in a fresh context).
"""

from __future__ import annotations

from .registry import register
from .result import ToolResult
from .spec import AuthPolicy, Effect, Frequency, Invocation, ToolSpec, Truncation

_NO_LLM = (
    "{tool} is unavailable: this run has no side model for tools. Reason it through in your own reply "
    "instead."
)

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
    draft = await llm.complete_text(ANALYST_SYSTEM, f"Question:\n{question}{_context_block(inv)}", tool="deepthinking")
    final = await llm.complete_text(
        CRITIC_SYSTEM,
        f"Question:\n{question}{_context_block(inv)}\n\nDraft analysis:\n{draft}",
        tool="deepthinking",
    )
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
    text = await llm.complete_text(DESIGN_SYSTEM, "\n\n".join(parts) + _context_block(inv), tool="design")
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
    return ToolResult.ok(await llm.complete_text(MICRO_SYSTEM, prompt, tool="micro_agent"))


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
