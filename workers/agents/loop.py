"""The agent loop every agent runs: pause gate → model call → thought → tools → stop policy.

Per step:
1. wait at the pause gate (before the step counter moves: a paused step never ran);
2. call the model (streaming deltas out as events), retrying the step on transient failures (a retried
   attempt ends its stream with `restarted=True`: what it streamed is void); the optional circuit
   breaker — the one of the provider the call resolves to after routing — is queried, called through
   and told the outcome in this same step;
   before the call, the context compactor (`compaction.py`) compacts the conversation when it is over its
   threshold, and reports how full it is; after it, it takes the provider's count of the request;
3. record the `<thought>` block in the run's thinklink (a block out of shape is counted and shown);
4. run the tool calls through the batch executor (consecutive read-only calls in parallel, the rest
   serially, exactly one result per call even on cancellation); `agent_exit` ends the run — unless its
   hand-off is malformed: the first such exit is refused (its result says what to fix) and the run goes
   on, a second one is accepted as it is;
5. a reply without tool calls goes to the policy: nudge (a reminder sent with the next call only,
   never stored) or finish as `plain_text`. A reply with neither words nor tool calls (a bare thought
   block, an empty completion) is first asked once for its answer; the run's answer is never text
   from an earlier step.

Director and sub-agents share this loop; what differs is the `LoopPolicy` they pass in. The loop ends
with the run's `RunOutcome`: done for `agent_exit` and `plain_text`, failed for every other stop; the
answer in `output`, the hand-off in `handoff`, the other `agent_exit` arguments in `data["exit"]`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from yagent.ipc import event_data
from yagent.ipc.messages import RunOutcome
from yagent.ipc.vocabulary import EventType, RunStatus, StopReason
from yagent.workers.context.thinklink import ThinkLink
from yagent.workers.context.thought import strip_thought
from yagent.workers.llm import (
    CallOptions,
    LLMError,
    Message,
    ReasoningDelta,
    Response,
    RoutingEngine,
    StreamRestart,
    TextDelta,
    ToolCallDelta,
    Usage,
    with_unique_call_ids,
)
from yagent.workers.tools import Surface, ToolBatch, ToolCall, ToolContext, ToolResult
from yagent.workers.tools.handoff import handoff_problems

from .call_tools import call_tools
from .circuit_breaker import ProviderBreakers
from .compaction import ContextCompactor

__all__ = [
    "EMPTY_REPLY_REMINDER",
    "MAX_EMPTY_REPLY_NUDGES",
    "MAX_EXIT_REFUSALS",
    "LoopConfig",
    "LoopPolicy",
    "LoopState",
    "call_model_with_retries",
    "run_agent_loop",
]

log = logging.getLogger(__name__)

Emit = Callable[[str, dict[str, Any]], None]

# Exits refused per run for a malformed hand-off; after that the exit stands, so a model that cannot get
# the shape right still finishes (the parent reads whatever the hand-off holds).
MAX_EXIT_REFUSALS = 1
# Replies with no words and no tool call that are answered with a request for the answer, per run.
MAX_EMPTY_REPLY_NUDGES = 1
EMPTY_REPLY_REMINDER = (
    "Your last reply had no answer text and no tool call. Write your answer now as the reply text, or call "
    "the tool you meant to call."
)


class LoopRecorder(Protocol):
    """Where the run's rollout hears of the loop: each message appended, each compaction (the whole new history),
    and the end (every way out)."""

    def appended(self, message: Message, step: int) -> None: ...

    def compacted(self, messages: list[Message], step: int) -> None: ...

    def finished(self, step: int, outcome: RunOutcome | None, error: BaseException | None = None) -> None: ...


class _NoRecorder:
    def appended(self, message: Message, step: int) -> None:
        pass

    def compacted(self, messages: list[Message], step: int) -> None:
        pass

    def finished(self, step: int, outcome: RunOutcome | None, error: BaseException | None = None) -> None:
        pass


class LoopPolicy:
    """Agent-specific decisions inside the shared loop. The default finishes on plain text."""

    def reminder_for_plain_text(self, state: LoopState) -> str | None:
        """A reminder to send with the next call, or None to finish the run as plain_text."""
        return None

    def after_tools(self, state: LoopState, calls: list[ToolCall], results: list[ToolResult]) -> None:
        """React to a step's tool results (e.g. refresh the surface after a Meta registration)."""

    def start_of_run(self, state: LoopState) -> None:
        """Reset per-run state; called once before the first step."""


