"""The task view built from events: slots by run id, labels by agent name, totals, questions."""

from __future__ import annotations

from tests.client.scenes import Feed, reminded_answer, rich_view
from yagent.client.tui.render import LogRenderer, render_status
from yagent.ipc import event_data
from yagent.ipc.messages import Question
from yagent.ipc.vocabulary import EventType, StopReason, Unconfined


def _texts(view, kind="text"):
    return [(e.agent, e.text) for e in view.entries if e.kind == kind]


def test_parallel_runs_of_one_agent_stream_into_separate_slots_with_plain_labels() -> None:
    view = rich_view()
    coding = [(a, t) for a, t in _texts(view) if a == "coding"]
    assert coding == [("coding", "AAAA0 AAAA1 AAAA2 AAAA3 "), ("coding", "BBBB0 BBBB1 BBBB2 BBBB3 ")]
    lines = LogRenderer().window(view, 80, 500, False)[0]
    headers = ["".join(t for _s, t in line).strip() for line in lines if "● coding" in "".join(t for _s, t in line)]
    assert headers == ["● coding", "● coding"]  # never `coding#c1` or a run id


def test_events_without_a_run_coordinate_keep_one_slot_per_agent_name() -> None:
    f = Feed()
    f(EventType.TURN_STARTED, {"turn": 1, "text": "hi", "agent": "director"}, run="")
    for piece in ("a", "b", "c"):
        f(EventType.AI_CHUNK, {"text": piece}, run="")
    assert _texts(f.view) == [("director", "abc")]


def test_a_tool_call_or_question_starts_a_new_paragraph_of_the_same_run() -> None:
    f = Feed()
    f(EventType.TURN_STARTED, {"turn": 1, "text": "go", "agent": "director"})
    f(EventType.AI_CHUNK, {"text": "before"})
    f(EventType.TOOL_CALL_START, event_data.tool_call_start("c1", "grep", "{}", "TODO"))
    f(EventType.AI_CHUNK, {"text": "after tool"})
    f(EventType.USER_HELP_NEEDED, Question(request_id="q", kind="input", prompt="?").to_wire())
    f(EventType.AI_CHUNK, {"text": "after question"})
    assert [t for _a, t in _texts(f.view)] == ["before", "after tool", "after question"]


def test_complete_response_is_authoritative_and_a_restarted_stream_starts_over() -> None:
    f = Feed()
    f(EventType.TURN_STARTED, {"turn": 1, "text": "go", "agent": "director"})
    f(EventType.AI_STREAM_START, event_data.ai_stream_start(1, "m"))
    f(EventType.AI_CHUNK, {"text": "half a repl"})
    f(EventType.AI_STREAM_END, event_data.ai_stream_end(1, restarted=True))
    f(EventType.AI_CHUNK, {"text": "the whole reply"})
    f(EventType.AI_RESPONSE, event_data.ai_response(1, "the whole reply.", 0))
    assert _texts(f.view) == [("director", "the whole reply.")]


def test_turn_end_shows_the_output_when_nothing_streamed_and_clears_questions() -> None:
    f = Feed()
    f(EventType.TURN_STARTED, {"turn": 1, "text": "go", "agent": "director"})
    f(EventType.USER_HELP_NEEDED, Question(request_id="q1", kind="confirm", prompt="ok?").to_wire())
    assert f.view.display_state == "waiting for you"
    f(EventType.TURN_FINISHED, {"turn": 1, "state": "done", "status": "done", "stop_reason": "agent_exit",
                                "output": "final answer", "error": "", "run": "root"})
    assert f.view.display_state == "done" and not f.view.questions
    assert _texts(f.view) == [("director", "final answer")]


def test_streamed_output_is_not_repeated_at_turn_end() -> None:
    f = Feed()
    f(EventType.TURN_STARTED, {"turn": 1, "text": "go", "agent": "director"})
    f(EventType.AI_CHUNK, {"text": "streamed answer"})
    f(EventType.TURN_FINISHED, {"turn": 1, "state": "done", "status": "done", "output": "streamed answer"})
    assert _texts(f.view) == [("director", "streamed answer")]


def test_question_is_closed_by_any_response_and_by_its_run_ending() -> None:
    f = Feed()
    f(EventType.TURN_STARTED, {"turn": 1, "text": "go", "agent": "director"})
    for rid, run in (("a", "r1"), ("b", "r2")):
        f(EventType.USER_HELP_NEEDED, Question(request_id=rid, kind="confirm", prompt=rid, run=run).to_wire(), run=run)
    assert list(f.view.questions) == ["a", "b"]
    f(EventType.USER_HELP_RESPONSE, {"request_id": "a", "answer": {"value": "yes"}, "by": "client"})
    f(EventType.RUN_FINISHED, {"status": "cancelled", "stop_reason": "cancelled", "parent": "root"}, run="r2")
    assert f.view.questions == {}
    assert f.view.display_state == "running"


