"""Run-control tools: agent_exit (finish with a hand-off), ask_user_for_help, load_tool."""

from __future__ import annotations

import copy
import json

from yagent.ipc.vocabulary import WRITABLE_HANDOFF_STATUSES, QuestionKind

from .context import AskRequest
from .registry import register
from .result import ToolResult
from .spec import AuthPolicy, Effect, Invocation, ToolSpec, Truncation
from .surface import LOAD_TOOL

# What the model may ask the user; authorisation prompts (QuestionKind.AUTHORIZE) are the guard's.
ASK_KINDS = (QuestionKind.CONFIRM, QuestionKind.SELECT, QuestionKind.INPUT)


async def agent_exit(inv: Invocation) -> ToolResult:
    # Echo every argument verbatim: the loop reads the hand-off from `data`, and a parameter this tool
    # dropped would vanish silently at the moment the run ends.
    echoed = copy.deepcopy(dict(inv.args))
    summary = str(inv.args.get("summary", ""))
    return ToolResult(
        content=json.dumps({"finished": True, "summary": summary}, ensure_ascii=False),
        data=echoed,
        stop_run=True,
    )


register(
    ToolSpec(
        name="agent_exit",
        description=(
            "Finish your task. Call it once, after your final answer is written. `summary` is what the "
            "caller reads first; `handoff` records the conclusion, the facts it rests on (each with where "
            "it was found), open questions and a status (ok, partial or error)."
        ),
        parameters={
            "type": "object",
            "properties": {
                "summary": {"type": "string", "description": (
                    "The outcome in one or two sentences. The full answer or report goes in your reply text, "
                    "written before this call.")},
                "handoff": {
                    "type": "object",
                    "description": "Structured hand-off for the agent that delegated this task.",
                    "properties": {
                        "conclusion": {"type": "string", "description": "The answer in one or two sentences."},
                        "facts": {
                            "type": "array",
                            "description": "Facts the conclusion rests on.",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "claim": {"type": "string", "description": "The fact."},
                                    "where": {"type": "string", "description": "File:line, command or URL."},
                                },
                                "required": ["claim", "where"],
                            },
                        },
                        "open_questions": {
                            "type": "array",
                            "description": "What is still unknown or undecided.",
                            "items": {"type": "string"},
                        },
                        "status": {
                            "type": "string",
                            "enum": [s.value for s in WRITABLE_HANDOFF_STATUSES],
                            "description": "ok: done; partial: some of it; error: could not do it.",
                        },
                    },
                    "required": ["conclusion", "status"],
                },
            },
            "required": ["summary"],
            # Agents may add their own fields (e.g. a blueprint); they travel back untouched in `data`.
            "additionalProperties": True,
        },
        effects=Effect.CONTROL,
        executor=agent_exit,
        serial=True,
        auth=AuthPolicy.NEVER,
        truncation=Truncation.NEVER,
    )
)


async def ask_user_for_help(inv: Invocation) -> ToolResult:
    asker = inv.ctx.asker
    if asker is None:
        return ToolResult.error(
            "No user is attached to this run, so nobody can answer. Decide yourself, state the assumption "
            "you made, and continue."
        )
    kind = QuestionKind(inv.args["kind"])
    options = tuple(str(o) for o in inv.args.get("options") or ())
    if kind is QuestionKind.SELECT and len(options) < 2:
        return ToolResult.error("kind=select needs at least two `options` to choose from.")
    default = inv.args.get("default")
    answer = await asker.ask(
        AskRequest(kind=kind, prompt=str(inv.args["question"]), options=options, default=default and str(default))
    )
    data = {"kind": kind.value, "answer": answer.value, "dismissed": answer.dismissed}
    if answer.dismissed:
        return ToolResult.ok("The user closed the question without answering. Proceed with your best judgement "
                             "and say what you assumed.", data=data)
    return ToolResult.ok(f"The user answered: {answer.value}", data=data)


register(
    ToolSpec(
        name="ask_user_for_help",
        description=(
            "Ask the user when you are blocked on a decision only they can make or on information you cannot "
            "find. kind=confirm asks yes/no, kind=select offers `options`, kind=input takes free text. Do not "
            "ask for things you can find out yourself."
        ),
        parameters={
            "type": "object",
            "properties": {
                "kind": {"type": "string", "enum": [k.value for k in ASK_KINDS], "description": "Type of answer."},
                "question": {"type": "string", "description": "The question, self-contained and specific."},
                "options": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Choices for kind=select.",
                },
                "default": {"type": "string", "description": "Suggested answer, shown preselected."},
            },
            "required": ["kind", "question"],
            "additionalProperties": False,
        },
        effects=Effect.INTERACT,
        executor=ask_user_for_help,
        serial=True,
        auth=AuthPolicy.NEVER,
        truncation=Truncation.NEVER,
    )
)


async def load_tool(inv: Invocation) -> ToolResult:
    surface = inv.surface
    if surface is None:
        return ToolResult.error("load_tool needs the run's tool surface, and none was given.")
    names = [str(n) for n in inv.args["names"]]
    if not names:
        deferred = ", ".join(s.name for s in surface.deferred()) or "none"
        return ToolResult.error(f"No tool names given; nothing was loaded. Deferred tools you can load: {deferred}.")
    outcome = surface.materialize(names)
    parts = []
    if outcome.loaded:
        parts.append(f"Loaded {', '.join(outcome.loaded)}: call them from your next step.")
    if outcome.already:
        parts.append(f"Already available: {', '.join(outcome.already)}.")
    data = {"loaded": list(outcome.loaded), "already": list(outcome.already), "unknown": list(outcome.unknown)}
    if outcome.unknown:
        deferred = ", ".join(s.name for s in surface.deferred()) or "none"
        parts.append(f"Unknown tools: {', '.join(outcome.unknown)}. Deferred tools you can load: {deferred}.")
        return ToolResult.error(" ".join(parts), data=data)
    return ToolResult.ok(" ".join(parts), data=data)


register(
    ToolSpec(
        name=LOAD_TOOL,
        description=(
            "Load deferred tools by name (see the deferred tools list in your instructions). Their full "
            "parameters become available from your next step."
        ),
        parameters={
            "type": "object",
            "properties": {
                "names": {"type": "array", "items": {"type": "string"}, "description": "Tool names to load."},
            },
            "required": ["names"],
            "additionalProperties": False,
        },
        effects=Effect.CONTROL,
        executor=load_tool,
        # It changes what the surface offers, so calls after it must see its effect.
        serial=True,
        auth=AuthPolicy.NEVER,
        truncation=Truncation.NEVER,
    )
)
