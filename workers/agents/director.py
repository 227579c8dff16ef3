"""The Director: the agent that talks to the user, one worker per user turn.

A turn loads the task's conversation memory, adds the user's message (with the project's instructions —
AGENTS.md, CLAUDE.md, YAGENT.md from the project's root down to the working directory — on the task's first
turn), runs the planner loop, and writes the memory back — also when the turn is cancelled, so nothing
already said is lost. A compaction rewrites the memory to the compacted history; the instructions and the
user's request are put back into it word for word. A turn that resumes a stopped one (`RESUME_OPTION`)
adds no message: it picks up the interrupted delegations of the stopped step as replays
(`turn_resume.py`) and goes on from there.

Planner rules on top of the shared loop:
- forced delegation: a plain-text reply in a run that has not delegated yet earns a reminder (at most
  three per run; the first worded differently from the next two), sent with the next call only and
  never stored; once the quota is spent the reply stands and the run ends as `plain_text`;
- custom agents designed by Meta join the surface as `delegate_<name>` the step after they are made,
  and stay for the rest of the task;
- the circuit breaker (`[llm] circuit_breaker_threshold`, 0 = none) wraps every model call.
"""

from __future__ import annotations

import contextlib

from yagent.ipc import event_data
from yagent.ipc.mcp_status import render_status_lines
from yagent.ipc.messages import RESUME_OPTION, RunOutcome
from yagent.ipc.provider_config import ProviderConfigError
from yagent.ipc.state_layout import task_dir, thinklink_dir
from yagent.ipc.vocabulary import EventType, RunStatus, StopReason
from yagent.workers.context.project_instructions import (
    INSTRUCTIONS_HEADING,
    ProjectInstructions,
    load_project_instructions,
)
from yagent.workers.context.thinklink import read_thinklink
from yagent.workers.context.thought import strip_thought
from yagent.workers.kinds import RunContext, agent_kind
from yagent.workers.llm import Message
from yagent.workers.memory import ConversationMemory, load_memory, memory_path
from yagent.workers.memory.resume_repair import repair_for_resume
from yagent.workers.memory.rollout_retention import prune_rollouts
from yagent.workers.tools import ToolCall, ToolResult

from .background_work import background_at_start, wait_before_answering
from .custom_agents import CustomAgentRegistry
from .loop import LoopPolicy, LoopRecorder, LoopState
from .prompts import render_prompt
from .runtime import AgentRun, McpRequiredMissing
from .turn_resume import StoppedTurn, delegated_before, replay_interrupted_delegations, stopped_turn

__all__ = ["MAX_NON_DELEGATION_REMINDERS", "REQUEST_HEADING", "DirectorPolicy", "director"]

MAX_NON_DELEGATION_REMINDERS = 3
REQUEST_HEADING = "The user's latest request"

FIRST_REMINDER = (
    "You replied without delegating anything in this run. Questions about the code go to delegate_repo, "
    "changes to delegate_coding, the machine and builds to delegate_devops, general knowledge to "
    "delegate_chat. Delegate now — or, if no delegation could add to your reply, send it again unchanged as "
    "your final answer."
)
LATER_REMINDER = (
    "Still no delegation. Do not answer from memory: use a delegate_* tool to get the facts or make the "
    "change, then report. If no delegation can help, send the same answer again, unchanged."
)


class DirectorPolicy(LoopPolicy):
    def __init__(self, on_tools: object = None, *, delegated: bool = False) -> None:
        self._on_tools = on_tools
        self._delegated = delegated  # a resumed turn had delegated before it stopped: no reminder owed

    def start_of_run(self, state: LoopState) -> None:
        state.reminders_sent = 0  # the quota is per run: a new turn starts with a fresh one

    def reminder_for_plain_text(self, state: LoopState) -> str | None:
        if state.delegations > 0 or self._delegated or state.reminders_sent >= MAX_NON_DELEGATION_REMINDERS:
            return None
        if state.plain_reply_repeated:  # the reminders offer this: the same answer again is the final one
            return None
        return FIRST_REMINDER if state.reminders_sent == 0 else LATER_REMINDER

    def after_tools(self, state: LoopState, calls: list[ToolCall], results: list[ToolResult]) -> None:
        if callable(self._on_tools):
            self._on_tools(calls, results)


