"""The tool layer's ports, implemented over the run's daemon channel and LLM engines.

Authorisation prompts and `ask_user_for_help` become `ask_user` requests that wait in the daemon
until an attached client answers; the reasoning tools' plain completions go through the routed engines.
The `Delegator` port needs no adapter: the channel's `run_child` is it.
"""

from __future__ import annotations

from collections.abc import Callable

from yagent.ipc.vocabulary import AUTHORIZE_ANSWERS, QuestionKind
from yagent.workers.kinds import RunContext
from yagent.workers.llm import CallOptions, Engine, Message
from yagent.workers.tools import (
    AskReply,
    AskRequest,
    AuthDecision,
    AuthRequest,
)

__all__ = ["ChannelAsker", "ChannelAuthorizer", "EngineTextLLM"]

# How a client's authorisation answer maps to a decision; anything else is a refusal.
_DECISIONS = {"once": AuthDecision.ALLOW_ONCE, "session": AuthDecision.ALLOW_SESSION,
              "project": AuthDecision.ALLOW_PROJECT, "deny": AuthDecision.DENY}
AUTHORIZE_OPTIONS = list(AUTHORIZE_ANSWERS)


class ChannelAuthorizer:
    def __init__(self, ctx: RunContext) -> None:
        self._ctx = ctx

    async def authorize(self, request: AuthRequest) -> AuthDecision:
        prompt = f"{self._ctx.spec.agent} wants to run {request.summary}"
        if request.reasons:
            prompt += " — " + "; ".join(request.reasons)
        answer = await self._ctx.ask_user(
            QuestionKind.AUTHORIZE, prompt, options=AUTHORIZE_OPTIONS, default="once",
            details={"tool": request.tool, "summary": request.summary, "reasons": list(request.reasons),
                     "outside_paths": list(request.outside_paths), "dangerous": request.dangerous_reason,
                     "project_root": request.project_root})
        return _DECISIONS.get(str(answer.get("value", "")).strip().lower(), AuthDecision.DENY)


class ChannelAsker:
    def __init__(self, ctx: RunContext) -> None:
        self._ctx = ctx

    async def ask(self, request: AskRequest) -> AskReply:
        answer = await self._ctx.ask_user(request.kind, request.prompt, options=list(request.options),
                                          default=request.default)
        if answer.get("cancelled") or "value" not in answer:
            return AskReply(value="", dismissed=True)
        return AskReply(value=confirm_value(request, str(answer["value"])))


def confirm_value(request: AskRequest, value: str) -> str:
    """A confirm answer as the model should read it: the option the user picked, else yes or no."""
    if request.kind is not QuestionKind.CONFIRM:
        return value
    picked = value.strip().lower()
    for option in request.options:  # custom wording (Deploy / Abort) is answered with the option itself
        if option.strip().lower() == picked:
            return option
    if request.options and picked in ("y", "n"):  # the dialog's y / n keys stand for the two options
        return request.options[0 if picked == "y" or len(request.options) < 2 else 1]
    return "yes" if picked in ("y", "yes", "true", "ok", "1") else "no"


class EngineTextLLM:
    """Plain completions for the reasoning tools, each tool on its own configured engine."""

    def __init__(self, engine_for_tool: Callable[[str], Engine]) -> None:
        self._engine_for_tool = engine_for_tool

    async def complete_text(self, system: str, prompt: str, *, tool: str) -> str:
        engine = self._engine_for_tool(tool)
        async with engine.complete([Message.system(system), Message.user(prompt)], (),
                                   CallOptions()) as stream:
            response = await stream.final()
        return response.text
