"""Scripted implementations of the tool layer's ports (authorizer, asker, delegator, side LLM).

Production code takes the same protocols; these record what they were asked and answer from a script.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yagent.ipc.messages import RunOutcome
from yagent.ipc.vocabulary import RunStatus, StopReason
from yagent.workers.tools import (
    AskReply,
    AskRequest,
    AuthDecision,
    AuthRequest,
    ToolCall,
    ToolContext,
    ToolResult,
    build_surface,
    invoke_tool,
)


@dataclass
class ScriptedAuthorizer:
    decision: AuthDecision = AuthDecision.ALLOW_ONCE
    requests: list[AuthRequest] = field(default_factory=list)

    async def authorize(self, request: AuthRequest) -> AuthDecision:
        self.requests.append(request)
        return self.decision


@dataclass
class ScriptedAsker:
    answer: AskReply = field(default_factory=lambda: AskReply("yes"))
    questions: list[AskRequest] = field(default_factory=list)

    async def ask(self, request: AskRequest) -> AskReply:
        self.questions.append(request)
        return self.answer


@dataclass
class ScriptedDelegator:
    outcome: RunOutcome = field(default_factory=lambda: RunOutcome(status=RunStatus.DONE,
                                                                   stop_reason=StopReason.AGENT_EXIT,
                                                                   output="child report"))
    calls: list[dict[str, Any]] = field(default_factory=list)

    async def run_child(self, agent: str, task: str, call_id: str, context: str, *,
                        replay: bool = False) -> RunOutcome:
        self.calls.append({"agent": agent, "task": task, "call_id": call_id, "context": context, "replay": replay})
        return self.outcome


@dataclass
class ScriptedLLM:
    """Replies in order; a reply that is an exception is raised instead (a provider error)."""

    replies: list[str | Exception]
    prompts: list[dict[str, str]] = field(default_factory=list)

    async def complete_text(self, system: str, prompt: str, *, tool: str) -> str:
        self.prompts.append({"system": system, "prompt": prompt, "tool": tool})
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply


def make_ctx(root: Path, tmp: Path, **kwargs: Any) -> ToolContext:
    """A context with its scratch dir and settings file inside the test's temp dir."""
    kwargs.setdefault("scratch_dir", tmp / "scratch")
    kwargs.setdefault("settings_path", tmp / "home" / "settings.json")
    return ToolContext(project_root=root, run_id="test-run", **kwargs)


def call_tool(
    ctx: ToolContext, name: str, args: dict[str, Any] | str, *, agent: str = "coding", call_id: str = "c1"
) -> ToolResult:
    """One call through the production path (surface -> invoke) on a real agent surface."""
    surface = build_surface(agent, yolo=ctx.yolo)
    surface.materialize(s.name for s in surface.deferred())
    return asyncio.run(invoke_tool(surface, ToolCall(call_id, name, args), ctx))