class _TurnFollower:
    """The loop's recorder for a Director turn: the rollout as before, plus the task's memory kept up with the
    turn (saved debounced, so a daemon killed mid-turn loses at most a few seconds of it). A compaction replaces
    the memory with the compacted history (all but the system prompt), and the turn is followed from there."""

    def __init__(self, inner: LoopRecorder, memory: ConversationMemory, messages: list[Message],
                 added: list[Message]) -> None:
        self._inner = inner
        self._memory = memory
        self._messages = messages
        self._added = list(added)  # the turn's own message(s) before the loop started
        self._start = len(messages)

    def turn(self) -> list[Message]:
        return [*self._added, *self._messages[self._start:]]

    def appended(self, message: Message, step: int) -> None:
        self._inner.appended(message, step)
        self._memory.follow_turn(self.turn())
        self._save()

    def compacted(self, messages: list[Message], step: int) -> None:
        self._inner.compacted(messages, step)
        self._memory.replace([m for m in messages if m.role != "system"])
        self._memory.end_turn()
        self._added, self._start = [], len(self._messages)
        self._save()

    def finished(self, step: int, outcome: RunOutcome | None, error: BaseException | None = None) -> None:
        self._inner.finished(step, outcome, error)

    def _save(self) -> None:
        with contextlib.suppress(OSError):  # the end of the turn saves again and reports a failure then
            self._memory.save_debounced()


def _holds_instructions(history: list[Message]) -> bool:
    return any(m.role == "user" and INSTRUCTIONS_HEADING in m.content for m in history)


def _say_what_was_left_out(ctx: RunContext, found: ProjectInstructions) -> None:
    """Files left out of the instructions and the budget's overflow, said (an event and a log line each)."""
    for problem in found.problems:
        _note(ctx, "warning", f"project instructions: {problem}")
    if found.overflow:
        _note(ctx, "warning", found.overflow)


def _system_prompt(run: AgentRun, registry: CustomAgentRegistry) -> str:
    prompt = run.with_blueprint(run.with_skills(render_prompt("director", lang=run.lang)))
    customs = registry.describe()
    if customs:
        prompt += "\n\n# Custom agents of this task\n" + customs
    catalogue = run.surface.deferred_catalogue()
    if catalogue:
        prompt += "\n\n" + catalogue
    if run.mcp_servers:  # what the user configured, stated the way `yagent mcp` and the daemon's log state it
        lines = "\n".join(f"- {line}" for line in render_status_lines(run.mcp_servers, project_names=False))
        prompt += ("\n\n# MCP servers of this project\nTheir tools are the deferred `mcp__<server>__<tool>` "
                   f"ones; a server that is not ready offers none.\n{lines}")
    return prompt


