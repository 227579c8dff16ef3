"""The delegated agents: Coding, Repo, Chat, DevOps and Meta-designed custom agents.

Each runs the shared loop once on the task the parent handed over and ends with `agent_exit`
(every agent is configured to stop on it — `AGENT_SPECS` is pinned by a test). What differs is the
prompt, the tool profile, and what a reply without tool calls earns: Coding is told to keep working
(twice at most), Repo and custom agents are told to deliver through `agent_exit` (once).

Each run is a run of a continuable sub-agent: it takes its configuration signature once its stable prompt is
written, and a follow-up (`FOLLOWUP_OPTION`) goes on from its sub-agent's conversation when that signature is
the one the conversation was written under (`followup.py`). The ReAct soft cap is registered before the first
step: at its step budget the agent is told to wrap up (`WRAP_UP`) and gets one more step.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from yagent.ipc.messages import FOLLOWUP_OPTION, REPLAY_OPTION, RunOutcome
from yagent.ipc.provider_config import ProviderConfigError
from yagent.ipc.vocabulary import RunStatus, StopReason
from yagent.workers.blueprint.completion import commit_blueprint
from yagent.workers.kinds import RunContext, agent_kind
from yagent.workers.llm import Message
from yagent.workers.tools.handoff import BLUEPRINT_ACCOUNT
from yagent.workers.tools.validation import CUSTOM_TARGET_PREFIX

from .custom_agents import CustomAgentRegistry
from .delegation_replay import ReplayStart, assess_delegation, degraded_report, finished_steps, stopped_record
from .followup import FollowupStart, continue_subagent, previous_conversation_written
from .loop import LoopPolicy, LoopState
from .prompts import code_tools_passage, render_prompt
from .runtime import AgentRun, McpRequiredMissing
from .turn_resume import replay_interrupted_delegations

__all__ = ["AGENT_SPECS", "WRAP_UP", "AgentSpec", "ReminderPolicy", "replay_role", "run_subagent"]

KEEP_WORKING = (
    "You replied without calling a tool, and the task is not finished until you call agent_exit. If there is "
    "more to explore, edit, run or verify, do it now with your tools. If you are done, write your report and "
    "call agent_exit in the same reply."
)
# The ReAct soft cap's words: what a sub-agent is told when its step budget is spent (one step left to hand off).
WRAP_UP = (
    "You have used your step budget ({steps} steps). Start nothing new: in this one last step write your report "
    "of what is done and what is not, and call agent_exit with a handoff (status partial if the task is not "
    "finished, open_questions naming what is left) so the agent that delegated to you can go on from there."
)
DELIVER_NOW = (
    "Your answer is written but not delivered: call agent_exit now, in this reply, with your report as the "
    "reply text, a one- or two-sentence summary and a handoff (conclusion, facts with where, open_questions, "
    "status). Do not redo the work."
)


@dataclass(frozen=True)
class AgentSpec:
    role: str  # tool profile and configuration name
    prompt: str
    reminder: str | None
    reminder_limit: int
    stop_on_exit: bool = True
    model_role: str = ""  # the role its model is configured under ("" : `role`); a workflow node's own name


AGENT_SPECS: dict[str, AgentSpec] = {
    "coding": AgentSpec("coding", "coding", KEEP_WORKING, 2),
    "repo": AgentSpec("repo", "repo", DELIVER_NOW, 1),
    "chat": AgentSpec("chat", "chat", None, 0),
    "devops": AgentSpec("devops", "devops", None, 0),
    "browser": AgentSpec("browser", "browser", DELIVER_NOW, 1),
    "custom": AgentSpec("custom", "custom", DELIVER_NOW, 1),
}


class ReminderPolicy(LoopPolicy):
    def __init__(self, reminder: str | None, limit: int) -> None:
        self.reminder = reminder
        self.limit = limit

    def reminder_for_plain_text(self, state: LoopState) -> str | None:
        if self.reminder is None or state.reminders_sent >= self.limit:
            return None
        return self.reminder


def task_text(ctx: RunContext) -> str:
    text = ctx.spec.input
    if ctx.spec.context:
        text += f"\n\n# Context from the agent that delegated this task\n\n{ctx.spec.context}"
    return text


async def run_subagent(ctx: RunContext, spec: AgentSpec, *, system_prompt: str | None = None,
                       pick: list[str] | None = None) -> RunOutcome:
    try:
        run = AgentRun(ctx, spec.role, pick=pick, model_role=spec.model_role)
    except ProviderConfigError as exc:
        return RunOutcome(status=RunStatus.FAILED, stop_reason=StopReason.LLM_ERROR,
                            error=f"no usable LLM provider for {ctx.spec.agent}: {exc}")  # it says what to do
    # Its model clients are closed after its result has reached the daemon, on every way out (where the worker
    # can: else here, before the result).
    closed_later = ctx.after_result(run.close)
    if closed_later and run.recorder is not None:
        run.recorder.end_after_result()  # so is its rollout's end (checkpoint, terminal record): `close` writes it
    try:
        return await _run_subagent(ctx, spec, run, system_prompt)
    finally:
        if run.recorder is not None:
            run.recorder.writer.start()  # its lock is held before its result goes out, however the run returned
        if not closed_later:
            await run.close()


async def _run_subagent(ctx: RunContext, spec: AgentSpec, run: AgentRun, system_prompt: str | None) -> RunOutcome:
    replaying = REPLAY_OPTION in ctx.spec.options
    start = find_replay_start(ctx, spec.role) if replaying else None
    if isinstance(start, RunOutcome):
        return start
    try:  # a replay waits for the MCP servers its stopped run used: the tools it had loaded are theirs
        await run.attach_mcp(start.mcp_servers if start is not None else None)
    except McpRequiredMissing as exc:
        return RunOutcome(status=RunStatus.FAILED, stop_reason=StopReason.PANIC, error=str(exc))
    prompt = system_prompt or render_prompt(spec.prompt, lang=run.lang, code_tools=code_tools_passage(
        set(run.surface.names()), {s.name for s in run.surface.deferred()}))
    if run.dropped_tools:
        prompt += ("\n\n# Tools you do not have in this run\n"
                   f"Your design lists {', '.join(run.dropped_tools)}, but this run cannot offer "
                   f"{'it' if len(run.dropped_tools) == 1 else 'them'} (it runs at yolo level {run.yolo.value!r}; "
                   "with --full-yolo nobody is there to answer questions). Work without them.")
    # The stable part of the prompt is what the sub-agent is: what follows is rebuilt for every run.
    run.sign(prompt)
    prompt = run.with_blueprint(run.with_skills(prompt))
    catalogue = run.surface.deferred_catalogue()
    if catalogue:
        prompt += "\n\n" + catalogue
    prose = run.blueprint_prose(ctx.spec.input)  # the notes on the modules the task names, word for word
    messages = [Message.system(prompt), Message.user(task_text(ctx) + (f"\n\n{prose}" if prose else ""))]
    first_step = 0
    continued = False
    if start is not None:
        messages, first_step = start.messages, start.step
        run.surface.restore_materialized(start.loaded_tools)  # the model need not load them a second time
        run.restore_skills(start.loaded_skills, messages)  # nor the skills it had loaded
    elif FOLLOWUP_OPTION in ctx.spec.options:
        await previous_conversation_written(ctx)
        goes_on = continue_subagent(ctx, run.signature, run.configuration_parts, Message.system(prompt),
                                    task_text(ctx))
        if isinstance(goes_on, RunOutcome):  # it cannot be continued, and its parent said not to start anew
            return dataclasses.replace(goes_on, signature=run.signature)
        if isinstance(goes_on, FollowupStart):
            messages, continued = goes_on.messages, True
            run.surface.restore_materialized(goes_on.loaded_tools)
            run.restore_skills(goes_on.loaded_skills, messages)
    # The task is put back word for word after a compaction (never the last user message: after a compaction
    # that is the compacted context itself).
    config = run.loop_config(messages, ReminderPolicy(spec.reminder, spec.reminder_limit),
                             compactor=run.compactor(messages, request=task_text(ctx)))
    config.first_step = first_step
    config.stop_on_exit = spec.stop_on_exit
    # The soft cap is registered before the first step: the step that reaches the budget already knows it.
    config.wrap_up = WRAP_UP.format(steps=config.max_steps)
    if replaying:
        # Its own delegations cut off by the stop (Repo → DevOps) are replayed too, one level down.
        replayed = await replay_interrupted_delegations(
            messages, run.surface, run.tool_ctx, max_parallel=run.settings.max_parallel_readonly_tools)
        if replayed:
            ctx.log.info("replayed %d interrupted delegations of the stopped run", replayed)
    result = await run.run_loop(config)
    if spec.role == "repo":
        result = _with_blueprint_account(ctx, run, result)
    return dataclasses.replace(result, signature=run.signature, continued=continued or replaying)


def _with_blueprint_account(ctx: RunContext, run: AgentRun, result: RunOutcome) -> RunOutcome:
    """The Repo completion: the run's `agent_exit` `blueprint[]` entries folded into the project's blueprint, the
    account of what happened carried on the outcome (its parent's tool result and its note both show it)."""
    if run.blueprint is None or not result.done:
        return result
    exit_args = result.data.get("exit") if isinstance(result.data, dict) else None
    submitted = exit_args.get("blueprint") if isinstance(exit_args, dict) else None
    reads = run.tool_ctx.reads
    try:
        account = commit_blueprint(run.blueprint.store.directory, ctx.project_root, submitted,
                                   reads.files if reads is not None else set(), run=ctx.spec.run)
    except Exception as exc:  # a blueprint that cannot be folded costs the blueprint, never the delegation
        ctx.log.exception("the blueprint could not be folded")
        account = f"not written: the fold failed ({type(exc).__name__}: {exc})"
    ctx.log.info("blueprint: %s", account)
    return dataclasses.replace(result, data={**result.data, BLUEPRINT_ACCOUNT: account})


def find_replay_start(ctx: RunContext, role: str) -> ReplayStart | RunOutcome:
    """Where a replayed delegation picks up (its rollout's history and step), or the degraded report when it
    cannot be picked up safely — the verdict `assess_replay` gives, said in the report."""
    replay = ctx.spec.options.get(REPLAY_OPTION)
    info = replay if isinstance(replay, dict) else {}
    # Only a child of the named interrupted run is ever picked up: no parent named, no rollout found.
    call_id, parent = str(info.get("call_id", "")), str(info.get("parent_run", ""))
    assessment = assess_delegation(ctx.home, ctx.spec.task, call_id, parent_run=parent, project_root=ctx.project_root,
                                   settings=ctx.settings, role=role)
    if assessment.replayable and assessment.replay is not None and assessment.replay.checkpoint is not None:
        ctx.log.info("replaying delegation %s: %s", call_id, assessment.reason)
        context = assessment.replay.turn_context or {}
        loaded, skills, servers = (context.get(k) for k in ("loaded_tools", "loaded_skills", "mcp_servers"))
        messages = list(assessment.replay.messages)
        return ReplayStart(messages, finished_steps(messages, assessment.replay.compacted_at),
                           [str(n) for n in loaded] if isinstance(loaded, list) else [],
                           skills if isinstance(skills, list) else [],
                           [str(n) for n in servers] if isinstance(servers, list) else [])
    ctx.log.info("delegation %s is not replayed: %s", call_id, assessment.reason)
    return degraded_report(ctx.spec.agent, ctx.spec.input, assessment.reason,
                           stopped_record(assessment.replay.messages) if assessment.replay else None)


def replay_role(agent: str) -> str | None:
    """The role whose limits a replay of a delegation to `agent` runs under; None for a kind that does not pick
    up replays by its own record (meta replays its first run, `meta.first_run_kind`; a third-party kind is not
    known to)."""
    spec = AGENT_SPECS.get("custom" if agent.startswith(CUSTOM_TARGET_PREFIX) else agent)
    return spec.role if spec is not None and agent != "custom" else None


def _register(name: str) -> None:
    spec = AGENT_SPECS[name]

    @agent_kind(name, model_loop=True)
    async def kind(ctx: RunContext) -> RunOutcome:
        return await run_subagent(ctx, spec)


for _name in ("coding", "repo", "chat", "devops", "browser"):
    _register(_name)


@agent_kind("custom:", model_loop=True)
async def custom(ctx: RunContext) -> RunOutcome:
    """A Meta-designed agent; its kind is `custom:<name>` and its design lives in the task's registry."""
    name = ctx.spec.agent.split(":", 1)[1]
    design = CustomAgentRegistry(ctx.home, ctx.spec.task).get(name)
    if design is None:
        return RunOutcome(status=RunStatus.FAILED, stop_reason=StopReason.PANIC,
                            error=f"custom agent {name!r} is not registered for this task; delegate_meta designs it")
    prompt = render_prompt("custom", name=design.name, description=design.description,
                           instructions=design.system_prompt, lang=ctx.settings.lang)
    return await run_subagent(ctx, AGENT_SPECS["custom"], system_prompt=prompt, pick=design.tools)