@dataclass
class LoopConfig:
    agent: str
    engine: RoutingEngine
    surface: Surface
    tool_ctx: ToolContext
    messages: list[Message]  # system prompt, history and the new input; the loop appends to it
    max_steps: int
    emit: Emit
    step_boundary: Callable[[], Awaitable[None]]
    policy: LoopPolicy = field(default_factory=LoopPolicy)
    stop_on_exit: bool = True
    step_retries: int = 2
    retry_delay: Callable[[int], float] = lambda attempt: min(30.0, 1.0 * 2**attempt)
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    max_parallel_readonly: int = 4
    # One breaker per provider, picked at each step for the provider the engine resolves to then (after
    # routing), so a breaker opened for one provider never blocks another.
    breaker: ProviderBreakers | None = None
    route_task: str = ""  # text the router classifies; empty = no classification
    first_step: int = 0  # the steps a replayed run had taken before it stopped (its messages hold them)
    # What a call cost (provider, model, usage) → US dollars, or None when no price is known.
    cost_of: Callable[[str, str, Usage], float | None] = lambda _provider, _model, _usage: None
    # The run's rollout (workers/memory/rollout_recorder.py); told of every appended message and of the end.
    recorder: LoopRecorder = field(default_factory=_NoRecorder)
    # Messages added to one model call only (the board's index), rebuilt per step; never stored in `messages`.
    call_context: Callable[[], list[Message]] | None = None
    # The run's user inputs and thought blocks (workers/context/thinklink.py); in memory only unless given a log.
    thinklink: ThinkLink = field(default_factory=ThinkLink)
    # Context compression before each model call (compaction.py); None: the conversation is sent as it is.
    compactor: ContextCompactor | None = None
    # Called at every step boundary: brings the surface up to date with tools that changed meanwhile (MCP).
    refresh_tools: Callable[[], Awaitable[None]] | None = None
    # The ReAct soft cap: at `max_steps` this is sent as a user message and the run gets one more step to hand
    # off, then stops with max_steps. Set before the first step; "" stops at max_steps at once (the Director).
    wrap_up: str = ""
    # Asked when the run would finish (plain text or agent_exit): a text keeps it going with that text as a
    # user message (a Director with background sub-agents it must await); None lets it finish.
    before_finish: Callable[[], Awaitable[str | None]] | None = None
    # Asks for the in-flight slot of the step's model call before its request is made (the worker's channel); the
    # call takes it over, and a step that ends without one gives it back. None: each call asks when it is made.
    lease_ahead: Callable[[], AbstractContextManager[None]] | None = None
    # Run once, as soon as the run's first model request is out (while the model works), and at the latest when
    # that call ends: what the run leaves off its way to its first request (its rollout's opening records).
    on_first_request: Callable[[], None] | None = None
    # Hold the run's events on its way to its first request, and let them go once a request is out (the worker's
    # channel: `hold_events`, `flush`; it holds them itself from a child's result on). None: events go as they come.
    hold_events: Callable[[], None] | None = None
    release_events: Callable[[], None] | None = None


@dataclass
class LoopState:
    step: int = 0
    first_request_made: bool = False  # `on_first_request` and the thinklink's held line are taken care of
    plain_text_replies: int = 0
    reminders_sent: int = 0
    delegations: int = 0
    exit_refusals: int = 0
    empty_reply_nudges: int = 0
    last_plain_reply: str = ""  # the previous reply without tool calls, thought and spacing removed
    plain_reply_repeated: bool = False  # this reply says exactly what the previous one said
    reminded_reply: str = ""  # the plain reply a reminder went back to, until a step answers it with tools
    wrapped_up: bool = False  # the soft cap's wrap-up message went out: the next boundary stops the run
    usage: dict[str, int] = field(default_factory=lambda: {"total_input_tokens": 0, "output_tokens": 0,
                                                          "cached_input_tokens": 0})
    last_response: Response | None = None


