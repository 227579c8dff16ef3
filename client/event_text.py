"""Plain-text and JSON-lines rendering of a task's event stream, for `yagent run` and `yagent logs`."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TextIO

from yagent.ipc.daemon_events import RunFinished, RunStarted, TurnFinished, TurnStarted, UserHelpResponse
from yagent.ipc.messages import Event, Question
from yagent.ipc.vocabulary import EventType, RunStatus

from .stamped import stamped_data
from .thought_filter import ThoughtFilter

__all__ = ["JsonLinesPrinter", "TextPrinter", "answer_hint"]


def answer_hint(task: str, request_id: str, options: Sequence[str] = ()) -> str:
    """How to answer a question from any terminal, naming the accepted values when there is a fixed set."""
    values = f" (VALUE: {', '.join(options)})" if options else ""
    return f"answer it from any terminal: `yagent attach {task}`, or `yagent answer {task} {request_id} VALUE`{values}"


class TextPrinter:
    """Human-readable stream: streamed text as it arrives, one line per notable event."""

    def __init__(self, out: TextIO = sys.stdout, *, verbose: bool = False) -> None:
        self.out = out
        self.verbose = verbose
        self._stream_run: str | None = None  # run whose text is mid-line
        self._root_text_final = False  # the root run printed reply text in a stream that completed
        self.root_run: str | None = None
        self._filters: dict[str, ThoughtFilter] = {}  # per run: `<thought>` blocks are not printed
        self._open_text: set[str] = set()  # runs whose open stream printed text (void if it restarts)
        self._retried: set[str] = set()  # runs whose failed model call is about to be retried

    @property
    def streamed_root_text(self) -> bool:
        """Whether the root run's answer was printed as it streamed (then the turn's output is not repeated).
        Text of a stream that restarted does not count: it was cut off."""
        return self._root_text_final or (self.root_run is not None and self.root_run in self._open_text)

    def _end_stream(self, ev: Event) -> None:
        self._retried.discard(ev.run)  # a restart inside the engine was followed by a stream that ended
        self._write_reply(ev, self._filters.pop(ev.run, ThoughtFilter()).finish())
        if ev.run in self._open_text:
            self._open_text.discard(ev.run)
            if ev.run == self.root_run:
                self._root_text_final = True
        if self._stream_run == ev.run:
            self._end_line()  # the run's next reply (a reminder's answer, say) starts on a line of its own

    def _restart_stream(self, ev: Event) -> None:
        """The model call is retried after partial output: what this attempt printed is void. Printed text
        cannot be taken back, so it is marked as cut off; text still held back is dropped."""
        self._filters.pop(ev.run, None)
        self._retried.add(ev.run)
        if ev.run in self._open_text:
            self._open_text.discard(ev.run)
            self._line(f"  ↻ {ev.agent}: the reply above was cut off; the model call is retried")

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

    def handle(self, ev: Event) -> None:
        d = ev.data
        t = ev.type
        if t == EventType.TURN_STARTED:
            self.root_run = ev.run
            self._root_text_final = False  # `yagent logs` prints every turn: each one's answer counts anew
            self._open_text.clear()
            if self.verbose:
                started = stamped_data(ev, TurnStarted)
                self._line(f"▶ turn {started.turn}: {started.text}")
        elif t == EventType.AI_STREAM_END:
            if d.get("restarted"):
                self._restart_stream(ev)
            else:
                self._end_stream(ev)
        elif t == EventType.LLM_CALL_END and d.get("error") and ev.run in self._retried:
            # Retries of an unreachable provider can take minutes: say why nothing is printed meanwhile.
            self._line(f"  ↻ {ev.agent}: the model call failed, retrying: {d.get('error')}")
        elif t == EventType.AI_CHUNK:
            self._write_reply(ev, self._filters.setdefault(ev.run, ThoughtFilter()).feed(str(d.get("text", ""))))
        elif t == EventType.RUN_STARTED and stamped_data(ev, RunStarted).parent:
            self._line(f"  → {ev.agent} started ({ev.run})")
        elif t == EventType.RUN_FINISHED and (finished := stamped_data(ev, RunFinished)).parent:
            err = f": {finished.error}" if finished.error else ""
            self._line(f"  ← {ev.agent} {finished.status} ({finished.stop_reason}){err}")
        elif t == EventType.TOOL_CALL_START:
            self._line(f"  ⚙ {ev.agent}: {d.get('name', '?')} {d.get('brief', '')}".rstrip())
        elif t == EventType.TOOL_CALL_RESULT and d.get("is_error"):
            self._line(f"    ✗ {d.get('name', '?')}: {str(d.get('content', ''))[:200]}")
        elif t == EventType.USER_HELP_NEEDED and (question := Question.read(d)) is not None:
            opts = f" [{' / '.join(question.options)}]" if question.options else ""
            self._line(f"? {ev.agent} asks: {question.prompt}{opts}")
            self._line(f"  {answer_hint(ev.task, question.request_id, question.options)}")
        elif t == EventType.USER_HELP_RESPONSE:
            if self.verbose:
                self._line(f"  answered: {stamped_data(ev, UserHelpResponse).answer}")
        elif t == EventType.TASK_PAUSED:
            self._line("⏸ paused — `yagent continue " + ev.task + "` resumes")
        elif t == EventType.TASK_RESUMED:
            self._line("▶ continued")
        elif t == EventType.CONVERSATION_ERROR:
            self._line(f"! {ev.agent}: {d.get('error', d)}")
        elif t == EventType.TURN_FINISHED:
            finished_turn = stamped_data(ev, TurnFinished)
            if not self.streamed_root_text and finished_turn.output:
                self._line(finished_turn.output)
            self._end_line()
            if finished_turn.status != RunStatus.DONE:
                self._line(f"✗ turn ended: {finished_turn.status} ({finished_turn.stop_reason}) "
                           f"{finished_turn.error}".rstrip())
        elif self.verbose:
            self._line(f"  · {ev.agent} {t} {json.dumps(d)[:160]}")
        if t == EventType.LLM_CALL_END:
            self._retried.discard(ev.run)
        self.out.flush()


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