def test_replayed_events_are_applied_once() -> None:
    f = Feed()
    ev = f(EventType.TURN_STARTED, {"turn": 1, "text": "go", "agent": "director"})
    chunk = f(EventType.AI_CHUNK, {"text": "once"})
    f.view.apply(chunk)
    f.view.apply(ev)
    assert _texts(f.view) == [("director", "once")]
    assert len([e for e in f.view.entries if e.kind == "user"]) == 1


def test_usage_sums_normalised_counts_and_compression_share_is_capped() -> None:
    f = Feed()
    f(EventType.TURN_STARTED, {"turn": 1, "text": "go", "agent": "director"})
    for _ in range(2):
        f(EventType.LLM_CALL_END, event_data.llm_call_end(1, "p", "m", event_data.usage_data(1_000, 20, 800), 0.1))
    for original, compressed in ((10_000, 2_000), (10_000, 1_000), (6_000, 1_000)):
        f(EventType.CONTEXT_COMPRESSED, event_data.context_compressed("standard", original, compressed))
    u, c = f.view.usage, f.view.compression
    assert (u.input_tokens, u.output_tokens, u.cached_tokens, u.calls) == (2_000, 40, 1_600, 2)
    assert (c.count, c.saved, c.largest_original, c.percent) == (3, 22_000, 10_000, 100)
    status = "".join(t for _s, t in render_status(f.view, 160, 24, f.ts)[0])
    assert "tokens ↑2.0k (cached 1.6k) ↓40" in status
    assert "⧉ 3 −22.0k (100%)" in status


def test_pause_and_continue_show_in_the_state() -> None:
    f = Feed()
    f(EventType.TURN_STARTED, {"turn": 1, "text": "go", "agent": "director"})
    f(EventType.TASK_PAUSED, {"turn": 1})
    assert f.view.display_state == "paused"
    f(EventType.TASK_RESUMED, {"turn": 1})
    assert f.view.display_state == "running"


def test_runs_tree_nests_delegations_under_their_parent() -> None:
    view = rich_view()
    tree = [(depth, r.agent, r.status) for depth, r in view.live_runs()]
    assert tree == [(0, "director", "running"), (1, "coding", "done"), (1, "coding", "running")]


def test_thinklink_plans_keep_the_publishing_agent() -> None:
    view = rich_view()
    assert [(p.agent, p.goal, p.plan[0]) for p in view.plans] == [
        ("director", "翻译 README", ("done", "read")), ("coding", "part 1", ("doing", "write file"))]


def test_a_replaced_reply_is_rewrapped_not_appended_to() -> None:
    f = Feed()
    f(EventType.TURN_STARTED, {"turn": 1, "text": "go", "agent": "director"})
    f(EventType.AI_STREAM_START, event_data.ai_stream_start(1, "m"))
    f(EventType.AI_CHUNK, {"text": "draft " * 20})  # several lines at width 40
    renderer = LogRenderer()
    renderer.window(f.view, 40, 50, False)  # cache the streamed rendering
    f(EventType.AI_RESPONSE, event_data.ai_response(1, "final " * 30, 0))
    shown = ["".join(t for _s, t in line).strip() for line in renderer.window(f.view, 40, 50, False)[0]]
    assert not any("draft" in line for line in shown)
    assert sum(line.count("final") for line in shown) == 30


THOUGHT_ONLY = "<thought>\ngoal: answer\nreason: the chat agent knows\n</thought>\n"


def test_a_thought_only_stream_does_not_suppress_the_final_answer() -> None:
    f = Feed()
    f(EventType.TURN_STARTED, {"turn": 1, "text": "go", "agent": "director"})
    f(EventType.AI_STREAM_START, event_data.ai_stream_start(1, "m"))
    for start in range(0, len(THOUGHT_ONLY), 5):  # streamed in pieces, so partial tags are held back too
        f(EventType.AI_CHUNK, {"text": THOUGHT_ONLY[start:start + 5]})
    f(EventType.AI_STREAM_END, event_data.ai_stream_end(1))
    f(EventType.AI_RESPONSE, event_data.ai_response(1, THOUGHT_ONLY, 1))
    assert not f.view.root_streamed
    f(EventType.TURN_FINISHED, {"turn": 1, "state": "done", "status": "done", "stop_reason": "agent_exit",
                                "output": "the final answer"})
    assert _texts(f.view)[-1] == ("director", "the final answer")