# The stops of a run that finished its work; every other stop reason ends the loop as a failed run.
_FINISHED = (StopReason.AGENT_EXIT, StopReason.PLAIN_TEXT)


def _deliverable(messages: list[Message], exit_args: dict[str, Any] | None, reason: StopReason) -> str:
    if reason == StopReason.AGENT_EXIT:
        return _exit_deliverable(messages, exit_args or {})
    if reason == StopReason.PLAIN_TEXT:  # the reply that ended the run is the answer, words or not
        last = messages[-1] if messages else None
        return strip_thought(last.content) if last is not None and last.role == "assistant" else ""
    # Stopped otherwise (max steps, an error): the latest words since the last user message, if any.
    for message in reversed(messages):
        if message.role == "assistant":
            text = strip_thought(message.content)
            if text:
                return text
        if message.role == "user":
            break
    return ""


def _exit_deliverable(messages: list[Message], exit_args: dict[str, Any]) -> str:
    """The answer of a run that ended with `agent_exit`.

    It is the text of the final assistant message (the one carrying the `agent_exit` call). When that
    message holds no words (only a thought block), the plain-text reply right before it counts: the agent
    wrote its answer, was told to deliver it, and exited without repeating it. Never an older message —
    narration that accompanied earlier tool calls is not an answer. Failing both: the exit summary, then
    the hand-off's conclusion.
    """
    index = len(messages) - 1
    while index >= 0 and messages[index].role == "tool":
        index -= 1
    if index >= 0 and messages[index].role == "assistant":
        text = strip_thought(messages[index].content)
        if text:
            return text
        before = messages[index - 1] if index > 0 else None
        if before is not None and before.role == "assistant" and not before.tool_calls:
            text = strip_thought(before.content)
            if text:
                return text
    summary = exit_args.get("summary")
    if isinstance(summary, str) and summary.strip():
        return summary.strip()
    handoff = exit_args.get("handoff")
    conclusion = handoff.get("conclusion") if isinstance(handoff, dict) else None
    return conclusion.strip() if isinstance(conclusion, str) else ""


def _plain_words(text: str) -> str:
    """A reply as it is compared with another: without its thought block and with its spacing evened out."""
    return " ".join(strip_thought(text).split())


def _step_is_retried(exc: LLMError, retries_left: int) -> bool:
    # An error the engine already retried to its limit (a server that is down) would only be retried
    # `[llm] max_retries` times more per step retry: minutes of waiting for the same answer.
    return retries_left > 0 and exc.retryable and exc.attempts <= 1


def _once_request_is_out(cfg: LoopConfig, state: LoopState, report: Callable[[], None] | None
                          ) -> Callable[[], None] | None:
    """What runs once this step's request is out: the events held on its way let go, the context report and, the
    first time, the thinklink's held line and `on_first_request`. Safe to call again (the step's end calls it at the
    latest)."""
    release = cfg.release_events
    if state.first_request_made and release is None:
        return report
    first = None if state.first_request_made else [run for run in (cfg.on_first_request, cfg.thinklink.release)
                                                       if run is not None]
    state.first_request_made = True

    def out() -> None:
        nonlocal first, release
        if release is not None:  # once: by the step's end another hold may have begun (a child's result)
            let_go, release = release, None
            let_go()
        if first is not None:
            runs, first = first, None
            for run in runs:
                try:
                    run()
                except Exception:  # it rides on the request's send: a failure there must not fail the call
                    log.exception("%s: what its first model request was to be followed by failed", cfg.agent)
        if report is not None:
            report()
    return out


