"""The plain-text printer of `yagent run` / `yagent logs`: restarted streams, answers printed once, a log a
person can read."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.client.scenes import reminded_answer
from yagent.client.event_text import TextPrinter
from yagent.client.tui.render import render_status, status_height
from yagent.client.tui.state import TaskView
from yagent.ipc import event_data
from yagent.ipc.daemon_events import BackgroundWork
from yagent.ipc.messages import Event, SubagentInfo
from yagent.ipc.vocabulary import EventType, StopReason, SubagentState, TaskState, TurnEndChoice


class Printer:
    def __init__(self) -> None:
        self.out = io.StringIO()
        self.printer = TextPrinter(self.out)
        self.seq = 0

    def __call__(self, type_: str, data: dict, *, run: str = "r1", agent: str = "director") -> None:
        self.seq += 1
        self.printer.handle(Event(self.seq, "t1", run, agent, type_, float(self.seq), data))

    @property
    def text(self) -> str:
        return self.out.getvalue()


def test_a_restarted_stream_is_marked_cut_off_and_never_taken_for_the_answer() -> None:
    p = Printer()
    p(EventType.TURN_STARTED, {"turn": 1})
    p(EventType.AI_STREAM_START, event_data.ai_stream_start(1, "m"))
    p(EventType.AI_CHUNK, event_data.ai_chunk("Half an ans"))
    p(EventType.AI_CHUNK, event_data.ai_chunk("wer <tho"))  # `<tho` is held back: it may start a thought block
    p(EventType.AI_STREAM_END, event_data.ai_stream_end(1, restarted=True))
    assert not p.printer.streamed_root_text
    lines = p.text.splitlines()
    assert lines[0] == "Half an answer "  # the held-back tail of the void attempt is never printed
    assert "cut off" in lines[1] and "retried" in lines[1]
    # The retry fails too; the turn's output is printed, since nothing complete was streamed.
    p(EventType.TURN_FINISHED, {"turn": 1, "status": "failed", "stop_reason": StopReason.LLM_ERROR,
                                "output": "Earlier words."})
    assert p.text.splitlines()[2] == "Earlier words."


def test_the_retried_stream_is_the_answer_and_is_printed_once() -> None:
    p = Printer()
    p(EventType.TURN_STARTED, {"turn": 1})
    p(EventType.AI_CHUNK, event_data.ai_chunk("Half"))
    p(EventType.AI_STREAM_END, event_data.ai_stream_end(1, restarted=True))
    p(EventType.AI_STREAM_START, event_data.ai_stream_start(1, "m"))
    p(EventType.AI_CHUNK, event_data.ai_chunk("The whole answer."))
    p(EventType.AI_STREAM_END, event_data.ai_stream_end(1))
    assert p.printer.streamed_root_text
    p(EventType.TURN_FINISHED, {"turn": 1, "status": "done", "stop_reason": StopReason.PLAIN_TEXT,
                                "output": "The whole answer."})
    lines = p.text.splitlines()
    assert lines[0] == "Half" and "cut off" in lines[1]
    assert lines[2:] == ["The whole answer."]


def test_a_restart_before_any_visible_text_prints_nothing() -> None:
    p = Printer()
    p(EventType.TURN_STARTED, {"turn": 1})
    p(EventType.AI_CHUNK, event_data.ai_chunk("<thought>\ngoal: g\n"))
    p(EventType.AI_STREAM_END, event_data.ai_stream_end(1, restarted=True))
    assert p.text == ""


def test_each_turn_of_the_log_prints_its_answer_when_it_was_not_streamed() -> None:
    p = Printer()
    p(EventType.TURN_STARTED, {"turn": 1}, run="r1")
    p(EventType.AI_CHUNK, event_data.ai_chunk("First answer."), run="r1")
    p(EventType.AI_STREAM_END, event_data.ai_stream_end(1), run="r1")
    p(EventType.TURN_FINISHED, {"turn": 1, "status": "done", "output": "First answer."}, run="r1")
    p(EventType.TURN_STARTED, {"turn": 2}, run="r2")
    p(EventType.TURN_FINISHED, {"turn": 2, "status": "done", "output": "Second answer."}, run="r2")
    assert p.text.splitlines() == ["First answer.", "Second answer."]


def feed(printer: Printer, events: list[tuple[str, dict]]) -> None:
    for type_, data in events:
        printer(type_, data)


def test_an_answer_sent_again_after_a_reminder_is_printed_once() -> None:
    again = "<thought>\ngoal: greet\n</thought>\nHello!  How can I help?"
    for blocks in (False, True):  # `yagent -p` as it streams, `yagent logs` per block
        p = Printer()
        p.printer.blocks = p.printer.verbose = blocks
        feed(p, reminded_answer("Hello! How can I help?", again, repeats=True))
        assert p.text.count("How can I help?") == 1, p.text


def test_while_it_streams_an_answer_that_may_be_the_same_again_is_held_back() -> None:
    p = Printer()
    feed(p, reminded_answer("Hello! How can I help?", "Hello! How can I help?", repeats=True, after=14))
    assert p.text == "Hello! How can I help?\n"


@pytest.mark.parametrize("second", ["Hello! I looked again: 2 files.", "Hello!"])
def test_a_different_answer_after_the_reminder_is_printed_too(second: str) -> None:
    p = Printer()
    feed(p, reminded_answer("Hello! How can I help?", second, repeats=False))
    assert p.text.splitlines() == ["Hello! How can I help?", second]


def log_printer() -> Printer:
    p = Printer()
    p.printer = TextPrinter(p.out, verbose=True, blocks=True)  # what `yagent logs` prints
    return p


def test_the_log_joins_fragments_per_step_and_keeps_parallel_runs_apart() -> None:
    p = log_printer()
    p(EventType.TURN_STARTED, {"turn": 1, "text": "compare the two files", "agent": "director"})
    p(EventType.AI_STREAM_START, event_data.ai_stream_start(1, "m"))
    for piece in ("Let ", "me t", "hink."):
        p(EventType.THINKING, event_data.thinking(piece))
    p(EventType.AI_STREAM_END, event_data.ai_stream_end(1))
    p(EventType.AI_RESPONSE, event_data.ai_response(1, "", 2))
    for run, agent in (("ra", "repo"), ("rb", "repo")):
        p(EventType.RUN_STARTED, {"agent": agent, "parent": "r1", "input": "read it\nthen report"}, run=run,
          agent=agent)
    for i in range(3):  # two runs of one agent stream at once
        p(EventType.AI_CHUNK, event_data.ai_chunk(f"A{i} "), run="ra", agent="repo")
        p(EventType.AI_CHUNK, event_data.ai_chunk(f"B{i} "), run="rb", agent="repo")
    for run, text in (("ra", "A0 A1 A2 "), ("rb", "B0 B1 B2 ")):
        p(EventType.AI_STREAM_END, event_data.ai_stream_end(1), run=run, agent="repo")
        p(EventType.AI_RESPONSE, event_data.ai_response(1, text, 1), run=run, agent="repo")
    p(EventType.TOOL_CALL_START, event_data.tool_call_start("c1", "read_file", '{"path": "a.py"}', "a.py"),
      run="ra", agent="repo")
    p(EventType.TOOL_CALL_RESULT, event_data.tool_call_result("c1", "read_file", "line one\n" * 40, False, 0.25),
      run="ra", agent="repo")
    p(EventType.TOOL_CALL_RESULT, event_data.tool_call_result("c2", "grep", "x" * 5000, True, 0.1),
      run="rb", agent="repo")
    p(EventType.RUN_FINISHED, {"status": "done", "stop_reason": "agent_exit", "parent": "r1"}, run="ra", agent="repo")
    p(EventType.TURN_FINISHED, {"turn": 1, "status": "failed", "stop_reason": StopReason.LLM_ERROR, "output": "",
                                "error": "provider down"})
    lines = p.text.splitlines()
    assert lines[0] == "▶ turn 1: compare the two files"
    assert lines[1:3] == ["  ✻ director thinking", "    Let me think."]  # fragments of one step, joined
    assert "[repo] A0 A1 A2" in lines and "[repo] B0 B1 B2" in lines  # never A0 B0 A1 B1 …
    assert "  → repo started (ra): read it … (+1 lines)" in lines
    assert "  ⚙ repo: read_file a.py" in lines
    assert "    ✓ read_file (0.2s): line one … (+39 lines)" in lines
    error = next(line for line in lines if line.startswith("    ✗ grep: "))
    assert error.endswith("…") and len(error) < 230  # summarised on one line, saying it was cut
    assert "  ← repo done (agent_exit)" in lines
    assert lines[-1] == "■ turn 1 failed (llm_error) after 23s: provider down"  # one second per event
    assert not any(EventType.AI_CHUNK in line or "thinking {" in line or EventType.AI_RESPONSE in line
                   for line in lines)


def test_a_turn_that_stopped_midway_says_how_to_resume_it_and_a_resumed_one_says_so() -> None:
    p = Printer()
    p(EventType.TURN_FINISHED, {"turn": 1, "status": "interrupted", "stop_reason": StopReason.INTERRUPTED,
                                "output": "", "error": "yagentd shut down before this finished"})
    p(EventType.TURN_STARTED, {"turn": 2, "text": "one", "resumes": 1}, run="r2")
    p(EventType.TURN_FINISHED, {"turn": 2, "status": "done", "stop_reason": StopReason.PLAIN_TEXT,
                                "output": "All done."}, run="r2")
    assert p.text.splitlines() == [
        "✗ turn ended: interrupted (interrupted) yagentd shut down before this finished",
        "  `yagent continue t1` resumes it where it stopped",
        "▶ turn 2 resumes turn 1 where it stopped",
        "All done."]


def test_the_log_says_how_every_turn_ended() -> None:
    p = log_printer()
    p(EventType.TURN_STARTED, {"turn": 1, "text": "one"})
    p(EventType.AI_RESPONSE, event_data.ai_response(1, "First answer.", 0))
    p(EventType.TURN_FINISHED, {"turn": 1, "status": "done", "stop_reason": StopReason.PLAIN_TEXT,
                                "output": "First answer."})
    p(EventType.TURN_STARTED, {"turn": 2, "text": "two"}, run="r2")
    p(EventType.TURN_FINISHED, {"turn": 2, "status": "cancelled", "stop_reason": "cancelled", "output": ""},
      run="r2")
    assert p.text.splitlines() == ["▶ turn 1: one", "First answer.", "■ turn 1 done (plain_text) after 2s",
                                   "▶ turn 2: two", "■ turn 2 cancelled (cancelled) after 1s"]


def test_a_step_cut_off_without_its_response_is_still_in_the_log() -> None:
    p = log_printer()
    p(EventType.TURN_STARTED, {"turn": 1, "text": "go"})
    p(EventType.AI_CHUNK, event_data.ai_chunk("Half an ans"))
    p(EventType.AI_CHUNK, event_data.ai_chunk("wer"))
    p(EventType.AI_STREAM_END, event_data.ai_stream_end(1))
    p(EventType.LLM_CALL_END, event_data.llm_call_end(1, "p", "m", None, 1.0, error="connection reset"))
    assert "Half an answer [cut off]" in p.text.splitlines()


def test_events_the_plain_form_does_not_know_are_one_short_line() -> None:
    p = log_printer()
    p("deploy_progress", {"stage": "upload", "files": ["a" * 300]}, agent="devops")
    (line,) = p.text.splitlines()
    assert line.startswith('  · devops deploy_progress: {"stage": "upload"') and line.endswith("…")
    assert len(line) < 140


GARBAGE = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=12),
                    st.lists(st.integers(), max_size=3),
                    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
                    st.sampled_from(["<thought>", "\n\n", 2**70, float("nan")]))
FIELDS = ["text", "step", "tool_calls", "repeats", "restarted", "error", "name", "brief", "content", "is_error",
          "duration", "turn", "status", "stop_reason", "output", "parent", "input", "waiting", "limit",
          "original_tokens", "compressed_tokens", "saved_tokens", "level", "message", "request_id", "kind", "prompt",
          "options", "answer", "by", "model", "usage", "plan", "goal", "tier", "state", "used", "threshold",
          "source", "window", "measured", "parts", "problems", "parse_failures", "requested"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([*EventType, "from_a_plugin"]), st.sampled_from(["r1", "r2"]),
                          st.dictionaries(st.sampled_from(FIELDS), GARBAGE, max_size=6)), max_size=12),
       st.booleans(), st.booleans())
def test_no_event_data_breaks_the_printer_or_the_task_view(events, verbose: bool, blocks: bool) -> None:
    # Agents' event data is whatever a worker, a third-party agent kind or an old event log put there.
    printer = TextPrinter(io.StringIO(), verbose=verbose, blocks=blocks)
    view = TaskView(task="t1")
    for seq, (type_, run, data) in enumerate(events, 1):
        ev = Event(seq, "t1", run, "director", type_, float(seq), data)
        printer.handle(ev)
        view.apply(ev)
    assert len(render_status(view, 100, 30, 1.0)) == status_height(view, 30)


def test_the_log_says_each_compaction_once_and_never_the_per_step_gauge() -> None:
    p = log_printer()
    for step in (1, 2, 3):
        p(EventType.CONTEXT_STATUS, event_data.context_status(step, 50_000 * step, 96_000, source="catalog",
                                                             window=128_000, measured=True, parts={}))
    p(EventType.CONTEXT_EMERGENCY_COMPRESSED, event_data.context_compressed("emergency", 150_000, 9_000, step=3))
    assert p.text.splitlines() == ["  ⧉ director: context emergency compressed 150,000 → 9,000 tokens"]


def test_background_work_after_a_turn_is_said_in_the_log_and_the_tui_and_its_end_too() -> None:
    kept = BackgroundWork(running=[SubagentInfo(subagent="a1b2c3d4e5", agent="chat", state=SubagentState.WORKING,
                                                background=TurnEndChoice.KEEP)]).to_wire()
    over = BackgroundWork(running=[], state=TaskState.DONE).to_wire()
    p = Printer()
    p(EventType.BACKGROUND_WORK, kept)
    p(EventType.BACKGROUND_WORK, over)
    assert "working on in the background: chat a1b2c3d4e5" in p.text and "yagent cancel t1" in p.text
    assert "background work ended; task t1 is done" in p.text
    view = TaskView(task="t1")
    view.apply(Event(1, "t1", "", "", EventType.BACKGROUND_WORK, 1.0, kept))
    assert view.display_state == TaskState.BACKGROUND and "chat a1b2c3d4e5" in view.entries[-1].text
    view.apply(Event(2, "t1", "", "", EventType.BACKGROUND_WORK, 2.0, over))
    assert view.display_state == TaskState.DONE