def test_a_reply_with_words_after_its_thought_still_counts_as_streamed() -> None:
    f = Feed()
    f(EventType.TURN_STARTED, {"turn": 1, "text": "go", "agent": "director"})
    f(EventType.AI_CHUNK, {"text": THOUGHT_ONLY})
    assert not f.view.root_streamed
    f(EventType.AI_CHUNK, {"text": "the final answer"})
    assert f.view.root_streamed
    f(EventType.TURN_FINISHED, {"turn": 1, "state": "done", "status": "done", "output": "the final answer"})
    assert [t for _a, t in _texts(f.view)] == [THOUGHT_ONLY + "the final answer"]  # shown once


def test_text_of_a_restarted_stream_does_not_suppress_the_final_answer() -> None:
    f = Feed()
    f(EventType.TURN_STARTED, {"turn": 1, "text": "go", "agent": "director"})
    f(EventType.AI_STREAM_START, event_data.ai_stream_start(1, "m"))
    f(EventType.AI_CHUNK, {"text": "half an ans"})
    f(EventType.AI_STREAM_END, event_data.ai_stream_end(1, restarted=True))
    assert not f.view.root_streamed
    f(EventType.TURN_FINISHED, {"turn": 1, "state": "failed", "status": "failed", "stop_reason": StopReason.LLM_ERROR,
                                "output": "what was said before"})
    assert _texts(f.view)[-1] == ("director", "what was said before")


def test_one_failure_reported_by_several_events_is_shown_once_per_turn() -> None:
    f = Feed()
    error = "provider 'x' (model m) failed: HTTP 400: bad request"
    for turn in (1, 2):
        f(EventType.TURN_STARTED, {"turn": turn, "text": "go", "agent": "director"})
        f(EventType.LLM_CALL_END, event_data.llm_call_end(1, "x", "m", None, 0.1, error=error))
        f(EventType.CONVERSATION_ERROR, event_data.conversation_error(error))
        f(EventType.TURN_FINISHED, {"turn": turn, "status": "failed", "stop_reason": StopReason.LLM_ERROR,
                                    "error": error})
    errors = [e.text for e in f.view.entries if e.kind == "error"]
    assert errors == [f"director: LLM call failed: {error}"] * 2  # once in each turn
    turns = [e.data for e in f.view.entries if e.kind == "turn"]
    assert [t.error for t in turns] == ["", ""] and [t.stop_reason for t in turns] == [StopReason.LLM_ERROR] * 2
    other = Feed()
    other(EventType.TURN_STARTED, {"turn": 1, "text": "go", "agent": "director"})
    other(EventType.TURN_FINISHED, {"turn": 1, "status": "failed", "stop_reason": "panic", "error": "worker crashed"})
    assert [e.data.error for e in other.view.entries if e.kind == "turn"] == ["worker crashed"]


def test_a_run_waiting_for_a_model_slot_says_so_in_the_status_until_granted() -> None:
    f = Feed()
    f(EventType.TURN_STARTED, {"turn": 1, "text": "go", "agent": "director"})
    f(EventType.RUN_STARTED, {"agent": "director", "parent": None, "input": "go"})
    f(EventType.RUN_STARTED, {"agent": "coding", "parent": "root", "input": "edit"}, run="c1", agent="coding")
    f(EventType.LLM_SLOT_WAIT, {"waiting": True, "limit": 2}, run="c1", agent="coding")

    def status() -> str:
        return "\n".join("".join(t for _s, t in line) for line in render_status(f.view, 120, 30, f.ts))

    assert "1 waiting for a model slot (max 2 at once)" in status()
    assert "└ coding running" in status() and "· waiting for a model slot" in status()
    f(EventType.LLM_SLOT_WAIT, {"waiting": False, "limit": 2}, run="c1", agent="coding")
    assert "waiting for a model slot" not in status()


def test_an_answer_sent_again_after_a_reminder_shows_once() -> None:
    f = Feed()
    again = "<thought>\ngoal: greet\n</thought>\nHello!  How can I help?"  # the same words, other spacing
    for type_, data in reminded_answer("Hello! How can I help?", again, repeats=True):
        f(type_, data)
    assert _texts(f.view) == [("director", "Hello! How can I help?")]
    screen = "\n".join("".join(t for _s, t in line) for line in LogRenderer().window(f.view, 80, 200, False)[0])
    assert screen.count("How can I help?") == 1


