"""Event sequences that exercise every branch of the task view, for state and rendering tests."""

from __future__ import annotations

from typing import Any

from yagent.client.tui.state import TaskView
from yagent.ipc import event_data
from yagent.ipc.messages import Event, Question
from yagent.ipc.vocabulary import EventType, QuestionKind, StopReason

T0 = 1_000_000.0


class Feed:
    """Builds events with increasing seq and timestamps, and applies them to a view."""

    def __init__(self, view: TaskView | None = None, task: str = "t1") -> None:
        self.view = view or TaskView(project="/home/me/项目/demo", task=task)
        self.task = task
        self.seq = 0
        self.ts = T0

    def event(self, type_: str, data: dict[str, Any] | None = None, *, run: str = "root", agent: str = "director",
              dt: float = 0.5) -> Event:
        self.seq += 1
        self.ts += dt
        return Event(self.seq, self.task, run, agent, type_, self.ts, data or {})

    def __call__(self, type_: str, data: dict[str, Any] | None = None, **kw: Any) -> Event:
        ev = self.event(type_, data, **kw)
        self.view.apply(ev)
        return ev


def rich_view() -> TaskView:
    """A task mid-turn with everything the screen can show, CJK and long words included."""
    f = Feed()
    f(EventType.TURN_STARTED, {"turn": 1, "text": "把 README 翻译成英文, then check https://example.com/" + "x" * 80,
                               "agent": "director"})
    f(EventType.RUN_STARTED, {"agent": "director", "parent": None, "input": "…"})
    f(EventType.LLM_CALL_START, event_data.llm_call_start(1, "deepseek", "deepseek-chat"))
    f("thinking", event_data.thinking("先读文件。" * 30))
    f(EventType.AI_CHUNK, event_data.ai_chunk("我来看看这个项目。" * 12))
    f(EventType.LLM_CALL_END, event_data.llm_call_end(1, "deepseek", "deepseek-chat",
                                                event_data.usage_data(12_345, 456, 10_000), 1.2))
    f(EventType.TOOL_CALL_START, event_data.tool_call_start("c0", "read_file", '{"path": "README.md"}', "README.md"))
    f(EventType.TOOL_CALL_RESULT,
      event_data.tool_call_result("c0", "read_file", "第一行\n" + "line\n" * 30, False, 0.02))
    for i in (1, 2):
        f(EventType.RUN_QUEUED, {"agent": "coding", "parent": "root", "call_id": f"call_{i}", "run": f"c{i}"})
    for i in (1, 2):
        f(EventType.RUN_STARTED, {"agent": "coding", "parent": "root", "call_id": f"call_{i}", "pid": 10 + i,
                                  "depth": 1, "input": f"part {i}: 翻译第{i}节"}, run=f"c{i}", agent="coding")
    for k in range(4):
        for i in (1, 2):
            f(EventType.AI_CHUNK, event_data.ai_chunk(("AAAA" if i == 1 else "BBBB") + f"{k} "), run=f"c{i}",
              agent="coding")
    f(EventType.TOOL_CALL_START, event_data.tool_call_start("w1", "write_file", "{}", "docs/README.en.md " * 8),
      run="c1", agent="coding")
    f(EventType.TOOL_CALL_RESULT, event_data.tool_call_result("w1", "write_file", "permission denied: " + "/very" * 40,
                                                              True, 0.4), run="c1", agent="coding")
    f(EventType.CONTEXT_COMPRESSED, event_data.context_compressed("standard", 90_000, 30_000), agent="director")
    f(EventType.THINKLINK_ENTRY,
      event_data.thinklink_entry("director", "翻译 README", "delegate two parts", "parallel",
                                 [("done", "read"), ("doing", "translate"), ("todo", "review")]))
    f(EventType.THINKLINK_ENTRY, event_data.thinklink_entry("coding", "part 1", "write", "", [("doing", "write file")]),
      run="c1", agent="coding")
    f(EventType.RUN_FINISHED, {"status": "done", "stop_reason": "agent_exit", "error": "", "output": "ok",
                               "parent": "root", "call_id": "call_1"}, run="c1", agent="coding")
    f(EventType.CONVERSATION_ERROR, event_data.conversation_error("provider said: " + "z" * 150))
    q = Question(request_id="root.7", kind=QuestionKind.AUTHORIZE,
                 prompt="coding wants to run `rm -rf build/` (删除构建目录)",
                 details={"tool": "run_bash", "outside_paths": ["/etc/hosts"], "reason": "deletes files"},
                 task="t1", run="c2", agent="coding", asked_at=T0 + 100)
    f(EventType.USER_HELP_NEEDED, q.to_wire(), run="c2", agent="coding")
    return f.view


def reminded_answer(first: str, second: str, *, repeats: bool, chunk: int = 3,
                    after: int | None = None) -> list[tuple[str, dict[str, Any]]]:
    """A Director turn: a plain reply, a reminder (not an event), the reply again or another one, the end.
    `after`: stop after this many events, mid-way through the second reply's stream."""
    def stream(step: int, text: str) -> list[tuple[str, dict[str, Any]]]:
        pieces = [text[i:i + chunk] for i in range(0, len(text), chunk)]
        return [(EventType.AI_STREAM_START, event_data.ai_stream_start(step, "m")),
                *[(EventType.AI_CHUNK, event_data.ai_chunk(p)) for p in pieces],
                (EventType.AI_STREAM_END, event_data.ai_stream_end(step)),
                (EventType.AI_RESPONSE, event_data.ai_response(step, text, 0, repeats=step == 2 and repeats))]

    events = [(EventType.TURN_STARTED, {"turn": 1, "text": "hi", "agent": "director"}),
              *stream(1, first), *stream(2, second),
              (EventType.TURN_FINISHED, {"turn": 1, "state": "done", "status": "done",
                                         "stop_reason": StopReason.PLAIN_TEXT, "output": second})]
    return events if after is None else events[:after]
