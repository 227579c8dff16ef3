"""What the screen shows about one attached task, built only from the task's event stream.

`TaskView.apply(event)` is the single entry point: every event, live or replayed, whatever overlay
or dialog is open, goes through it, so nothing (least of all a turn's end) can be swallowed by a
mode of the UI. Rendering reads this state and never changes it.

Streams are kept apart by run id (the delegation coordinate): two parallel runs of the same agent
fill two entries, while every label keeps the plain agent name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from yagent.ipc.daemon_events import (
    BackgroundWork,
    LlmSlotWait,
    RunFinished,
    RunQueued,
    RunStarted,
    TurnFinished,
    TurnStarted,
    UserHelpResponse,
)
from yagent.ipc.event_data import WorkflowDecision
from yagent.ipc.messages import Event, Question, TaskSummary
from yagent.ipc.vocabulary import EventType, RunStatus, StopReason, TaskState

from ..cells import clean
from ..event_fields import number, whole
from ..reply_echo import ReplyEcho
from ..stamped import stamped_data
from ..thought_filter import visible_reply

__all__ = [
    "AnswerShown",
    "CompressionTotals",
    "ContextGauge",
    "DelegationEnd",
    "DelegationStart",
    "Entry",
    "EntryData",
    "PlanEntry",
    "RunInfo",
    "TaskView",
    "TurnEnd",
    "UsageTotals",
]


@dataclass(slots=True)
class TurnEnd:
    """What a turn's closing line shows."""

    turn: int
    status: RunStatus
    stop_reason: StopReason
    error: str  # empty when the log shows this error already
    elapsed: float


@dataclass(slots=True)
class DelegationStart:
    input: str  # the first line of the task the child was given


@dataclass(slots=True)
class DelegationEnd:
    status: RunStatus
    stop_reason: StopReason
    error: str
    elapsed: float


@dataclass(slots=True)
class AnswerShown:
    value: str  # the answer, or "cancelled" for a question withdrawn unanswered
    by: str  # who answered, when it was not this client


# Entries built from daemon-stamped events hold a typed record; those built from agents' events a dict
# of the event's keys (a reply's `final`, a tool call's name, brief and result).
EntryData = dict[str, Any] | TurnEnd | DelegationStart | DelegationEnd | AnswerShown | Question


class Entry:
    """One item of the conversation log. `version` changes whenever its rendering may change."""

    __slots__ = ("_parts", "_text", "agent", "data", "kind", "replaced", "run", "version")

    def __init__(self, kind: str, agent: str = "", run: str = "", text: str = "",
                 data: EntryData | None = None) -> None:
        # user | text | thinking | tool | delegation | notice | diff | error | question | answer | turn
        self.kind = kind
        self.agent = agent
        self.run = run
        self._parts: list[str] = [clean(text)] if text else []
        self._text: str | None = None
        self.data: EntryData = {} if data is None else data
        self.version = 0
        self.replaced = 0  # bumped when the text is replaced rather than appended to

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = "".join(self._parts)
            self._parts = [self._text] if self._text else []
        return self._text

    def append(self, text: str) -> None:
        self._parts.append(clean(text))
        self._text = None
        self.version += 1

    def replace(self, text: str) -> None:
        self._parts = [clean(text)]
        self._text = None
        self.version += 1
        self.replaced += 1

    def touch(self) -> None:
        self.version += 1

    @property
    def final(self) -> bool:
        """Whether this reply's stream has ended (a thought block it never closed then shows)."""
        return isinstance(self.data, dict) and bool(self.data.get("final"))


@dataclass(slots=True)
class RunInfo:
    run: str
    agent: str
    parent: str | None
    status: str  # a RunStatus value
    started_at: float = 0.0
    ended_at: float = 0.0
    slot_limit: int = 0  # > 0 while the run waits for one of this many in-flight model request slots
    unconfined: str = ""  # why the kernel does not confine the run ("" when it does)
    browser: str = ""  # a Browser run: its last action and the URL its page is at