@agent_kind("director", model_loop=True)
async def director(ctx: RunContext) -> RunOutcome:
    registry = CustomAgentRegistry(ctx.home, ctx.spec.task)
    memory = load_memory(memory_path(ctx.home, ctx.spec.task))
    first_turn = not memory.has_exchange()
    run_holder: list[AgentRun] = []
    # Before this turn's own rollout exists: the previous turn (what a resume needs) is the newest kept.
    prune_rollouts(task_dir(ctx.home, ctx.spec.task), ctx.settings.rollout_retention)

    def refresh_customs(calls: list[ToolCall], results: list[ToolResult]) -> None:
        # A Meta run registered an agent in the task's registry: offer it from the next step on.
        if any(c.name == "delegate_meta" for c in calls) and run_holder:
            registry.reload()
            added = run_holder[0].surface.join(registry.specs())
            if added:
                ctx.log.info("custom agents now available: %s", ", ".join(added))

    try:
        run = AgentRun(ctx, "director", extra_specs=registry.specs())
    except ProviderConfigError as exc:
        return RunOutcome(status=RunStatus.FAILED, stop_reason=StopReason.LLM_ERROR,
                            error=f"no usable LLM provider: {exc}")  # it says what to do
    run_holder.append(run)
    # A turn stopped before its loop (cancelled while it waits for its MCP servers) is closed by the worker after its
    # result; the ways out below close it themselves, and a second close does nothing.
    ctx.after_result(run.close)
    history = memory.snapshot()
    stopped: StoppedTurn | None = None
    if RESUME_OPTION in ctx.spec.options:
        stopped = _stopped_turn(ctx, memory, history)
        history = stopped.history
    try:  # the MCP servers the stopped turn used are waited for: the tools it had loaded are theirs
        await run.attach_mcp(stopped.mcp_servers if stopped else None)
    except McpRequiredMissing as exc:
        await run.close()
        return RunOutcome(status=RunStatus.FAILED, stop_reason=StopReason.PANIC, error=str(exc))
    if stopped is not None:
        run.surface.restore_materialized(stopped.loaded_tools)  # the cold tools it had loaded: not loaded again
        run.restore_skills(stopped.loaded_skills, history)  # nor the skills, while its history holds them
    # A turn killed mid-tool leaves a call without a result: it reads as interrupted before the first call.
    repaired = repair_for_resume(history)
    if repaired != history:
        memory.replace(repaired)
        history = repaired
    resuming = RESUME_OPTION in ctx.spec.options and bool(history)
    if RESUME_OPTION in ctx.spec.options and not history:
        # Nothing of the stopped turn was written (its worker was killed first): it can only start over.
        _note(ctx, "warning", "nothing was recorded of the stopped turn; starting it again from its message")
    # Read every turn: a compaction puts the instructions back as they are now, not as the first turn saw them.
    instructions = load_project_instructions(ctx.project_root)
    block = instructions.block()
    present = _holds_instructions(history)  # a compacted history carries them already
    if (first_turn and not present) or resuming:  # said when they are passed on, not at every turn
        _say_what_was_left_out(ctx, instructions)
    added: list[Message] = []
    port = run.subagents
    record = run.board.record_delegation
    # Background work: results no turn has read, what still works, what a stopped daemon interrupted (restarted).
    background = await background_at_start(ctx.spec.options, port, record) if port is not None else ""
    # A resumed turn whose stopped run had already answered: only its background work was cut off.
    answered = _answered(history) if resuming else None
    if not resuming:
        text = ctx.spec.input
        if first_turn and block and not present:
            text = f"{text}\n\n{block}"
        if background:
            text = f"{text}\n\n{background}"
        added.append(Message.user(text))
    elif background and answered is None:
        added.append(Message.user(background))
    system = _system_prompt(run, registry)
    if resuming and block and not present:
        # A resumed session re-reads the project's instructions: they may have changed, or never been seen.
        system += f"\n\n{block}"
    messages = [Message.system(system), *history, *added]
    if resuming:
        _seed_thinklink(ctx, run)
    policy = DirectorPolicy(refresh_customs, delegated=resuming and delegated_before(history, run.surface))
    compactor = run.compactor(messages, request=ctx.spec.input, request_heading=REQUEST_HEADING,
                              instructions=instructions)
    config = run.loop_config(messages, policy, route_task=ctx.spec.input, compactor=compactor)
    if port is not None:  # background sub-agents started with at_turn_end=wait: read before the answer stands
        config.before_finish = wait_before_answering(port, record)
    follower = _TurnFollower(config.recorder, memory, messages, added)
    config.recorder = follower
    try:
        if resuming:
            replayed = await replay_interrupted_delegations(
                messages, run.surface, run.tool_ctx, max_parallel=run.settings.max_parallel_readonly_tools)
            _note(ctx, "info", f"resumed the stopped turn where it stopped ({replayed} interrupted delegations "
                               "picked up again)")
            if answered is not None and not replayed:
                # The answer stands; only what it waits for (restarted background work) may add to it.
                more = await config.before_finish() if config.before_finish is not None else None
                if more is None:
                    return RunOutcome(status=RunStatus.DONE, stop_reason=StopReason.PLAIN_TEXT, output=answered)
                messages.append(Message.user(more))  # the rollout begins with it, the memory follows it
        result = await run.run_loop(config, rollout=True)
    finally:
        # Written on every path, cancellation included: the next turn continues this conversation.
        memory.follow_turn(follower.turn())
        memory.end_turn()
        memory.save()
        await run.close()
    return result


def _answered(messages: list[Message]) -> str | None:
    """The answer a conversation ends with (an assistant reply calling no tool), or None."""
    last = messages[-1] if messages else None
    if last is None or last.role != "assistant" or last.tool_calls:
        return None
    return strip_thought(last.content) or None


def _stopped_turn(ctx: RunContext, memory: ConversationMemory, history: list[Message]) -> StoppedTurn:
    resume = ctx.spec.options.get(RESUME_OPTION)
    stopped = str(resume.get("run", "")) if isinstance(resume, dict) else ""
    found = stopped_turn(task_dir(ctx.home, ctx.spec.task), stopped, history)
    if found.problem:
        _note(ctx, "warning", f"{found.problem}; resuming from the memory")
    if found.history is not history:
        memory.replace(found.history)
    return found


def _seed_thinklink(ctx: RunContext, run: AgentRun) -> None:
    """A resumed turn goes on with the stopped run's thinklink (its goal and plans), read back as it was written."""
    resume = ctx.spec.options.get(RESUME_OPTION)
    stopped = str(resume.get("run", "")) if isinstance(resume, dict) else ""
    if not stopped or "/" in stopped or stopped.startswith("."):
        return
    entries, problems = read_thinklink(thinklink_dir(ctx.home, ctx.spec.task) / f"{stopped}.jsonl")
    run.thinklink.seed(entries)
    for problem in problems:
        ctx.log.warning("thinklink of the stopped run: %s", problem)


def _note(ctx: RunContext, level: str, text: str) -> None:
    ctx.log.info("%s", text)
    ctx.emit(EventType.LOG, event_data.log(level, text))
