"""The Meta agent: one model call that designs a custom agent, then its first run.

The design (JSON) is validated — snake_case name not taken by a built-in, tools only from the
palette the Director itself holds, non-empty prompt — and registered for the rest of the task; the
Director then sees it as `delegate_<name>`. The new agent runs once right away (max 15 steps by
default) on the task the design restates, as a child of this run.

A replayed Meta run (its delegation was cut off by a stop) whose design was registered does not design again:
the first run it had started is replayed in its place, and its report is Meta's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from yagent.ipc.messages import REPLAY_OPTION, RunOutcome
from yagent.ipc.provider_config import ProviderConfigError
from yagent.ipc.state_layout import task_dir
from yagent.ipc.vocabulary import HandoffStatus, RunStatus, StopReason
from yagent.workers.kinds import RunContext, agent_kind
from yagent.workers.llm import LLMError, Message
from yagent.workers.memory.replay import find_child_rollout, first_record
from yagent.workers.tools import YoloLevel, palette
from yagent.workers.tools.handoff import format_for_parent
from yagent.workers.tools.validation import CUSTOM_TARGET_PREFIX

from .custom_agents import CustomAgentRegistry, Design, DesignError, parse_design
from .loop import LoopPolicy, LoopState, call_model_with_retries
from .prompts import render_prompt
from .runtime import AgentRun
from .subagents import task_text

__all__ = ["DESIGN_ATTEMPTS", "designed_before_the_stop", "first_run_kind", "meta"]

DESIGN_ATTEMPTS = 5


def _palette_text(yolo: YoloLevel) -> str:
    # Only what the custom agent could hold in this task: under --full-yolo nobody answers questions.
    return "\n".join(f"- {spec.name}: {spec.description.splitlines()[0]}" for spec in palette("custom", yolo=yolo))


@agent_kind("meta", model_loop=True)
async def meta(ctx: RunContext) -> RunOutcome:
    designed = designed_before_the_stop(ctx)
    if designed is not None:
        # Its design step had finished: it is not asked again; the first run it had started picks up instead.
        header = (f"Custom agent `delegate_{designed.name}` was designed before the stop: {designed.description}\n"
                  f"Tools: {', '.join(designed.tools) or 'none besides agent_exit'}.")
        return await _first_run(ctx, designed, header, replay=True)
    try:
        run = AgentRun(ctx, "meta")
    except ProviderConfigError as exc:
        return RunOutcome(status=RunStatus.FAILED, stop_reason=StopReason.LLM_ERROR,
                            error=f"no usable LLM provider for meta: {exc}")  # it says what to do
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
    return await _first_run(ctx, design, header, replay=False)


async def _first_run(ctx: RunContext, design: Design, header: str, *, replay: bool) -> RunOutcome:
    outcome = await ctx.channel.run_child(f"custom:{design.name}", design.task, ctx.spec.call_id or "", "",
                                          replay=replay)
    return RunOutcome(
        status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT,
        output=f"{header}\n\nFirst run on: {design.task}\n\n{format_for_parent(outcome)}",
        handoff=_first_run_handoff(outcome),
        data={"custom_agent": design.name, "first_run": outcome.to_wire()})


def designed_before_the_stop(ctx: RunContext) -> Design | None:
    """On a replay of an interrupted Meta run: the design it had registered, named by the first run it had
    started; None when it stopped before that (it designs again then: its model call never returned)."""
    info = ctx.spec.options.get(REPLAY_OPTION)
    interrupted = str(info.get("run") or "") if isinstance(info, dict) else ""
    if not interrupted or not ctx.spec.call_id:
        return None
    kind = first_run_kind(task_dir(ctx.home, ctx.spec.task), ctx.spec.call_id, interrupted)
    return CustomAgentRegistry(ctx.home, ctx.spec.task).get(kind[len(CUSTOM_TARGET_PREFIX):]) if kind else None


def first_run_kind(task: Path, call_id: str, meta_run: str) -> str | None:
    """The kind (`custom:<name>`) of the first run Meta run `meta_run` started for its call `call_id`, from that
    run's rollout; None when it started none (its rollout names its agent, so the design it ran is known)."""
    path = find_child_rollout(task, call_id, meta_run)
    record = first_record(path) if path is not None else None
    agent = str(record["payload"].get("agent") or "") if record is not None else ""
    return agent if agent.startswith(CUSTOM_TARGET_PREFIX) else None


def _first_run_handoff(outcome: RunOutcome) -> dict[str, Any] | None:
    """The parent judges Meta by the work done: the first run's hand-off, or one saying it did not finish."""
    if outcome.status == RunStatus.DONE:
        return outcome.handoff if isinstance(outcome.handoff, dict) else None
    reason = outcome.error or outcome.stop_reason or outcome.status
    return {"conclusion": f"the agent was registered, but its first run did not finish: {reason}",
            "status": HandoffStatus.ERROR}