@dataclass(slots=True)
class UsageTotals:
    """Sums of provider-normalised counts (input includes cached input on every provider)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    calls: int = 0
    estimated: bool = False

    def add(self, usage: dict[str, Any]) -> None:
        self.input_tokens += whole(usage, "total_input_tokens")
        self.output_tokens += whole(usage, "output_tokens")
        self.cached_tokens += whole(usage, "cached_input_tokens")
        self.calls += 1
        self.estimated = self.estimated or bool(usage.get("estimated"))


@dataclass(slots=True)
class CompressionTotals:
    """Compressions happen per step, so the saved sum may exceed any one original: the share uses
    the largest original as denominator and is capped at 100%."""

    count: int = 0
    saved: int = 0
    largest_original: int = 0
    last_tier: str = ""

    @property
    def percent(self) -> int:
        if not self.largest_original:
            return 0
        return min(100, round(self.saved * 100 / self.largest_original))


@dataclass(slots=True)
class ContextGauge:
    """How full one run's context was at its latest model call (a `context_status` event)."""

    run: str
    agent: str
    step: int
    used: int  # what compression compares with the threshold
    threshold: int
    source: str  # where the threshold came from: env | config | catalog | default
    window: int  # the provider's configured context window, else the catalog's; 0 = unknown
    measured: bool  # `used` rests on the provider's count of the last request (else a local estimate)
    parts: dict[str, int] = field(default_factory=dict)  # system, instructions, history, tool_results, …

    @property
    def percent(self) -> int:
        return round(self.used * 100 / self.threshold) if self.threshold > 0 else 0


