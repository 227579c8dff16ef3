"""Context compression in the agent loop: one implementation, run before every model call of every agent.

Before each call the compactor measures the conversation (`workers/context/measurement.py`: the provider's
count of the last request plus an estimate of what came after) and, over the threshold
(`workers/context/threshold.py`), compacts it in tiers until it fits, each decision through the one
`over_threshold`:
1. rule — cut tool results already read (`rule_truncation`), cheapest to re-fetch first;
2. emergency — the run's own model summarises all but the last three messages, and the conversation becomes
   the system prompt and one user message (`emergency`) with the thinklink digest, the project instructions
   and the request put back word for word;
3. ultimate — when that is not enough or the summary call fails: rebuilt from the thinklink (`ultimate`) and
   cut hard to the budget. `enable_ultimate_compression = false` really turns it off.
Each tier rewrites the loop's message list in place, emits its event (original, compressed and saved tokens,
local estimate) and hands the whole new history to the recorder (`compacted`: the rollout's record, and the
Director's memory), so a resume goes on from the compacted history. `/compact` asks for tier 2 at the next
step whatever the measure. After it, a `context_status` event says how full the request is, part by part.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from yagent.ipc import event_data
from yagent.ipc.compression_settings import CompressionSettings
from yagent.ipc.vocabulary import EventType
from yagent.workers.context.breakdown import context_breakdown
from yagent.workers.context.emergency import KEEP_LAST, SUMMARY_REQUEST, compacted_text, plan_digest
from yagent.workers.context.measurement import Prefix, measure, over_threshold, surely_under
from yagent.workers.context.project_instructions import ProjectInstructions
from yagent.workers.context.rule_truncation import CHEAP, truncate_tool_results
from yagent.workers.context.thinklink import ThinkLink
from yagent.workers.context.thought import strip_thought
from yagent.workers.context.threshold import Threshold, resolve_threshold
from yagent.workers.context.token_ledger import TokenLedger
from yagent.workers.context.tokens import estimate_messages_tokens
from yagent.workers.context.ultimate import rebuilt_text
from yagent.workers.llm import CallOptions, LLMError, Message, lookup_model

from .call_tools import call_tools, call_tools_tokens

if TYPE_CHECKING:
    from .loop import LoopConfig

__all__ = ["COMPACTION_CALL", "SUMMARY_RETRY_STEPS", "TARGET_SHARE", "ContextCompactor", "catalog_window"]

log = logging.getLogger(__name__)

# A compaction aims below this share of the threshold, so the steps right after it do not compact again.
TARGET_SHARE = 0.8
# What the summary call's `llm_call_end` names as its maker: it is counted with the run's usage and cost.
COMPACTION_CALL = "context_compaction"
_REBUILD_FLOOR = 1_000  # tokens: the smallest budget a rebuilt context gets, however small the threshold
SUMMARY_RETRY_STEPS = 5  # steps after a failed summary before the threshold asks for one again


def catalog_window(model: str) -> int | None:
    info = lookup_model(model)
    return info.context_window if info is not None else None


class ContextCompactor:
    """One run's compression state. `request` is what the run works on (the user's latest message, a
    delegated task), put back word for word under `request_heading`; `instructions` the project's, put back
    too (the Director's); `priority_of` ranks a tool's results for the first tier (None: never cut);
    `requested` says whether `/compact` asked for a compaction since the last step; `on_compacted` is told each
    new history."""

    def __init__(self, settings: CompressionSettings, thinklink: ThinkLink, *, request: str,
                 request_heading: str = "The request you are working on",
                 instructions: ProjectInstructions | None = None,
                 priority_of: Callable[[str], int | None] = lambda _name: CHEAP,
                 requested: Callable[[], bool] = lambda: False,
                 window_of: Callable[[str], int | None] = catalog_window,
                 on_compacted: Callable[[list[Message]], None] = lambda _messages: None) -> None:
        self.settings = settings
        self.thinklink = thinklink
        self.request = request
        self.request_heading = request_heading
        self.instructions = instructions
        self.priority_of = priority_of
        self.requested = requested
        self.window_of = window_of
        self.on_compacted = on_compacted  # told the new history (a run's skills forget what it no longer holds)
        self.prefix = Prefix()
        self.ledger = TokenLedger()
        self.compactions = 0
        self._summary_again_at = 0  # after a failed summary, the step from which one is asked for again
        self._thresholds: dict[str, Threshold] = {}

    # -- the two hooks the loop calls --------------------------------------------------------------

    async def before_call(self, cfg: LoopConfig, messages: list[Message], step: int,
                          extra: list[Message]) -> Callable[[], None]:
        """Compact `messages` in place when they are over the threshold (or `/compact` asked); returns the step's
        context report, for the caller to run once its request is out (`CallOptions.sent`) — counting what the
        step added is then done while the model works — and at the latest when the call ends."""
        threshold = self.threshold(cfg.engine.model)
        forced = self.requested()
        if forced:
            _note(cfg, "info", f"{cfg.agent}: compacting the context now, as asked (/compact)")
        if forced or (self.settings.enabled
                      and not surely_under(messages, self.prefix, self.ledger, threshold.tokens)
                      and over_threshold(messages, self.prefix, self.ledger, threshold.tokens)):
            await self._compact(cfg, messages, step, threshold.tokens, forced=forced)
        return _once(self._report, cfg, list(messages), step, threshold, list(extra))

    def after_call(self, input_tokens: int, estimated: bool, covers: int) -> None:
        """The provider's count of the request just made, which held the first `covers` messages."""
        self.prefix.record(input_tokens, estimated=estimated, covers=covers)

    def threshold(self, model: str) -> Threshold:
        found = self._thresholds.get(model)
        if found is None:
            found = self._thresholds[model] = resolve_threshold(model, self.settings, self.window_of)
        return found

    # -- the tiers ------------------------------------------------------------------------------------

    async def _compact(self, cfg: LoopConfig, messages: list[Message], step: int, limit: int, *,
                       forced: bool) -> None:
        target = int(limit * TARGET_SHARE)
        if not forced:
            self._rule(cfg, messages, step, limit, target)
            if not over_threshold(messages, self.prefix, self.ledger, limit):
                return
        if forced or step >= self._summary_again_at:
            await self._emergency(cfg, messages, step, limit, forced=forced)
        if not over_threshold(messages, self.prefix, self.ledger, limit):
            return
        rebuilt = self.settings.ultimate_enabled and (self.settings.enabled or forced)
        if rebuilt:
            self._ultimate(cfg, messages, step, limit, target, forced=forced)
        if over_threshold(messages, self.prefix, self.ledger, limit):
            why = "" if rebuilt else " (enable_ultimate_compression is off)"
            _note(cfg, "warning", f"{cfg.agent}: the context is still over its threshold ({limit:,} tokens) after "
                                  f"compaction{why}; the model may refuse the request")

    def _rule(self, cfg: LoopConfig, messages: list[Message], step: int, limit: int, target: int) -> None:
        before = self.ledger.total(messages)
        needed = measure(messages, self.prefix, self.ledger) - target
        cut = truncate_tool_results(messages, self.ledger, priority_of=self.priority_of,
                                    keep_tokens=self.settings.tool_result_keep_tokens, needed=needed)
        if cut.cut:
            self.prefix.deduct(cut.saved)
            self._done(cfg, messages, step, EventType.CONTEXT_COMPRESSED, "rule", before, limit, forced=False,
                       detail=f"{cut.cut} tool results cut")

    async def _emergency(self, cfg: LoopConfig, messages: list[Message], step: int, limit: int, *,
                         forced: bool) -> bool:
        start = 1 if messages and messages[0].role == "system" else 0
        if len(messages) - start <= KEEP_LAST:
            if forced:
                _note(cfg, "info", f"{cfg.agent}: nothing to compact yet (the conversation holds "
                                   f"{len(messages) - start} messages)")
            return False
        self.thinklink.absorb(messages[start:])
        head, tail = messages[:-KEEP_LAST], messages[-KEEP_LAST:]
        try:
            summary = await _summarise(cfg, step, head)
            problem = "" if summary else "the model wrote no summary"
        except LLMError as exc:
            summary, problem = "", f"the summary call failed ({exc})"
        if problem:
            # Not asked again at every step: a provider refusing the history would be paid for each time.
            self._summary_again_at = step + SUMMARY_RETRY_STEPS
            fallback = ("rebuilding from the thinklink instead" if self.settings.ultimate_enabled
                        else "the history stays as it is")
            _note(cfg, "warning", f"{cfg.agent}: compacting the context: {problem}; {fallback} (no summary is asked "
                                  f"for again before step {self._summary_again_at})")
            return False
        text = compacted_text(summary=summary, digest=plan_digest(self.thinklink), instructions=self._instructions(cfg),
                              request_heading=self.request_heading, request=self.request, tail=tail)
        before = self.ledger.total(messages)
        messages[:] = [*messages[:start], Message.user(text)]
        self.prefix.invalidate()
        self._done(cfg, messages, step, EventType.CONTEXT_EMERGENCY_COMPRESSED, "emergency", before, limit,
                   forced=forced, detail=f"{len(head) - start} messages summarised")
        return True

    def _ultimate(self, cfg: LoopConfig, messages: list[Message], step: int, limit: int, target: int, *,
                  forced: bool) -> None:
        start = 1 if messages and messages[0].role == "system" else 0
        self.thinklink.absorb(messages[start:])
        system = self.ledger.counts(messages)[0] if start else 0
        text = rebuilt_text(self.thinklink, keep_plans=self.settings.ultimate_keep_plans,
                            instructions=self._instructions(cfg), request_heading=self.request_heading,
                            request=self.request, budget_tokens=max(_REBUILD_FLOOR, target - system))
        before = self.ledger.total(messages)
        messages[:] = [*messages[:start], Message.user(text)]
        self.prefix.invalidate()
        self._done(cfg, messages, step, EventType.CONTEXT_ULTIMATE_COMPRESSED, "ultimate", before, limit,
                   forced=forced, detail="rebuilt from the thinklink")

    def _instructions(self, cfg: LoopConfig) -> str:
        if self.instructions is None:
            return ""
        if self.instructions.overflow:
            _note(cfg, "warning", f"{cfg.agent}: {self.instructions.overflow}")
        return self.instructions.block()

    def _done(self, cfg: LoopConfig, messages: list[Message], step: int, kind: EventType, tier: str, before: int,
              limit: int, *, forced: bool, detail: str) -> None:
        after = self.ledger.total(messages)
        self.compactions += 1
        self.on_compacted(messages)
        cfg.recorder.compacted(list(messages), step)
        cfg.emit(kind, event_data.context_compressed(tier, before, after, step=step, threshold=limit,
                                                     requested=forced))
        log.info("%s step %d: context compacted (%s, %s): %d -> %d tokens", cfg.agent, step, tier, detail, before,
                 after)

    # -- what the request holds -------------------------------------------------------------------------

    def _report(self, cfg: LoopConfig, messages: list[Message], step: int, threshold: Threshold,
                extra: list[Message]) -> None:
        used = measure(messages, self.prefix, self.ledger)
        parts = context_breakdown(messages, self.ledger,
                                  instructions=self.instructions.block() if self.instructions else "",
                                  call_context=estimate_messages_tokens(extra) if extra else 0,
                                  tools=call_tools_tokens(cfg.surface))
        cfg.emit(EventType.CONTEXT_STATUS, event_data.context_status(
            # The gauge's window: the provider's configured context_window first, else the catalog's (pitfall 3:
            # the configured one sizes the gauge only, never the threshold).
            step, used, threshold.tokens, source=threshold.source, window=cfg.engine.context_window or threshold.window,
            measured=self.prefix.valid, parts=parts))



async def _summarise(cfg: LoopConfig, step: int, head: list[Message]) -> str:
    """The summary of `head` by the run's own model, through its engine and lease like any call. The tool
    definitions go along (a provider refuses tool calls in a history without them) and are not used."""
    tools = call_tools(cfg.surface)
    engine = cfg.engine
    started = time.monotonic()
    cfg.emit(EventType.LLM_CALL_START, event_data.llm_call_start(step, engine.provider, engine.model))
    try:
        async with engine.complete([*head, Message.user(SUMMARY_REQUEST)], tools, CallOptions()) as stream:
            response = await stream.final()
    except LLMError as exc:
        cfg.emit(EventType.LLM_CALL_END, event_data.llm_call_end(
            step, engine.provider, engine.model, None, time.monotonic() - started, error=str(exc),
            tool=COMPACTION_CALL))
        raise
    usage = response.usage
    cfg.emit(EventType.LLM_CALL_END, event_data.llm_call_end(
        step, response.provider, response.model,
        event_data.usage_data(usage.total_input_tokens, usage.output_tokens, usage.cached_input_tokens,
                              usage.estimated),
        time.monotonic() - started, stop_reason=str(response.finish_reason),
        cost_usd=cfg.cost_of(response.provider, response.model, usage), tool=COMPACTION_CALL))
    return strip_thought(response.text).strip()


def _once(report: Callable[..., None], *args: Any) -> Callable[[], None]:
    """`report(*args)` the first time it is called, nothing after; a failure is logged, never raised into the call
    whose send it rides on."""
    pending = [args]

    def run() -> None:
        if pending:
            try:
                report(*pending.pop())
            except Exception:
                log.exception("the context report failed")
    return run


def _note(cfg: Any, level: str, text: str) -> None:
    (log.warning if level == "warning" else log.info)("%s", text)
    cfg.emit(EventType.LOG, event_data.log(level, text))
