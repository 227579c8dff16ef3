"""The Meta agent: one model call that designs a custom agent, then its first run.

The design (JSON) is validated — snake_case name not taken by a built-in, tools only from the
palette the Director itself holds, non-empty prompt — and registered for the rest of the task; the
Director then sees it as `delegate_<name>`. The new agent runs once right away (max 15 steps by
default) on the task the design restates, as a child of this run.
"""

from __future__ import annotations

from typing import Any

from yagent.ipc.messages import RunOutcome
from yagent.ipc.provider_config import ProviderConfigError
from yagent.ipc.vocabulary import HandoffStatus, RunStatus, StopReason
from yagent.workers.kinds import RunContext, agent_kind
from yagent.workers.llm import LLMError, Message
from yagent.workers.tools import YoloLevel, palette
from yagent.workers.tools.handoff import format_for_parent

from .custom_agents import CustomAgentRegistry, DesignError, parse_design
from .loop import LoopPolicy, LoopState, call_model_with_retries
from .prompts import render_prompt
from .runtime import AgentRun
from .subagents import task_text

__all__ = ["DESIGN_ATTEMPTS", "meta"]

DESIGN_ATTEMPTS = 5


def _palette_text(yolo: YoloLevel) -> str:
    # Only what the custom agent could hold in this task: under --full-yolo nobody answers questions.
    return "\n".join(f"- {spec.name}: {spec.description.splitlines()[0]}" for spec in palette("custom", yolo=yolo))


@agent_kind("meta")
async def meta(ctx: RunContext) -> RunOutcome:
    try:
        run = AgentRun(ctx, "meta")
    except ProviderConfigError as exc:
        return RunOutcome(status=RunStatus.FAILED, stop_reason=StopReason.LLM_ERROR,
                            error=f"no usable LLM provider for meta: {exc} — run `yagent setup`")
    request = task_text(ctx)
    messages = [Message.system(render_prompt("meta", lang=run.lang, palette=_palette_text(run.yolo))),
                Message.user(request)]
    config = run.loop_config(messages, LoopPolicy())
    state = LoopState()
    problem = ""
    try:
        for _attempt in range(DESIGN_ATTEMPTS):
            await ctx.step_boundary()
            state.step += 1
            try:
                response = await call_model_with_retries(config, state, messages)
            except LLMError as exc:
                return RunOutcome(status=RunStatus.FAILED, stop_reason=StopReason.LLM_ERROR, error=str(exc))
            messages.append(response.message())
            try:
                design = parse_design(response.text, request)
                break
            except DesignError as exc:
                problem = str(exc)
                messages.append(Message.user(f"That design cannot be used: {problem}. Reply with the corrected "
                                             "JSON object only."))
        else:
            return RunOutcome(status=RunStatus.FAILED, stop_reason=StopReason.MAX_STEPS,
                                error=f"no usable agent design after {DESIGN_ATTEMPTS} attempts: {problem}")
    finally:
        await run.close()

    earlier = CustomAgentRegistry(ctx.home, ctx.spec.task).add(design)
    tools = ", ".join(design.tools) or "none besides agent_exit"
    verb = "Replaced the earlier design of" if earlier is not None else "Registered"
    header = (f"{verb} custom agent `delegate_{design.name}` for the rest of this task: {design.description}\n"
              f"Tools: {tools}.")
    outcome = await ctx.channel.run_child(f"custom:{design.name}", design.task, ctx.spec.call_id or "", "")
    return RunOutcome(
        status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT,
        output=f"{header}\n\nFirst run on: {design.task}\n\n{format_for_parent(outcome)}",
        handoff=_first_run_handoff(outcome),
        data={"custom_agent": design.name, "first_run": outcome.to_wire()})


def _first_run_handoff(outcome: RunOutcome) -> dict[str, Any] | None:
    """The parent judges Meta by the work done: the first run's hand-off, or one saying it did not finish."""
    if outcome.status == RunStatus.DONE:
        return outcome.handoff if isinstance(outcome.handoff, dict) else None
    reason = outcome.error or outcome.stop_reason or outcome.status
    return {"conclusion": f"the agent was registered, but its first run did not finish: {reason}",
            "status": HandoffStatus.ERROR}