def test_an_answer_sent_again_is_held_back_while_it_streams_not_shown_and_taken_back() -> None:
    f = Feed()
    for type_, data in reminded_answer("Hello! How can I help?", "Hello! How can I help?", repeats=True, after=14):
        f(type_, data)
    assert _texts(f.view) == [("director", "Hello! How can I help?")]  # mid-way through the second stream


def test_a_different_answer_after_the_reminder_shows_as_soon_as_it_differs() -> None:
    f = Feed()
    events = reminded_answer("Hello! How can I help?", "Hello! I looked again: 2 files.", repeats=False)
    cut = next(i for i, (t, d) in enumerate(events) if t == EventType.AI_CHUNK and d["text"] == " I ") + 1
    for type_, data in events[:cut]:
        f(type_, data)
    assert _texts(f.view) == [("director", "Hello! How can I help?"), ("director", "Hello! I ")]
    for type_, data in events[cut:]:
        f(type_, data)
    assert _texts(f.view) == [("director", "Hello! How can I help?"), ("director", "Hello! I looked again: 2 files.")]


def test_a_shorter_answer_that_matched_so_far_shows_at_its_response() -> None:
    f = Feed()
    for type_, data in reminded_answer("Hello! How can I help?", "Hello!", repeats=False):
        f(type_, data)
    assert _texts(f.view) == [("director", "Hello! How can I help?"), ("director", "Hello!")]


def test_a_run_the_kernel_does_not_confine_says_so_first_in_the_status_line_while_it_runs() -> None:
    f = Feed()
    f(EventType.TURN_STARTED, {"turn": 1, "text": "go", "agent": "director"})
    f(EventType.RUN_STARTED, {"agent": "director", "parent": None, "input": "go", "unconfined": Unconfined.FULL_YOLO})

    def status(width: int = 120) -> str:
        return "".join(t for _s, t in render_status(f.view, width, 30, f.ts)[0])

    assert "NOT CONFINED: --full-yolo" in status()
    assert "NOT CONFINED" in status(44)  # a narrow terminal drops the runs and tokens, not this
    f(EventType.RUN_FINISHED, {"status": "done", "stop_reason": "agent_exit"})
    assert "NOT CONFINED" not in status()
    f(EventType.RUN_STARTED, {"agent": "coding", "parent": None, "input": "go"}, run="c1", agent="coding")
    assert "NOT CONFINED" not in status()  # a confined run says nothing


def test_a_turn_that_stopped_midway_tells_how_to_resume_it() -> None:
    f = Feed()
    f(EventType.TURN_STARTED, {"turn": 1, "text": "go", "agent": "director"})
    f(EventType.TURN_FINISHED, {"turn": 1, "state": "interrupted", "status": "interrupted",
                                "stop_reason": StopReason.INTERRUPTED, "error": "yagentd shut down"})
    assert [e.text for e in f.view.entries if e.kind == "notice"] == [
        "stopped midway, nothing lost: /continue resumes it where it stopped"]
    f(EventType.TURN_STARTED, {"turn": 2, "text": "go", "agent": "director", "resumes": 1})
    f(EventType.TURN_FINISHED, {"turn": 2, "state": "done", "status": "done", "stop_reason": "agent_exit"})
    assert len([e for e in f.view.entries if e.kind == "notice"]) == 1  # a finished turn says nothing of it


def test_a_running_browser_agent_shows_its_last_action_and_url_and_a_screenshot_its_path() -> None:
    f = Feed()
    f(EventType.TURN_STARTED, {"turn": 1, "text": "go", "agent": "director"})
    f(EventType.RUN_STARTED, {"agent": "director", "parent": None, "input": "go"})
    f(EventType.RUN_STARTED, {"agent": "browser", "parent": "root", "input": "look"}, run="b1", agent="browser")
    f(EventType.BROWSER_PAGE, event_data.browser_page("browser_click", "http://127.0.0.1:5173/cart"), run="b1",
      agent="browser")

    def status() -> str:
        return "\n".join("".join(t for _s, t in line) for line in render_status(f.view, 160, 30, f.ts))

    assert "└ browser running" in status() and "· browser_click → http://127.0.0.1:5173/cart" in status()
    f(EventType.BROWSER_PAGE, event_data.browser_page("browser_screenshot", "http://127.0.0.1:5173/cart",
                                                      artifact="/h/tasks/t/artifacts/x.png"), run="b1",
      agent="browser")
    assert _texts(f.view, "notice") == [("browser", "screenshot saved: /h/tasks/t/artifacts/x.png")]
    assert "· browser_screenshot → http://127.0.0.1:5173/cart" in status()