@dataclass(slots=True)
class PlanEntry:
    agent: str
    goal: str
    step: str
    reason: str
    plan: list[tuple[str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # why the block is out of shape ([] = as the contract says)


_COMPRESSION_TYPES = {EventType.CONTEXT_COMPRESSED.value: "",
                      EventType.CONTEXT_EMERGENCY_COMPRESSED.value: "emergency",
                      EventType.CONTEXT_ULTIMATE_COMPRESSED.value: "ultimate"}


class TaskView:
    """The attached task as the screen shows it."""

    def __init__(self, project: str = "", task: str | None = None) -> None:
        self.project = project
        self.task = task
        self.title = ""
        self.state = "new" if task is None else TaskState.IDLE.value
        self.entries: list[Entry] = []
        self.turn = 0
        self.root_run = ""
        self.root_agent = ""
        # Whether the root run showed reply text this turn (text inside `<thought>` blocks does not count):
        # the turn's output is then on screen already and is not added again at the turn's end.
        self.root_streamed = False
        self._errors_shown: set[str] = set()  # error texts already in the log this turn
        self.answered_here: set[str] = set()  # request ids this client answered: no "by" needed for those
        self.turn_started_at = 0.0
        self.turn_ended_at = 0.0
        self.runs: dict[str, RunInfo] = {}
        self.usage = UsageTotals()
        self.compression = CompressionTotals()
        self.gauges: dict[str, ContextGauge] = {}  # run id -> its latest context_status
        self.gauge_run = ""  # the run that reported last: the gauge the status line shows
        self.plans: list[PlanEntry] = []
        self.questions: dict[str, Question] = {}
        self.model = ""
        self.last_seq = 0
        self.paused = False
        self.events_seen = 0
        self._slots: dict[str, Entry] = {}  # run id -> open streamed reply
        self._thinking: dict[str, Entry] = {}  # run id -> open reasoning stream
        self._step_entry: dict[tuple[str, int], Entry] = {}  # (run, step) -> reply entry of that step
        self._run_step: dict[str, int] = {}
        self._tools: dict[tuple[str, str], Entry] = {}
        self._echo = ReplyEcho(visible_reply)  # an answer sent again after a reminder is shown once

    # -- set-up ------------------------------------------------------------------------------------

    def adopt_summary(self, summary: TaskSummary) -> None:
        """What the daemon says about the task when we attach; events refine it from here."""
        self.task = summary.task
        self.project = summary.project
        self.title = summary.title
        self.state = summary.state
        self.paused = summary.state == TaskState.PAUSED.value
        for q in summary.questions:
            self.questions.setdefault(q.request_id, q)
        for r in summary.runs:
            self.runs.setdefault(r.run, RunInfo(r.run, r.agent, r.parent, r.status, r.started_at, r.ended_at))

    def add_history(self, turns: list[tuple[str, str]]) -> None:
        """Turns whose events the daemon no longer keeps: their text and final output only."""
        if not turns:
            return
        self._add(Entry("notice", text="earlier turns, from the task record (their live detail is gone)"))
        for text, output in turns:
            self._add(Entry("user", text=text))
            if output:
                self._add(Entry("text", agent="director", text=output))

    def note(self, text: str, *, error: bool = False) -> None:
        """A line from the client itself (command results, errors) in the log."""
        self._add(Entry("error" if error else "notice", text=text))

    def note_diff(self, text: str) -> None:
        """A diff the client shows (`/diff`, `/undo`): its lines coloured as added, removed, hunk, heading."""
        self._add(Entry("diff", text=text))

    # -- derived -----------------------------------------------------------------------------------

    @property
    def display_state(self) -> str:
        if self.questions and self.state in (TaskState.RUNNING.value, TaskState.WAITING.value,
                                             TaskState.BACKGROUND.value):
            return "waiting for you"
        if self.paused and self.state in (TaskState.RUNNING.value, TaskState.PAUSED.value,
                                          TaskState.WAITING.value):
            return TaskState.PAUSED
        if self.state == TaskState.WAITING.value:
            return TaskState.RUNNING  # its question is gone (answered elsewhere or withdrawn): the run goes on
        return self.state

    @property
    def turn_running(self) -> bool:
        return self.state in (TaskState.RUNNING.value, TaskState.PAUSED.value, TaskState.WAITING.value)

    def elapsed(self, now: float) -> float:
        if not self.turn_started_at:
            return 0.0
        end = self.turn_ended_at or now
        return max(0.0, end - self.turn_started_at)

    def live_runs(self) -> list[tuple[int, RunInfo]]:
        """(depth, run) in tree order, for the runs of the current turn."""
        children: dict[str | None, list[RunInfo]] = {}
        for info in self.runs.values():
            parent = info.parent if info.parent in self.runs else None
            children.setdefault(parent, []).append(info)
        out: list[tuple[int, RunInfo]] = []

        def walk(parent: str | None, depth: int) -> None:
            for info in children.get(parent, []):
                out.append((depth, info))
                walk(info.run, depth + 1)

        walk(None, 0)
        return out

    def pending_questions(self) -> list[Question]:
        return sorted(self.questions.values(), key=lambda q: q.asked_at)

    # -- events ------------------------------------------------------------------------------------

    def _add(self, entry: Entry) -> Entry:
        self.entries.append(entry)
        return entry

    def _close_streams(self, run: str | None = None) -> None:
        closed = list(self._slots.values()) if run is None else [e for e in [self._slots.get(run)] if e]
        for entry in closed:
            # A finished reply shows a thought block it never closed, rather than hiding the rest of it.
            if isinstance(entry.data, dict):
                entry.data["final"] = True
            entry.touch()
        if run is None:
            self._slots.clear()
            self._thinking.clear()
        else:
            self._slots.pop(run, None)
            self._thinking.pop(run, None)

    def apply(self, ev: Event) -> None:
        if ev.seq and ev.seq <= self.last_seq:
            return  # never render an event twice (a replay overlapping what we already have)
        self.last_seq = max(self.last_seq, ev.seq)
        self.events_seen += 1
        handler = _HANDLERS.get(ev.type)
        if handler is not None:
            handler(self, ev)
        elif ev.type in _COMPRESSION_TYPES:
            self._on_compressed(ev, _COMPRESSION_TYPES[ev.type])

    def _on_turn_started(self, ev: Event) -> None:
        d = stamped_data(ev, TurnStarted)
        self._close_streams()
        self.turn = d.turn or self.turn + 1
        self.root_run = ev.run
        self.root_agent = d.agent or ev.agent
        self.root_streamed = False
        self._errors_shown = set()
        self.turn_started_at = ev.ts
        self.turn_ended_at = 0.0
        self.state = TaskState.RUNNING.value
        self.paused = False
        self.runs = {ev.run: RunInfo(ev.run, ev.agent, None, RunStatus.QUEUED, ev.ts)}
        self._add(Entry("user", agent=ev.agent, run=ev.run, text=d.text))

    def _on_turn_finished(self, ev: Event) -> None:
        d = stamped_data(ev, TurnFinished)
        self._close_streams()
        self.turn_ended_at = ev.ts
        self.state = d.state
        self.paused = False
        if d.output and not self.root_streamed:
            self._add(Entry("text", agent=self.root_agent or ev.agent, run=ev.run, text=d.output))
        # A finished turn waits for nobody: its questions are void.
        self.questions.clear()
        self._add(Entry("turn", agent=ev.agent, run=ev.run, data=TurnEnd(
            turn=d.turn or self.turn, status=d.status, stop_reason=d.stop_reason,
            error=d.error if self._first_time(d.error) else "", elapsed=self.elapsed(ev.ts))))
        if d.status in (RunStatus.INTERRUPTED, RunStatus.CANCELLED):
            self.note("stopped midway, nothing lost: /continue resumes it where it stopped")

    def _on_run_queued(self, ev: Event) -> None:
        d = stamped_data(ev, RunQueued)
        if d.run:
            self.runs[d.run] = RunInfo(d.run, d.agent or "?", d.parent or ev.run, RunStatus.QUEUED, ev.ts)

    def _on_slot_wait(self, ev: Event) -> None:
        d = stamped_data(ev, LlmSlotWait)
        info = self.runs.get(ev.run)
        if info is not None:
            info.slot_limit = (d.limit or 1) if d.waiting else 0

    def _on_run_started(self, ev: Event) -> None:
        d = stamped_data(ev, RunStarted)
        info = self.runs.get(ev.run)
        parent = d.parent or None
        if info is None:
            info = self.runs[ev.run] = RunInfo(ev.run, ev.agent, parent, RunStatus.RUNNING, ev.ts)
        info.status, info.started_at, info.agent = RunStatus.RUNNING, ev.ts, ev.agent
        info.unconfined = d.unconfined
        if parent:
            first = d.input.strip().splitlines()
            self._add(Entry("delegation", agent=ev.agent, run=ev.run,
                            data=DelegationStart(input=first[0] if first else "")))

    def _on_run_finished(self, ev: Event) -> None:
        d = stamped_data(ev, RunFinished)
        info = self.runs.get(ev.run)
        if info is not None:
            info.status, info.ended_at, info.slot_limit = d.status, ev.ts, 0
        self._show_chunk(ev, self._echo.forget(ev.run))
        self._close_streams(ev.run)
        for rid in [rid for rid, q in self.questions.items() if q.run == ev.run]:
            del self.questions[rid]
        if d.parent:
            started = info.started_at if info is not None and info.started_at else ev.ts
            self._add(Entry("delegation", agent=ev.agent, run=ev.run, data=DelegationEnd(
                status=d.status, stop_reason=d.stop_reason, error=d.error, elapsed=max(0.0, ev.ts - started))))

    def _on_stream_start(self, ev: Event) -> None:
        self._run_step[ev.run] = whole(ev.data, "step")
        if ev.data.get("model"):
            self.model = str(ev.data["model"])

    def _on_chunk(self, ev: Event) -> None:
        text = ev.data.get("text")
        if isinstance(text, str) and text:
            self._show_chunk(ev, self._echo.feed(ev.run, text))

    def _show_chunk(self, ev: Event, text: str) -> None:
        if not text:
            return
        slot = self._slots.get(ev.run)
        if slot is None:
            slot = self._slots[ev.run] = self._add(Entry("text", agent=ev.agent, run=ev.run))
            self._step_entry[(ev.run, self._run_step.get(ev.run, 0))] = slot
        slot.append(text)
        if ev.run == self.root_run and not self.root_streamed:
            self.root_streamed = _shows_text(slot.text)

    def _on_thinking(self, ev: Event) -> None:
        text = ev.data.get("text")
        if not isinstance(text, str) or not text:
            return
        slot = self._thinking.get(ev.run)
        if slot is None:
            slot = self._thinking[ev.run] = self._add(Entry("thinking", agent=ev.agent, run=ev.run))
        slot.append(text)

    def _on_stream_end(self, ev: Event) -> None:
        if ev.data.get("restarted"):
            # The provider stream restarted: what was shown of it will be streamed again.
            self._echo.restart(ev.run)
            slot = self._slots.get(ev.run)
            if slot is not None:
                slot.replace("")
            thinking = self._thinking.get(ev.run)
            if thinking is not None:
                thinking.replace("")
            if ev.run == self.root_run:
                self.root_streamed = self._root_shows_text()  # the void attempt's text no longer counts
            return
        self._close_streams(ev.run)

    def _on_response(self, ev: Event) -> None:
        d = ev.data
        text = str(d.get("text") or "")
        step = whole(d, "step") or self._run_step.get(ev.run, 0)
        entry = self._step_entry.get((ev.run, step)) or self._slots.get(ev.run)
        # What the echo held back is shown below from the complete reply, unless the reply is a repeat.
        self._echo.response(ev.run, visible_reply(text, final=True), whole(d, "tool_calls"),
                            bool(d.get("repeats")))
        if d.get("repeats"):
            shown = self._step_entry.pop((ev.run, step), None)  # it streamed before it could be told apart
            if shown is not None and shown in self.entries:
                self.entries.remove(shown)
            self._slots.pop(ev.run, None)
            self._close_streams(ev.run)
            return
        if entry is not None:
            if text and entry.text != clean(text):
                entry.replace(text)  # the complete reply is authoritative over what was streamed
        elif text:
            self._add(Entry("text", agent=ev.agent, run=ev.run, text=text))
        if ev.run == self.root_run and not self.root_streamed:
            self.root_streamed = _shows_text(text, final=True)
        self._close_streams(ev.run)

    def _root_shows_text(self) -> bool:
        """Whether any reply entry of the root run in the current turn shows text outside thought blocks."""
        for entry in reversed(self.entries):
            if entry.kind == "user":
                break  # the start of this turn
            if entry.kind == "text" and entry.run == self.root_run and _shows_text(
                    entry.text, final=entry.final):
                return True
        return False

    def _on_tool_start(self, ev: Event) -> None:
        d = ev.data
        self._slots.pop(ev.run, None)  # text after a tool call is a new paragraph
        call_id = str(d.get("call_id") or f"#{ev.seq}")
        self._tools[(ev.run, call_id)] = self._add(Entry("tool", agent=ev.agent, run=ev.run, data={
            "name": d.get("name", "?"), "brief": d.get("brief", ""), "arguments": d.get("arguments", ""),
            "done": False}))

    def _on_tool_result(self, ev: Event) -> None:
        d = ev.data
        call_id = str(d.get("call_id") or "")
        entry = self._tools.pop((ev.run, call_id), None)
        if entry is None:
            entry = self._add(Entry("tool", agent=ev.agent, run=ev.run, data={"name": d.get("name", "?"), "brief": ""}))
        if isinstance(entry.data, dict):
            entry.data.update(done=True, content=str(d.get("content") or ""), is_error=bool(d.get("is_error")),
                              duration=number(d, "duration"))
        entry.touch()

    def _on_llm_start(self, ev: Event) -> None:
        if ev.data.get("model"):
            self.model = str(ev.data["model"])

    def _on_llm_end(self, ev: Event) -> None:
        if ev.data.get("error"):
            self._show_chunk(ev, self._echo.release(ev.run))  # no complete reply follows: show what was held
        usage = ev.data.get("usage")
        if isinstance(usage, dict) and usage:
            self.usage.add(usage)
        if ev.data.get("error") and self._first_time(ev.data["error"]):
            self._add(Entry("error", agent=ev.agent, run=ev.run,
                            text=f"{ev.agent}: LLM call failed: {ev.data['error']}"))

    def _on_routed(self, ev: Event) -> None:
        if ev.data.get("model"):
            self.model = str(ev.data["model"])

    def _on_compressed(self, ev: Event, tier: str) -> None:
        d = ev.data
        original = whole(d, "original_tokens")
        compressed = whole(d, "compressed_tokens")
        saved = whole(d, "saved_tokens") or max(0, original - compressed)
        c = self.compression
        c.count += 1
        c.saved += saved
        c.largest_original = max(c.largest_original, original)
        c.last_tier = str(d.get("tier") or tier)
        label = f"{tier} " if tier else ""
        self._add(Entry("notice", agent=ev.agent, run=ev.run,
                        text=f"⧉ {ev.agent}: context {label}compressed {original:,} → {compressed:,} tokens"))

    def _on_context_status(self, ev: Event) -> None:
        d = ev.data
        parts = d.get("parts")
        self.gauges[ev.run] = ContextGauge(
            run=ev.run, agent=ev.agent, step=whole(d, "step"), used=whole(d, "used"), threshold=whole(d, "threshold"),
            source=str(d.get("source") or ""), window=whole(d, "window"), measured=bool(d.get("measured")),
            parts={str(k): whole(parts, k) for k in parts} if isinstance(parts, dict) else {})
        self.gauge_run = ev.run

    def gauge(self) -> ContextGauge | None:
        """The gauge the status line shows: the run that reported last while it runs, else the root's."""
        latest = self.gauges.get(self.gauge_run)
        info = self.runs.get(self.gauge_run)
        if latest is not None and (info is None or info.status in (RunStatus.RUNNING, RunStatus.STARTING)):
            return latest
        return self.gauges.get(self.root_run) or latest

    def _on_thinklink(self, ev: Event) -> None:
        d = ev.data
        items = d.get("plan")
        plan = [(str(p.get("status", "")), str(p.get("text", ""))) for p in (items if isinstance(items, list) else [])
                if isinstance(p, dict)]
        problems = d.get("problems")
        self.plans.append(PlanEntry(agent=str(d.get("agent") or ev.agent), goal=str(d.get("goal", "")),
                                    step=str(d.get("step", "")), reason=str(d.get("reason", "")), plan=plan,
                                    problems=[str(p) for p in problems] if isinstance(problems, list) else []))

    def _on_error(self, ev: Event) -> None:
        if self._first_time(ev.data.get("error", "")):
            self._add(Entry("error", agent=ev.agent, run=ev.run, text=f"{ev.agent}: {ev.data.get('error', '')}"))

    def _first_time(self, error: Any) -> bool:
        """False for an error text the log already shows this turn: one failure arrives as several events."""
        text = str(error).strip()
        if text and text in self._errors_shown:
            return False
        self._errors_shown.add(text)
        return True

    def _on_browser_page(self, ev: Event) -> None:
        d = ev.data
        info = self.runs.get(ev.run)
        if info is not None:
            url = str(d.get("url") or "")
            info.browser = f"{d.get('action', '?')}{' → ' + url[:200] if url else ''}"
        if d.get("artifact"):
            self._add(Entry("notice", agent=ev.agent, run=ev.run, text=f"screenshot saved: {d['artifact']}"))

    def _on_log(self, ev: Event) -> None:
        level = str(ev.data.get("level", "info")).lower()
        if level in ("warning", "warn", "error"):
            self._add(Entry("error" if level == "error" else "notice", agent=ev.agent, run=ev.run,
                            text=f"{ev.agent}: {ev.data.get('message', '')}"))

    def _on_help_needed(self, ev: Event) -> None:
        q = Question.read(ev.data)
        if q is None:  # no id, kind or prompt: nothing anyone could answer
            return
        if not q.task:
            q.task = ev.task
        if not q.run:
            q.run = ev.run
        if not q.agent:
            q.agent = ev.agent
        if not q.asked_at:
            q.asked_at = ev.ts
        self.questions[q.request_id] = q
        self._slots.pop(ev.run, None)  # what the run says after the answer is a new paragraph
        if self.state == TaskState.RUNNING.value:
            self.state = TaskState.WAITING.value
        self._add(Entry("question", agent=ev.agent, run=ev.run, data=q))

    def _on_help_response(self, ev: Event) -> None:
        d = stamped_data(ev, UserHelpResponse)
        self.questions.pop(d.request_id, None)
        if not self.questions and self.state == TaskState.WAITING.value:
            self.state = TaskState.RUNNING.value
        value = "cancelled" if d.cancelled else d.answer.get("value", "")
        by = "" if d.request_id in self.answered_here else d.by
        self._add(Entry("answer", agent=ev.agent, run=ev.run, data=AnswerShown(value=str(value), by=by)))

    def _on_background_work(self, ev: Event) -> None:
        d = stamped_data(ev, BackgroundWork)
        if self.turn_running:
            return  # a new turn already runs: its own state says it
        self.state = d.state
        if d.running:
            names = ", ".join(f"{i.agent} {i.subagent}" for i in d.running)
            self.note(f"⧗ working on in the background after the turn: {names} — the next turn gets the results; "
                      "/cancel stops it")
        else:
            self.note("⧗ the background work has ended; the next turn gets its results")

    def _on_workflow_decision(self, ev: Event) -> None:
        d = WorkflowDecision.read(ev.data)
        if d is None:
            return
        if d.error:
            self.note(f"◆ {d.workflow} stopped: {d.error}", error=True)
        elif d.agent:
            self.note(f"◆ {d.workflow} {d.step}: {d.agent} — {d.task} ({d.reason})")
        else:
            self.note(f"◆ {d.workflow} {d.step}: no step — {d.situation} → {d.action}")

    def _on_paused(self, ev: Event) -> None:
        self.paused = True
        if self.turn_running:
            self.state = TaskState.PAUSED.value
        self._add(Entry("notice", text="⏸ paused — /continue resumes"))

    def _on_resumed(self, ev: Event) -> None:
        self.paused = False
        if self.state == TaskState.PAUSED.value:
            self.state = TaskState.WAITING.value if self.questions else TaskState.RUNNING.value
        self._add(Entry("notice", text="▶ continued"))


def _shows_text(text: str, *, final: bool = False) -> bool:
    """Whether a reply shows any words once its `<thought>` blocks are hidden."""
    if "<" not in text:
        return bool(text.strip())  # nothing to hide: skip the scan (this runs for every streamed chunk)
    return bool(visible_reply(text, final=final).strip())


_HANDLERS = {
    EventType.TURN_STARTED.value: TaskView._on_turn_started,
    EventType.TURN_FINISHED.value: TaskView._on_turn_finished,
    EventType.BACKGROUND_WORK.value: TaskView._on_background_work,
    EventType.WORKFLOW_DECISION.value: TaskView._on_workflow_decision,
    EventType.RUN_QUEUED.value: TaskView._on_run_queued,
    EventType.RUN_STARTED.value: TaskView._on_run_started,
    EventType.RUN_FINISHED.value: TaskView._on_run_finished,
    EventType.LLM_SLOT_WAIT.value: TaskView._on_slot_wait,
    EventType.AI_STREAM_START.value: TaskView._on_stream_start,
    EventType.AI_CHUNK.value: TaskView._on_chunk,
    EventType.THINKING.value: TaskView._on_thinking,
    EventType.AI_STREAM_END.value: TaskView._on_stream_end,
    EventType.AI_RESPONSE.value: TaskView._on_response,
    EventType.TOOL_CALL_START.value: TaskView._on_tool_start,
    EventType.TOOL_CALL_RESULT.value: TaskView._on_tool_result,
    EventType.BROWSER_PAGE.value: TaskView._on_browser_page,
    EventType.LLM_CALL_START.value: TaskView._on_llm_start,
    EventType.LLM_CALL_END.value: TaskView._on_llm_end,
    EventType.MODEL_ROUTED.value: TaskView._on_routed,
    EventType.THINKLINK_ENTRY.value: TaskView._on_thinklink,
    EventType.CONTEXT_STATUS.value: TaskView._on_context_status,
    EventType.CONVERSATION_ERROR.value: TaskView._on_error,
    EventType.LOG.value: TaskView._on_log,
    EventType.USER_HELP_NEEDED.value: TaskView._on_help_needed,
    EventType.USER_HELP_RESPONSE.value: TaskView._on_help_response,
    EventType.TASK_PAUSED.value: TaskView._on_paused,
    EventType.TASK_RESUMED.value: TaskView._on_resumed,
}