async def _call_model(cfg: LoopConfig, state: LoopState, messages: list[Message], *,
                      retries_left: int = 0, sent: Callable[[], None] | None = None) -> Response:
    tools = call_tools(cfg.surface)
    emit = cfg.emit
    engine = cfg.engine
    started = time.monotonic()
    emit(EventType.LLM_CALL_START, event_data.llm_call_start(state.step, engine.provider, engine.model))
    emit(EventType.AI_STREAM_START, event_data.ai_stream_start(state.step, engine.model))
    try:
        async with engine.complete(messages, tools, CallOptions(sent=sent)) as stream:
            async for delta in stream:
                if isinstance(delta, TextDelta):
                    emit(EventType.AI_CHUNK, event_data.ai_chunk(delta.text))
                elif isinstance(delta, ReasoningDelta):
                    emit(EventType.THINKING, event_data.thinking(delta.text))
                elif isinstance(delta, ToolCallDelta):
                    # Arguments stream without events (a long file being written can take minutes); the
                    # heartbeat keeps the daemon from judging the run idle ([agent] delegate_idle_timeout).
                    cfg.tool_ctx.heartbeat()
                elif isinstance(delta, StreamRestart):
                    emit(EventType.AI_STREAM_END, event_data.ai_stream_end(state.step, restarted=True))
                    emit(EventType.AI_STREAM_START, event_data.ai_stream_start(state.step, engine.model))
            response = await stream.final()
    except LLMError as exc:
        # When the step is retried, whatever this attempt streamed is void: the retry streams the reply anew.
        restarted = _step_is_retried(exc, retries_left)
        emit(EventType.AI_STREAM_END, event_data.ai_stream_end(state.step, restarted=restarted))
        emit(EventType.LLM_CALL_END, event_data.llm_call_end(state.step, engine.provider, engine.model, None,
                                                             time.monotonic() - started, error=str(exc)))
        raise
    usage = response.usage
    for key in state.usage:
        state.usage[key] += int(getattr(usage, key, 0) or 0)
    emit(EventType.AI_STREAM_END, event_data.ai_stream_end(state.step))
    emit(EventType.LLM_CALL_END, event_data.llm_call_end(
        state.step, response.provider, response.model,
        event_data.usage_data(usage.total_input_tokens, usage.output_tokens, usage.cached_input_tokens,
                              usage.estimated),
        time.monotonic() - started, stop_reason=str(response.finish_reason),
        cost_usd=cfg.cost_of(response.provider, response.model, usage)))
    # The same answer sent again after a reminder is streamed before anyone can tell: say so, and clients
    # show it once.
    repeats = (not response.tool_calls and bool(state.reminded_reply)
               and _plain_words(response.text) == state.reminded_reply)
    emit(EventType.AI_RESPONSE, event_data.ai_response(state.step, response.text, len(response.tool_calls),
                                                       repeats=repeats))
    return response


async def call_model_with_retries(cfg: LoopConfig, state: LoopState, messages: list[Message], *,
                                  sent: Callable[[], None] | None = None) -> Response:
    """`sent`: run once the first attempt's request is out (`CallOptions.sent`)."""
    attempt = 0
    while True:
        try:
            return await _call_model(cfg, state, messages, retries_left=cfg.step_retries - attempt, sent=sent)
        except LLMError as exc:
            if not _step_is_retried(exc, cfg.step_retries - attempt):
                raise
            delay = cfg.retry_delay(attempt)
            attempt += 1
            log.warning("%s step %d: model call failed (%s); retry %d in %.1fs", cfg.agent, state.step, exc,
                        attempt, delay)
            await cfg.sleep(delay)


def _declared_delegation(surface: Surface, name: str) -> bool:
    # What the tool declares (Effect.DELEGATE, or ORCHESTRATE: a background start, a follow-up), not what it is
    # called: a dynamic tool may be named anything.
    spec = surface.resolve(name)
    return spec is not None and spec.starts_agents


# Thought blocks out of shape that are announced as a warning: the first of a run, then every tenth (each one is
# still an event and a log line).
_ANNOUNCE_EVERY = 10


def _thinklink(cfg: LoopConfig, text: str, step: int) -> None:
    link = cfg.thinklink
    reading = link.record_reply(text, step)
    plan = reading.plan
    if plan is not None:
        cfg.emit(EventType.THINKLINK_ENTRY, event_data.thinklink_entry(
            cfg.agent, plan.goal, plan.step, plan.reason, plan.plan, list(reading.problems), link.parse_failures))
    if reading.failed:
        failures = link.parse_failures
        note = (f"{cfg.agent}: the thought block of step {step} is out of shape ({'; '.join(reading.problems)}); "
                f"{failures} such block{'s' if failures != 1 else ''} this run")
        log.warning("%s", note)
        level = "warning" if failures == 1 or failures % _ANNOUNCE_EVERY == 0 else "info"
        cfg.emit(EventType.LOG, event_data.log(level, note))


