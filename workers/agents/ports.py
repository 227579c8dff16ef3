"""The tool layer's ports, implemented over the run's daemon channel and LLM engines.

Authorisation prompts and `ask_user_for_help` become `ask_user` requests that wait in the daemon
until an attached client answers; the reasoning tools' plain completions go through the routed engines.
The `Delegator` port needs no adapter: the channel's `run_child` is it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from yagent.ipc import event_data
from yagent.ipc.errors import RemoteError
from yagent.ipc.vocabulary import AUTHORIZE_ANSWERS, EventType, QuestionKind
from yagent.workers.kinds import RunContext
from yagent.workers.llm import CallOptions, Engine, LLMError, Message, Usage
from yagent.workers.tools import (
    AskReply,
    AskRequest,
    AuthDecision,
    AuthRequest,
    ToolResult,
)

__all__ = ["ChannelAsker", "ChannelAuthorizer", "EngineTextLLM"]

# How a client's authorisation answer maps to a decision; anything else is a refusal.
_DECISIONS = {"once": AuthDecision.ALLOW_ONCE, "session": AuthDecision.ALLOW_SESSION,
              "project": AuthDecision.ALLOW_PROJECT, "deny": AuthDecision.DENY}
AUTHORIZE_OPTIONS = list(AUTHORIZE_ANSWERS)


class ChannelAuthorizer:
    """The `Authorizer` port over the channel, and the `ApprovedOperations` one: it remembers which prompt
    allowed which call, so that a call the sandbox refuses can name that prompt to the daemon."""

    def __init__(self, ctx: RunContext) -> None:
        self._ctx = ctx
        self._allowed_at: dict[tuple[str, str, tuple[str, ...]], int] = {}  # (tool, summary, paths) -> prompt id

    async def authorize(self, request: AuthRequest) -> AuthDecision:
        prompt = f"{self._ctx.spec.agent} wants to run {request.summary}"
        if request.reasons:
            prompt += " — " + "; ".join(request.reasons)
        ask, answer = await self._ctx.channel.ask_user_numbered(
            QuestionKind.AUTHORIZE, prompt, options=AUTHORIZE_OPTIONS, default="once",
            details={"tool": request.tool, "summary": request.summary, "reasons": list(request.reasons),
                     "outside_paths": list(request.outside_paths), "dangerous": request.dangerous_reason,
                     "project_root": request.project_root})
        decision = _DECISIONS.get(str(answer.get("value", "")).strip().lower(), AuthDecision.DENY)
        if decision.allowed and request.outside_paths:
            if len(self._allowed_at) >= _KEPT_PROMPTS:
                self._allowed_at.pop(next(iter(self._allowed_at)))
            self._allowed_at[_key(request)] = ask
        return decision

    async def carry_out(self, request: AuthRequest, tool: str, args: Mapping[str, Any], call_id: str
                        ) -> ToolResult | None:
        ask = self._allowed_at.pop(_key(request), None)  # an answer is good for one operation
        if ask is None:
            return None
        try:
            done = await self._ctx.channel.carry_out_approved(ask, tool, dict(args), call_id)
        except RemoteError as exc:
            return ToolResult.error(f"{tool}: the user approved this, but yagentd did not carry it out: {exc}")
        return ToolResult(content=done.content, is_error=done.is_error, data=done.data or None)


# Prompts answered for outside paths whose calls have not come back to them yet; the oldest are forgotten.
_KEPT_PROMPTS = 64


def _key(request: AuthRequest) -> tuple[str, str, tuple[str, ...]]:
    return request.tool, request.summary, request.outside_paths


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
    """Plain completions for the reasoning tools, each tool on its own configured engine.

    Each call is reported like an agent's own step (`llm_call_start` / `llm_call_end`, with the tool named),
    so its tokens and cost count for the run in `yagent ps` and against the spending limits.
    """

    def __init__(self, engine_for_tool: Callable[[str], Engine], *,
                 emit: Callable[[str, dict[str, Any]], None] = lambda _t, _d: None,
                 cost_of: Callable[[str, str, Usage], float | None] = lambda _p, _m, _u: None) -> None:
        self._engine_for_tool = engine_for_tool
        self._emit = emit
        self._cost_of = cost_of

    async def complete_text(self, system: str, prompt: str, *, tool: str) -> str:
        engine = self._engine_for_tool(tool)
        started = time.monotonic()
        self._emit(EventType.LLM_CALL_START, event_data.llm_call_start(0, engine.provider, engine.model))
        try:
            async with engine.complete([Message.system(system), Message.user(prompt)], (),
                                       CallOptions()) as stream:
                response = await stream.final()
        except LLMError as exc:
            self._emit(EventType.LLM_CALL_END, event_data.llm_call_end(
                0, engine.provider, engine.model, None, time.monotonic() - started, error=str(exc), tool=tool))
            raise
        usage = response.usage
        self._emit(EventType.LLM_CALL_END, event_data.llm_call_end(
            0, response.provider, response.model,
            event_data.usage_data(usage.total_input_tokens, usage.output_tokens, usage.cached_input_tokens,
                                  usage.estimated),
            time.monotonic() - started, stop_reason=str(response.finish_reason),
            cost_usd=self._cost_of(response.provider, response.model, usage), tool=tool))
        return response.text
