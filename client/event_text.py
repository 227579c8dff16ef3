"""Plain-text and JSON-lines rendering of a task's event stream, for `yagent run` and `yagent logs`."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

from yagent.ipc.daemon_events import (
    BackgroundWork,
    LlmSlotWait,
    RunFinished,
    RunStarted,
    TurnFinished,
    TurnStarted,
    UserHelpResponse,
)
from yagent.ipc.event_data import WorkflowDecision
from yagent.ipc.messages import Event, Question
from yagent.ipc.vocabulary import EventType, RunStatus

from .event_fields import number, whole
from .humanize import age
from .reply_echo import ReplyEcho
from .stamped import stamped_data
from .thought_filter import ThoughtFilter, visible_reply

__all__ = ["JsonLinesPrinter", "TextPrinter", "answer_hint", "one_line"]

# Events the plain form says nothing about: their content shows through other events (a reply's text,
# a tool's result), or they are bookkeeping. `--json` has every event.
_UNSAID = frozenset({EventType.AI_STREAM_START, EventType.LLM_CALL_START, EventType.MODEL_INFO, EventType.MODEL_ROUTED,
                     EventType.CONTEXT_LOADED, EventType.THINKLINK_ENTRY, EventType.CONVERSATION_RESULT,
                     EventType.RUN_QUEUED,  # a queued run's start says it all
                     EventType.CONTEXT_STATUS})  # every step's gauge: compactions are said when they happen
_COMPRESSED = {EventType.CONTEXT_COMPRESSED: "", EventType.CONTEXT_EMERGENCY_COMPRESSED: "emergency ",
               EventType.CONTEXT_ULTIMATE_COMPRESSED: "ultimate "}


def answer_hint(task: str, request_id: str, options: Sequence[str] = ()) -> str:
    """How to answer a question from any terminal, naming the accepted values when there is a fixed set."""
    values = f" (VALUE: {', '.join(options)})" if options else ""
    return f"answer it from any terminal: `yagent attach {task}`, or `yagent answer {task} {request_id} VALUE`{values}"


def one_line(text: str, limit: int = 120) -> str:
    """A payload summarised on one line: its first line, cut at a word, saying what was left out."""
    lines = [line for line in str(text).splitlines() if line.strip()]
    if not lines:
        return ""
    first = " ".join(lines[0].split())
    if len(first) > limit:
        cut = first.rfind(" ", 0, limit)
        first = first[: cut if cut > limit // 2 else limit] + "…"
    elif len(lines) > 1:
        first += " …"
    return first + (f" (+{len(lines) - 1} lines)" if len(lines) > 1 else "")


class TextPrinter:
    """Human-readable stream of a task's events.

    By default (`yagent run`, `-p`): the reply text as it streams, one line per notable event.
    `verbose` (`run -v`, `logs`): a record a person can read of everything that happened — reasoning
    joined per step, every tool call and its result on a line each, delegations, and each turn's start and
    outcome. `blocks` (`logs`): each step's text printed whole when the step ends rather than as it
    streams, so that runs streaming at the same time never interleave mid-sentence.
    An answer sent again after a reminder is shown once (`ReplyEcho`).
    """

    def __init__(self, out: TextIO = sys.stdout, *, verbose: bool = False, blocks: bool = False) -> None:
        self.out = out
        self.verbose = verbose
        self.blocks = blocks
        self._stream_run: str | None = None  # run whose text is mid-line
        self._root_text_final = False  # the root run printed reply text in a stream that completed
        self.root_run: str | None = None
        self._turn_started_at = 0.0
        self._filters: dict[str, ThoughtFilter] = {}  # per run: `<thought>` blocks are not printed
        self._open_text: set[str] = set()  # runs whose open stream printed text (void if it restarts)
        self._retried: set[str] = set()  # runs whose failed model call is about to be retried
        self._echo = ReplyEcho()
        self._thinking: dict[str, list[str]] = {}  # per run: reasoning fragments of the current step
        self._partial: dict[str, list[str]] = {}  # per run, with `blocks`: the current step's text so far
        self._agents: dict[str, str] = {}  # run -> agent, for the runs of the current turn
        self._errors_said: set[str] = set()  # error texts printed this turn: one failure arrives as several events
        self._handlers: dict[str, Callable[[Event], None]] = {
            EventType.TURN_STARTED: self._turn_started, EventType.TURN_FINISHED: self._turn_finished,
            EventType.RUN_STARTED: self._run_started,
            EventType.RUN_FINISHED: self._run_finished, EventType.THINKING: self._thinking_fragment,
            EventType.AI_CHUNK: self._chunk, EventType.AI_STREAM_END: self._stream_end,
            EventType.AI_RESPONSE: self._response, EventType.LLM_CALL_END: self._llm_call_end,
            EventType.TOOL_CALL_START: self._tool_start, EventType.TOOL_CALL_RESULT: self._tool_result,
            EventType.USER_HELP_NEEDED: self._question, EventType.USER_HELP_RESPONSE: self._answered,
            EventType.TASK_PAUSED: self._paused, EventType.TASK_RESUMED: self._resumed,
            EventType.CONVERSATION_ERROR: self._conversation_error, EventType.LOG: self._log,
            EventType.LLM_SLOT_WAIT: self._slot_wait, EventType.BACKGROUND_WORK: self._background_work,
            EventType.WORKFLOW_DECISION: self._workflow_decision,
            EventType.BROWSER_PAGE: self._browser_page,
            **{t: self._compressed for t in _COMPRESSED},
        }

    @property
    def streamed_root_text(self) -> bool:
        """Whether the root run's answer was printed as it streamed (then the turn's output is not repeated).
        Text of a stream that restarted does not count: it was cut off."""
        return self._root_text_final or (self.root_run is not None and self.root_run in self._open_text)

    # -- writing ---------------------------------------------------------------------------------------

    def end_line(self) -> None:
        """Finish a line left open by streamed text, so that what is printed next starts on its own line."""
        self._end_line()
        self.out.flush()

    def _end_line(self) -> None:
        if self._stream_run is not None:
            self.out.write("\n")
            self._stream_run = None

    def _line(self, text: str) -> None:
        self._end_line()
        self.out.write(text + "\n")

    def _write_reply(self, ev: Event, text: str) -> None:
        if not text:
            return
        if self._stream_run != ev.run:
            self._end_line()
            if ev.run != self.root_run:
                self.out.write(f"[{ev.agent}] ")
            self._stream_run = ev.run
        self._open_text.add(ev.run)
        self.out.write(text)

    def _close_text(self, ev: Event) -> None:
        """The step's text is complete: it counts as the run's answer, and what follows starts a new line."""
        if ev.run in self._open_text:
            self._open_text.discard(ev.run)
            if ev.run == self.root_run:
                self._root_text_final = True
        if self._stream_run == ev.run:
            self._end_line()  # the run's next reply (a reminder's answer, say) starts on a line of its own

    def _block(self, ev: Event, text: str, note: str = "") -> None:
        """One step's text, whole (`blocks`)."""
        text = text.lstrip("\n").rstrip()
        if not text:
            return
        self._write_reply(ev, text)
        if note:
            self.out.write(f" {note}")
        self._close_text(ev)

    def _flush_thinking(self, ev: Event) -> None:
        fragments = self._thinking.pop(ev.run, None)
        text = "".join(fragments or ()).strip()
        if text:
            self._line(f"  ✻ {ev.agent} thinking")
            for line in text.splitlines():
                self._line(f"    {line}".rstrip())

    def _release(self, ev: Event, *, run_ended: bool = False) -> None:
        """The step ended without its complete reply (an error, the run's end): print what was held back."""
        self._flush_thinking(ev)
        if self.blocks:
            self._block(ev, visible_reply("".join(self._partial.pop(ev.run, ())), final=True), "[cut off]")
        held = self._echo.forget(ev.run) if run_ended else self._echo.release(ev.run)
        if held:
            self._write_reply(ev, held)
            self._close_text(ev)

    # -- events ----------------------------------------------------------------------------------------

    def handle(self, ev: Event) -> None:
        self._agents[ev.run] = ev.agent
        handler = self._handlers.get(ev.type)
        if handler is not None:
            handler(ev)
        elif self.verbose and ev.type not in _UNSAID:
            summary = one_line(json.dumps(ev.data, ensure_ascii=False, default=str), 100)
            self._line(f"  · {ev.agent} {ev.type}: {summary}" if summary else f"  · {ev.agent} {ev.type}")
        if ev.type == EventType.LLM_CALL_END:
            self._retried.discard(ev.run)
        self.out.flush()

    def _turn_started(self, ev: Event) -> None:
        self.root_run = ev.run
        self._root_text_final = False  # `yagent logs` prints every turn: each one's answer counts anew
        self._open_text.clear()
        self._errors_said.clear()
        self._turn_started_at = ev.ts
        started = stamped_data(ev, TurnStarted)
        if started.resumes:
            self._line(f"▶ turn {started.turn} resumes turn {started.resumes} where it stopped")
        elif self.verbose:
            self._line(f"▶ turn {started.turn}: {one_line(started.text, 200)}")

    def _turn_finished(self, ev: Event) -> None:
        for run, agent in self._agents.items():  # a run cut off without its end event still shows its text
            self._release(Event(ev.seq, ev.task, run, agent, ev.type, ev.ts, {}), run_ended=True)
        self._agents.clear()
        finished = stamped_data(ev, TurnFinished)
        if not self.streamed_root_text and finished.output:
            self._line(finished.output)
        self._end_line()
        error = "" if finished.error.strip() in self._errors_said else finished.error
        if self.verbose:
            took = f" after {age(ev.ts - self._turn_started_at)}" if self._turn_started_at else ""
            self._line(f"■ turn {finished.turn} {finished.status} ({finished.stop_reason}){took}"
                       + (f": {error}" if error else ""))
        elif finished.status != RunStatus.DONE:
            self._line(f"✗ turn ended: {finished.status} ({finished.stop_reason}) {error}".rstrip())
        if finished.status in (RunStatus.INTERRUPTED, RunStatus.CANCELLED) and not self.verbose:
            # Not lost: the turn resumes where it stopped. (Not in a task's log: a past turn may be resumed.)
            self._line(f"  `yagent continue {ev.task}` resumes it where it stopped")

    def _run_started(self, ev: Event) -> None:
        started = stamped_data(ev, RunStarted)
        if started.parent:
            task = f": {one_line(started.input)}" if self.verbose and started.input.strip() else ""
            self._line(f"  → {ev.agent} started ({ev.run}){task}")

    def _run_finished(self, ev: Event) -> None:
        self._release(ev, run_ended=True)
        finished = stamped_data(ev, RunFinished)
        if finished.parent:
            err = f": {finished.error}" if finished.error and finished.error.strip() not in self._errors_said else ""
            self._line(f"  ← {ev.agent} {finished.status} ({finished.stop_reason}){err}")

    def _thinking_fragment(self, ev: Event) -> None:
        if self.verbose:
            self._thinking.setdefault(ev.run, []).append(str(ev.data.get("text", "")))

    def _chunk(self, ev: Event) -> None:
        self._flush_thinking(ev)
        text = str(ev.data.get("text", ""))
        if self.blocks:
            self._partial.setdefault(ev.run, []).append(text)
            return
        visible = self._filters.setdefault(ev.run, ThoughtFilter()).feed(text)
        self._write_reply(ev, self._echo.feed(ev.run, visible))

    def _stream_end(self, ev: Event) -> None:
        if ev.data.get("restarted"):
            self._thinking.pop(ev.run, None)  # the attempt is void, its reasoning with it
            self._partial.pop(ev.run, None)
            self._restart_stream(ev)
            return
        self._flush_thinking(ev)
        self._retried.discard(ev.run)  # a restart inside the engine was followed by a stream that ended
        if self.blocks:
            return  # the step's text is printed whole with its `ai_response`
        tail = self._filters.pop(ev.run, ThoughtFilter()).finish()
        self._write_reply(ev, self._echo.feed(ev.run, tail))
        if not self._echo.holding(ev.run):
            self._close_text(ev)

    def _restart_stream(self, ev: Event) -> None:
        """The model call is retried after partial output: what this attempt printed is void. Printed text
        cannot be taken back, so it is marked as cut off; text still held back is dropped."""
        self._filters.pop(ev.run, None)
        self._echo.restart(ev.run)
        self._retried.add(ev.run)
        if ev.run in self._open_text:
            self._open_text.discard(ev.run)
            self._line(f"  ↻ {ev.agent}: the reply above was cut off; the model call is retried")

    def _response(self, ev: Event) -> None:
        d = ev.data
        self._flush_thinking(ev)
        text = visible_reply(str(d.get("text") or ""), final=True)
        repeats = bool(d.get("repeats"))
        tool_calls = whole(d, "tool_calls")
        if self.blocks:
            self._partial.pop(ev.run, None)
            if not repeats:
                self._block(ev, text)
        else:
            held = self._echo.response(ev.run, text, tool_calls, repeats)
            if held:
                self._write_reply(ev, held)
                self._close_text(ev)
        if repeats and self.verbose:
            self._line(f"  ↺ {ev.agent} sent the same answer again")

    def _llm_call_end(self, ev: Event) -> None:
        error = ev.data.get("error")
        if not error:
            return
        if ev.run in self._retried:
            # Retries of an unreachable provider can take minutes: say why nothing is printed meanwhile.
            self._line(f"  ↻ {ev.agent}: the model call failed, retrying: {error}")
        else:
            self._release(ev)

    def _tool_start(self, ev: Event) -> None:
        self._flush_thinking(ev)
        d = ev.data
        self._line(f"  ⚙ {ev.agent}: {d.get('name', '?')} {one_line(str(d.get('brief', '')))}".rstrip())

    def _tool_result(self, ev: Event) -> None:
        d = ev.data
        if d.get("is_error"):
            self._line(f"    ✗ {d.get('name', '?')}: {one_line(str(d.get('content', '')), 200)}")
        elif self.verbose:
            took = number(d, "duration")
            summary = one_line(str(d.get("content", "")))
            self._line(f"    ✓ {d.get('name', '?')} ({took:.1f}s){': ' + summary if summary else ''}")

    def _browser_page(self, ev: Event) -> None:
        d = ev.data
        url = one_line(str(d.get("url", "")), 160)
        self._line(f"  ⌂ {ev.agent}: {d.get('action', '?')}{' → ' + url if url else ''}")
        if d.get("artifact"):
            self._line(f"    screenshot saved: {d['artifact']}")

    def _question(self, ev: Event) -> None:
        question = Question.read(ev.data)
        if question is None:
            return
        opts = f" [{' / '.join(question.options)}]" if question.options else ""
        self._line(f"? {ev.agent} asks: {question.prompt}{opts}")
        self._line(f"  {answer_hint(ev.task, question.request_id, question.options)}")

    def _answered(self, ev: Event) -> None:
        if self.verbose:
            self._line(f"  answered: {stamped_data(ev, UserHelpResponse).answer}")

    def _paused(self, ev: Event) -> None:
        self._line("⏸ paused — `yagent continue " + ev.task + "` resumes")

    def _resumed(self, ev: Event) -> None:
        self._line("▶ continued")

    def _conversation_error(self, ev: Event) -> None:
        error = str(ev.data.get("error", ev.data))
        self._errors_said.add(error.strip())
        self._line(f"! {ev.agent}: {error}")

    def _log(self, ev: Event) -> None:
        level = str(ev.data.get("level", "")).lower()
        if self.verbose and level in ("warning", "warn", "error"):
            self._line(f"  ! {ev.agent}: {one_line(str(ev.data.get('message', '')), 200)}")

    def _background_work(self, ev: Event) -> None:
        work = stamped_data(ev, BackgroundWork)
        if work.running:
            names = ", ".join(f"{i.agent} {i.subagent}" for i in work.running)
            self._line(f"⧗ working on in the background: {names} — `yagent ps` shows it, the next turn gets the "
                       f"results, `yagent cancel {ev.task}` stops it")
        else:
            self._line(f"⧗ background work ended; task {ev.task} is {work.state}")

    def _workflow_decision(self, ev: Event) -> None:
        decision = WorkflowDecision.read(ev.data)
        if decision is None:
            return
        if decision.error:
            self._line(f"◆ {decision.workflow} stopped: {decision.error}")
        elif decision.agent:
            self._line(f"◆ {decision.workflow} {decision.step}: {decision.agent} — {one_line(decision.task, 160)} "
                       f"({decision.reason})")
        else:
            self._line(f"◆ {decision.workflow} {decision.step}: no step — {decision.situation} → {decision.action}")

    def _slot_wait(self, ev: Event) -> None:
        wait = stamped_data(ev, LlmSlotWait)
        if self.verbose and wait.waiting:
            self._line(f"  ⋯ {ev.agent} waits for a model slot ([llm] max_in_flight_requests = {wait.limit})")

    def _compressed(self, ev: Event) -> None:
        if self.verbose:
            d = ev.data
            self._line(f"  ⧉ {ev.agent}: context {_COMPRESSED[ev.type]}compressed "
                       f"{whole(d, 'original_tokens'):,} → {whole(d, 'compressed_tokens'):,} tokens")


class JsonLinesPrinter:
    """One JSON object per event with stable field names, and a final `result` line."""

    def __init__(self, out: TextIO = sys.stdout) -> None:
        self.out = out

    def end_line(self) -> None:
        """Nothing to finish: every JSON line is written whole."""

    def handle(self, ev: Event) -> None:
        self.out.write(json.dumps(ev.to_json(), ensure_ascii=False) + "\n")
        if ev.type == EventType.TURN_FINISHED:
            d = stamped_data(ev, TurnFinished)
            self.result(ev.task, status=d.status, stop_reason=d.stop_reason, output=d.output, error=d.error)
        self.out.flush()

    def result(self, task: str, *, status: str, stop_reason: str = "", output: str = "", error: str = "") -> None:
        """The final line: how the turn ended (`status` is a RunStatus value, or "detached" when the client
        stopped following first) and its whole answer."""
        line = {"type": "result", "task": task, "status": status, "stop_reason": stop_reason, "output": output,
                "error": error}
        self.out.write(json.dumps(line, ensure_ascii=False) + "\n")