def _refuse_exit(cfg: LoopConfig, messages: list[Message], exit_result: ToolResult, problems: list[str],
                 step: int) -> None:
    """Turn the exit's result into a refusal that says what to fix; the run continues."""
    text = ("agent_exit not accepted: the hand-off is malformed — " + "; ".join(problems) + ". Call agent_exit "
            "again with the hand-off corrected (your reply text can stay as it is); nothing else needs redoing.")
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "tool" and messages[index].tool_call_id == exit_result.call_id:
            messages[index] = Message.tool(exit_result.call_id, text, name=exit_result.tool)
            # A second result for the same call: the rollout's reader replaces the first in place (last wins).
            cfg.recorder.appended(messages[index], step)
            break
    cfg.emit(EventType.LOG, event_data.log("warning", f"{cfg.agent}: {text}"))


async def _kept_going(cfg: LoopConfig, messages: list[Message], step: int) -> bool:
    """Whether the run goes on instead of finishing: `before_finish` gave a message, which is stored."""
    if cfg.before_finish is None:
        return False
    text = await cfg.before_finish()
    if not text:
        return False
    messages.append(Message.user(text))
    cfg.recorder.appended(messages[-1], step)
    return True


async def run_agent_loop(cfg: LoopConfig) -> RunOutcome:
    state = LoopState(step=cfg.first_step)
    try:
        outcome = await _run_steps(cfg, state)
    except BaseException as exc:  # cancelled included: the rollout still gets its checkpoint and end
        try:
            cfg.thinklink.release()
        finally:
            cfg.recorder.finished(state.step, None, exc)
        raise
    try:
        cfg.thinklink.release()  # what a run that ended before its first request was out held back
    finally:
        cfg.recorder.finished(state.step, outcome)
    return outcome


