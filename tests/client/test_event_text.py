"""The plain-text printer of `yagent run` / `yagent logs`: restarted streams and answers printed once."""

from __future__ import annotations

import io

from yagent.client.event_text import TextPrinter
from yagent.ipc import event_data
from yagent.ipc.messages import Event
from yagent.ipc.vocabulary import EventType, StopReason


class Printer:
    def __init__(self) -> None:
        self.out = io.StringIO()
        self.printer = TextPrinter(self.out)
        self.seq = 0

    def __call__(self, type_: str, data: dict, *, run: str = "r1", agent: str = "director") -> None:
        self.seq += 1
        self.printer.handle(Event(self.seq, "t1", run, agent, type_, 0.0, data))

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
