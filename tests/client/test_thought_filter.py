"""`<thought>` blocks are hidden from the reply people read, also while it streams."""

from __future__ import annotations

import io

from yagent.client.event_text import TextPrinter
from yagent.client.thought_filter import ThoughtFilter, visible_reply
from yagent.ipc.messages import Event
from yagent.ipc.vocabulary import EventType

REPLY = "<thought>\ngoal: g\nreason: r\n</thought>\nThe answer is 42 <b>exactly</b>."


def test_complete_and_open_blocks_are_hidden_and_partial_tags_held_back() -> None:
    assert visible_reply(REPLY) == "The answer is 42 <b>exactly</b>."
    assert visible_reply("Before <thought>goal: g") == "Before "
    assert visible_reply("Before <tho") == "Before "
    assert visible_reply("Before <tho", final=True) == "Before <tho"
    assert visible_reply("x <thought>never closed", final=True) == "x <thought>never closed"


def test_streaming_in_tiny_chunks_yields_only_growth_and_the_same_text() -> None:
    for size in (1, 2, 3, 7):
        f = ThoughtFilter()
        seen = "".join(f.feed(REPLY[i:i + size]) for i in range(0, len(REPLY), size)) + f.finish()
        assert seen == "The answer is 42 <b>exactly</b>.", size


def test_the_plain_printer_streams_the_reply_without_its_thought() -> None:
    out = io.StringIO()
    printer = TextPrinter(out)

    def ev(seq: int, type_: str, data: dict) -> Event:
        return Event(seq, "t1", "r1", "director", type_, 0.0, data)

    printer.handle(ev(1, EventType.TURN_STARTED, {"turn": 1}))
    for i, start in enumerate(range(0, len(REPLY), 5)):
        printer.handle(ev(2 + i, EventType.AI_CHUNK, {"text": REPLY[start:start + 5]}))
    printer.handle(ev(99, EventType.AI_STREAM_END, {"step": 1}))
    assert out.getvalue() == "The answer is 42 <b>exactly</b>.\n"  # the finished reply ends its line


def test_the_conversation_log_hides_thought_blocks_and_thought_only_replies() -> None:
    from yagent.client.tui.render import LogRenderer
    from yagent.client.tui.state import TaskView

    view = TaskView(project="/p", task="t1")
    seq = iter(range(1, 100))

    def apply(run: str, type_: str, data: dict) -> None:
        view.apply(Event(next(seq), "t1", run, "director", type_, 0.0, data))

    apply("r1", EventType.TURN_STARTED, {"turn": 1, "text": "hi"})
    apply("r1", EventType.AI_STREAM_START, {"step": 1, "model": "m"})
    apply("r1", EventType.AI_CHUNK, {"text": "<thought>\ngoal: g\nreason: r\n</thought>\n"})
    apply("r1", EventType.AI_STREAM_END, {"step": 1})
    apply("r1", EventType.AI_STREAM_START, {"step": 2, "model": "m"})
    for start in range(0, len(REPLY), 4):
        apply("r1", EventType.AI_CHUNK, {"text": REPLY[start:start + 4]})
    apply("r1", EventType.AI_STREAM_END, {"step": 2})
    renderer = LogRenderer()
    texts = [e for e in view.entries if e.kind == "text"]
    assert len(texts) == 2
    assert renderer.entry_lines(texts[0], 80, False) == []  # only a thought: nothing in the log
    rendered = "".join(text for line in renderer.entry_lines(texts[1], 80, False) for _style, text in line)
    assert "The answer is 42 <b>exactly</b>." in rendered and "thought" not in rendered