async def _run_steps(cfg: LoopConfig, state: LoopState) -> RunOutcome:
    cfg.policy.start_of_run(state)
    messages = cfg.messages
    if cfg.compactor is not None:
        cfg.thinklink.hold()  # its line is written once the first request is out (or at the run's end)
        cfg.thinklink.record_input(cfg.compactor.request, state.step)
    pending_reminder: str | None = None
    if cfg.hold_events is not None:  # on the way to the first request
        cfg.hold_events()
    if cfg.route_task:
        await cfg.step_boundary()  # the router's classification is a model call too: never made while paused
        decision = await cfg.engine.route(cfg.route_task)
        cfg.emit(EventType.MODEL_ROUTED, event_data.model_routed(decision.tier or "", decision.provider,
                                                                 decision.model, decision.reason))

    def finish(reason: StopReason, error: str = "", exit_args: dict[str, Any] | None = None) -> RunOutcome:
        handoff = exit_args.get("handoff") if exit_args and isinstance(exit_args.get("handoff"), dict) else None
        deliverable = _deliverable(messages, exit_args, reason)
        if reason == StopReason.PLAIN_TEXT and not deliverable and not error:
            error = "the model's final reply had no text"
        data = {"exit": {k: v for k, v in exit_args.items() if k != "handoff"}} if exit_args else {}
        return RunOutcome(status=RunStatus.DONE if reason in _FINISHED else RunStatus.FAILED, stop_reason=reason,
                          output=deliverable, error=error, handoff=handoff, steps=state.step,
                          usage=dict(state.usage), data=data)

    while True:
        await cfg.step_boundary()
        if cfg.refresh_tools is not None:
            await cfg.refresh_tools()
        if state.step >= cfg.max_steps:
            if not cfg.wrap_up or state.wrapped_up:
                extra = " and the step it was given to wrap up" if state.wrapped_up else ""
                return finish(StopReason.MAX_STEPS, f"stopped after {cfg.max_steps} steps{extra} without finishing")
            # The soft cap: told to hand off, with one step to do it in; stored, so a follow-up sees it was cut.
            state.wrapped_up = True
            messages.append(Message.user(cfg.wrap_up))
            cfg.recorder.appended(messages[-1], state.step)
            cfg.emit(EventType.LOG, event_data.log(
                "info", f"{cfg.agent}: reached its step budget ({cfg.max_steps}); asked to wrap up and hand off "
                        "in one more step"))
        state.step += 1
        # The slot for this step's call is asked for now: the daemon's answer travels while the request is made.
        with cfg.lease_ahead() if cfg.lease_ahead is not None else contextlib.nullcontext():
            extra = cfg.call_context() if cfg.call_context is not None else []
            if pending_reminder is not None:
                extra = [*extra, Message.user(pending_reminder)]
            # The context report is made once the request is out, while the model works (at the latest here).
            report = await cfg.compactor.before_call(cfg, messages, state.step, extra) if cfg.compactor else None
            call_messages = [*messages, *extra] if extra else messages
            pending_reminder = None
            sent = _once_request_is_out(cfg, state, report)
            try:
                # The breaker of the provider the engine resolves to now, i.e. after routing.
                breaker = cfg.breaker.for_provider(cfg.engine.provider) if cfg.breaker is not None else None
                if breaker is not None and not breaker.allow():
                    return finish(StopReason.CIRCUIT_BREAKER_OPEN,
                                  f"the model provider {cfg.engine.provider!r} failed repeatedly; the circuit breaker "
                                  "is open — try again later")
                try:
                    response = await call_model_with_retries(cfg, state, call_messages, sent=sent)
                except LLMError as exc:
                    if breaker is not None:
                        breaker.record_failure()
                    cfg.emit(EventType.CONVERSATION_ERROR, event_data.conversation_error(str(exc)))
                    return finish(StopReason.LLM_ERROR, str(exc))
            finally:
                if sent is not None:
                    sent()
        if breaker is not None:
            breaker.record_success()
        if cfg.compactor is not None:
            usage = response.usage
            cfg.compactor.after_call(usage.total_input_tokens, usage.estimated, len(messages))
        response = with_unique_call_ids(response, messages)  # results pair with calls by id
        state.last_response = response
        messages.append(response.message())
        cfg.recorder.appended(messages[-1], state.step)
        _thinklink(cfg, response.text, state.step)

        if response.tool_calls:
            state.reminded_reply = ""
            calls = [ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in response.tool_calls]
            state.delegations += sum(1 for c in calls if _declared_delegation(cfg.surface, c.name))
            batch = ToolBatch(cfg.surface, calls, cfg.tool_ctx, max_parallel=cfg.max_parallel_readonly)
            try:
                await batch.run()
            finally:
                # Every call gets exactly one result, even when the run is cancelled mid-batch.
                results = batch.results()
                for result in results:
                    messages.append(Message.tool(result.call_id, result.content, name=result.tool,
                                                 images=result.images))
                    cfg.recorder.appended(messages[-1], state.step)
            cfg.policy.after_tools(state, calls, results)
            exits = [r for r in results if r.stop_run]
            if exits and cfg.stop_on_exit:
                exit_args = dict(exits[0].data or {})
                problems = handoff_problems(exit_args["handoff"]) if "handoff" in exit_args else []
                if problems and state.exit_refusals < MAX_EXIT_REFUSALS:
                    state.exit_refusals += 1
                    _refuse_exit(cfg, messages, exits[0], problems, state.step)
                    continue
                if await _kept_going(cfg, messages, state.step):
                    continue
                return finish(StopReason.AGENT_EXIT, exit_args=exit_args)
            continue

        reply = _plain_words(response.text)
        if not reply and state.empty_reply_nudges < MAX_EMPTY_REPLY_NUDGES:
            state.empty_reply_nudges += 1
            pending_reminder = EMPTY_REPLY_REMINDER
            continue
        state.plain_text_replies += 1
        state.plain_reply_repeated = state.plain_text_replies > 1 and reply == state.last_plain_reply
        state.last_plain_reply = reply
        reminder = cfg.policy.reminder_for_plain_text(state)
        if reminder is None:
            if await _kept_going(cfg, messages, state.step):
                continue
            return finish(StopReason.PLAIN_TEXT)
        state.reminders_sent += 1
        state.reminded_reply = reply
        pending_reminder = reminder

