"""Context compression inside the shared loop, in-process: a real engine over HTTP to the fake provider, real
tools and files. Tier 1 cuts read results, tier 2 summarises with the run's own model (scripted as the agent's
own next request), tier 3 rebuilds from the thinklink; each tier emits its event and hands the recorder the
whole new history; `/compact` forces a compaction; a thought block out of shape is counted and shown."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agent_harness import MARKERS
from tests.fake_provider import Failure, FakeProvider, Step, ToolCallSpec, UsageSpec
from tests.memory.rollout_fixtures import write_rollout
from yagent.ipc.compression_settings import CompressionSettings
from yagent.ipc.provider_config import parse_llm_config
from yagent.ipc.vocabulary import EventType, StopReason
from yagent.workers.agents.compaction import ContextCompactor
from yagent.workers.agents.delegation_replay import finished_steps
from yagent.workers.agents.loop import LoopConfig, LoopPolicy, run_agent_loop
from yagent.workers.agents.runtime import result_priority
from yagent.workers.context.emergency import COMPACTED_HEADING, SUMMARY_REQUEST
from yagent.workers.context.rule_truncation import CUT_MARK
from yagent.workers.context.thinklink import ThinkLink, read_thinklink
from yagent.workers.context.ultimate import REBUILT_HEADING
from yagent.workers.llm import Message, build_engine
from yagent.workers.memory import rollout_records as records
from yagent.workers.memory.replay import load_for_replay
from yagent.workers.tools import ToolContext, build_surface

REQUEST = "Read a.txt and b.txt, then say how many lines they hold together."


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        yield server


class _Recorder:
    def __init__(self) -> None:
        self.compactions: list[list[Message]] = []

    def appended(self, message: Message, step: int) -> None:
        pass

    def compacted(self, messages: list[Message], step: int) -> None:
        self.compactions.append(list(messages))

    def finished(self, step: int, outcome: Any, error: BaseException | None = None) -> None:
        pass


def _files(root: Path, lines: int = 260) -> None:
    for name in ("a.txt", "b.txt", "c.txt"):
        (root / name).write_text("".join(f"{name} line {i}: some words to make it weigh\n" for i in range(lines)))


def _thought(goal: str, doing: str, done: str = "") -> str:
    plan = (f"- [x] {done}\n" if done else "") + f"- [>] {doing}\n- [ ] report the count\n"
    return f"<thought>\ngoal: {goal}\nstep: going on\nreason: it is the next item\nplan:\n{plan}</thought>"


def _run(fake: FakeProvider, root: Path, settings: CompressionSettings, *,
         requested: Callable[[], bool] = lambda: False,
         seen: Callable[[str, dict], None] = lambda _t, _d: None) -> tuple[Any, list[tuple[str, dict]], _Recorder,
                                                                           LoopConfig]:
    events: list[tuple[str, dict]] = []

    def emit(type_: str, data: dict) -> None:
        seen(type_, data)
        events.append((type_, data))
    config = {"global": {"llm": {"use_provider": "fake", "providers": {"fake": fake.provider_table()}}},
              "llm": {"max_retries": 0}}
    surface = build_surface("coding")
    link = ThinkLink()
    recorder = _Recorder()

    async def boundary() -> None:
        pass

    cfg = LoopConfig(
        agent="coding", engine=build_engine(parse_llm_config(config, {}), agent="coding"), surface=surface,
        tool_ctx=ToolContext(project_root=root, run_id="r-test", emit=lambda t, d: events.append((t, dict(d)))),
        messages=[Message.system(MARKERS["coding"] + " (test)"), Message.user(REQUEST)], max_steps=8,
        emit=emit, step_boundary=boundary, policy=LoopPolicy(), step_retries=0,
        thinklink=link, recorder=recorder,
        compactor=ContextCompactor(settings, link, request=REQUEST, requested=requested,
                                   priority_of=lambda name: result_priority(surface.resolve(name))))
    return asyncio.run(run_agent_loop(cfg)), events, recorder, cfg


def _of(events: list[tuple[str, dict]], kind: str) -> list[dict]:
    return [d for t, d in events if t == kind]


def _reads(usage_first: int, usage_second: int) -> list[Step]:
    return [Step(text=_thought("count the lines", "read a.txt"), usage=UsageSpec(usage_first, 20),
                 tool_calls=[ToolCallSpec("read_file", {"path": "a.txt"}, id="ca")]),
            Step(text=_thought("count the lines", "read b.txt", done="read a.txt"), usage=UsageSpec(usage_second, 20),
                 tool_calls=[ToolCallSpec("read_file", {"path": "b.txt"}, id="cb")])]


def test_tier_one_cuts_the_oldest_read_result_and_the_measure_uses_the_providers_count(
        fake: FakeProvider, tmp_path: Path) -> None:
    _files(tmp_path)
    fake.script("coding", MARKERS["coding"], [*_reads(1_000, 4_000), Step(text="520 lines.")])
    outcome, events, recorder, _cfg = _run(fake, tmp_path, CompressionSettings(threshold=6_000))
    assert outcome.stop_reason == StopReason.PLAIN_TEXT
    third = fake.requests_for("coding")[2].body["messages"]
    results = {m["tool_call_id"]: m["content"] for m in third if m["role"] == "tool"}
    assert CUT_MARK in results["ca"] and CUT_MARK not in results["cb"]  # the latest result is kept whole
    (event,) = _of(events, EventType.CONTEXT_COMPRESSED)
    assert event["tier"] == "rule" and event["original_tokens"] > event["compressed_tokens"]
    assert event["saved_tokens"] == event["original_tokens"] - event["compressed_tokens"] and event["step"] == 3
    assert len(recorder.compactions) == 1 and len(recorder.compactions[0]) == 6
    statuses = _of(events, EventType.CONTEXT_STATUS)
    assert [s["step"] for s in statuses] == [1, 2, 3] and statuses[0]["measured"] is False
    assert statuses[1]["measured"] is True and statuses[1]["used"] > 1_000  # the provider's 1 000 + the estimate
    assert statuses[2]["used"] < 6_000 and statuses[2]["threshold"] == 6_000 and statuses[2]["source"] == "config"
    assert set(statuses[2]["parts"]) == {"system", "instructions", "history", "tool_results", "call_context", "tools"}
    fake.assert_no_problems()


def test_a_steps_context_report_is_made_once_its_request_is_out_and_before_its_answer(
        fake: FakeProvider, tmp_path: Path) -> None:
    _files(tmp_path)
    fake.script("coding", MARKERS["coding"], [*_reads(1_000, 4_000), Step(text="520 lines.")])
    arrived: list[int] = []

    def seen(type_: str, data: dict) -> None:
        if type_ == EventType.CONTEXT_STATUS:
            # The loop is held here: had the report come before the send, this step's request could not arrive.
            arrived.append(len(fake.wait_for_requests(data["step"], timeout=30)))

    outcome, events, _recorder, _cfg = _run(fake, tmp_path, CompressionSettings(threshold=60_000), seen=seen)
    assert outcome.stop_reason == StopReason.PLAIN_TEXT and arrived == [1, 2, 3]
    kinds = [t for t, _d in events if t in (EventType.LLM_CALL_START, EventType.CONTEXT_STATUS, EventType.AI_CHUNK,
                                            EventType.LLM_CALL_END)]
    first_step = kinds[:kinds.index(EventType.LLM_CALL_END)]
    assert first_step[:2] == [EventType.LLM_CALL_START, EventType.CONTEXT_STATUS]  # before any of its answer
    assert EventType.AI_CHUNK in first_step
    statuses = _of(events, EventType.CONTEXT_STATUS)
    assert [s["step"] for s in statuses] == [1, 2, 3] and statuses[0]["used"] > 0
    fake.assert_no_problems()


def test_a_call_that_never_gets_its_request_out_still_reports_its_context(tmp_path: Path) -> None:
    with FakeProvider() as gone:
        table = gone.provider_table()  # its port, closed again: nobody listens there
    events: list[tuple[str, dict]] = []

    async def boundary() -> None:
        pass

    config = {"global": {"llm": {"use_provider": "fake", "providers": {"fake": table}}}, "llm": {"max_retries": 0}}
    link = ThinkLink(tmp_path / "thinklink" / "r-test.jsonl")
    cfg = LoopConfig(
        agent="coding", engine=build_engine(parse_llm_config(config, {}), agent="coding"),
        surface=build_surface("coding"), tool_ctx=ToolContext(project_root=tmp_path, run_id="r-test"),
        messages=[Message.system(MARKERS["coding"] + " (test)"), Message.user(REQUEST)], max_steps=2,
        emit=lambda t, d: events.append((t, d)), step_boundary=boundary, policy=LoopPolicy(), step_retries=0,
        thinklink=link, recorder=_Recorder(), compactor=ContextCompactor(CompressionSettings(), link, request=REQUEST))
    outcome = asyncio.run(run_agent_loop(cfg))
    assert outcome.stop_reason == StopReason.LLM_ERROR
    (status,) = _of(events, EventType.CONTEXT_STATUS)
    assert status["step"] == 1 and status["used"] > 0
    # The task's thinklink line waits for the first request to be out; a run that never got one out writes it anyway.
    entries, problems = read_thinklink(tmp_path / "thinklink" / "r-test.jsonl")
    assert problems == [] and [e.text for e in entries] == [REQUEST]



def test_a_run_stopped_before_its_first_call_still_writes_its_task_to_the_thinklink(tmp_path: Path) -> None:
    async def stopped() -> None:
        raise asyncio.CancelledError("stopped at its first boundary")

    config = {"global": {"llm": {"use_provider": "fake", "providers": {"fake": {
        "api_base_url": "http://127.0.0.1:9/v1", "api_key": "k", "model": "m"}}}}}
    link = ThinkLink(tmp_path / "thinklink" / "r-test.jsonl")
    cfg = LoopConfig(
        agent="coding", engine=build_engine(parse_llm_config(config, {}), agent="coding"),
        surface=build_surface("coding"), tool_ctx=ToolContext(project_root=tmp_path, run_id="r-test"),
        messages=[Message.system("sys"), Message.user(REQUEST)], max_steps=2, emit=lambda t, d: None,
        step_boundary=stopped, thinklink=link, recorder=_Recorder(),
        compactor=ContextCompactor(CompressionSettings(), link, request=REQUEST))
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(run_agent_loop(cfg))
    entries, problems = read_thinklink(tmp_path / "thinklink" / "r-test.jsonl")
    assert problems == [] and [e.text for e in entries] == [REQUEST]

def test_tier_two_summarises_with_the_runs_own_model_and_keeps_goal_plan_item_and_request_word_for_word(
        fake: FakeProvider, tmp_path: Path) -> None:
    _files(tmp_path, lines=120)  # the last three messages, kept word for word, fit well under the threshold
    fake.script("coding", MARKERS["coding"], [
        *_reads(1_000, 2_500),
        Step(text=_thought("count the lines", "read c.txt", done="read b.txt"), usage=UsageSpec(4_500, 20),
             tool_calls=[ToolCallSpec("read_file", {"path": "c.txt"}, id="cc")]),
        Step(text="SUMMARY: a.txt was read first."), Step(text="360 lines.")])
    # Results are never cut shorter than 100 000 tokens here, so the first tier has nothing to cut.
    outcome, events, recorder, cfg = _run(fake, tmp_path, CompressionSettings(threshold=5_500,
                                                                              tool_result_keep_tokens=100_000))
    assert outcome.output == "360 lines."
    summary_call, after = fake.requests_for("coding")[3:]
    assert summary_call.body["messages"][-1] == {"role": "user", "content": SUMMARY_REQUEST}
    assert "a.txt line 119" in str(summary_call.body["messages"])  # what is summarised is sent whole
    messages = after.body["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    text = messages[1]["content"]
    assert text.startswith(COMPACTED_HEADING) and "SUMMARY: a.txt was read first." in text
    assert "goal: count the lines" in text and "current item: [>] read c.txt" in text
    assert f"(word for word)\n\n{REQUEST}" in text
    assert "a.txt line 119" not in text and "c.txt line 119" in text  # the last messages are kept word for word
    assert not _of(events, EventType.CONTEXT_COMPRESSED)
    (event,) = _of(events, EventType.CONTEXT_EMERGENCY_COMPRESSED)
    assert event["tier"] == "emergency" and event["compressed_tokens"] < event["original_tokens"]
    assert [m.role for m in recorder.compactions[0]] == ["system", "user"]
    assert [m.role for m in cfg.messages] == ["system", "user", "assistant"]
    summary_calls = [d for d in _of(events, EventType.LLM_CALL_END) if d["tool"] == "context_compaction"]
    assert len(summary_calls) == 1 and summary_calls[0]["usage"]  # counted with the run's usage and cost
    assert _of(events, EventType.CONTEXT_STATUS)[3]["measured"] is False  # the rewrite invalidated the count
    fake.assert_no_problems()


@pytest.mark.parametrize("summary", [
    Step(failure=Failure.http(400)),
    Step(tool_calls=[ToolCallSpec("read_file", {"path": "a.txt"})]),  # a tool call instead of a summary
], ids=["refused", "no-summary"])
def test_a_failed_summary_falls_to_the_rebuild_from_the_thinklink_keeping_the_last_plans(
        fake: FakeProvider, tmp_path: Path, summary: Step) -> None:
    _files(tmp_path)
    fake.script("coding", MARKERS["coding"], [*_reads(1_000, 4_000), summary, Step(text="520 lines.")])
    settings = CompressionSettings(threshold=6_000, tool_result_keep_tokens=100_000, ultimate_keep_plans=1)
    _outcome, events, recorder, _cfg = _run(fake, tmp_path, settings)
    messages = fake.requests_for("coding")[3].body["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    text = messages[1]["content"]
    assert text.startswith(REBUILT_HEADING) and "current item: [>] read b.txt" in text and REQUEST in text
    assert "Earlier thought blocks" not in text  # keep_plans = 1: only the latest
    assert any("rebuilding from the thinklink instead" in d["message"] for d in _of(events, EventType.LOG))
    (event,) = _of(events, EventType.CONTEXT_ULTIMATE_COMPRESSED)
    assert event["tier"] == "ultimate" and len(recorder.compactions) == 1


def test_with_the_third_tier_off_a_failed_summary_leaves_the_history_says_so_and_is_not_retried_at_once(
        fake: FakeProvider, tmp_path: Path) -> None:
    _files(tmp_path)
    fake.script("coding", MARKERS["coding"], [
        *_reads(1_000, 4_000), Step(failure=Failure.http(400)),
        Step(text=_thought("count the lines", "read c.txt"), usage=UsageSpec(8_000, 20),
             tool_calls=[ToolCallSpec("read_file", {"path": "c.txt"})]),
        Step(text="780 lines.")])
    settings = CompressionSettings(threshold=6_000, tool_result_keep_tokens=100_000, ultimate_enabled=False)
    _outcome, events, recorder, _cfg = _run(fake, tmp_path, settings)
    requests = fake.requests_for("coding")
    assert len(requests) == 5  # step 4 is over the threshold too, and no second summary is asked for
    assert len(requests[3].body["messages"]) == 6 and recorder.compactions == []
    assert not _of(events, EventType.CONTEXT_ULTIMATE_COMPRESSED)
    warnings = [d["message"] for d in _of(events, EventType.LOG) if d["level"] == "warning"]
    assert any("the history stays as it is" in w and "before step 8" in w for w in warnings)
    assert sum("still over its threshold" in w and "enable_ultimate_compression is off" in w for w in warnings) == 2


def test_compression_off_never_compacts_but_compact_asked_by_the_user_still_does(fake: FakeProvider,
                                                                                 tmp_path: Path) -> None:
    _files(tmp_path)
    fake.script("coding", MARKERS["coding"], [*_reads(1_000, 50_000), Step(text="520 lines.")])
    _outcome, events, recorder, _cfg = _run(fake, tmp_path, CompressionSettings(enabled=False, threshold=6_000))
    assert recorder.compactions == [] and _of(events, EventType.CONTEXT_STATUS)[2]["used"] > 6_000

    asks = iter([False, False, True])
    fake.script("coding", MARKERS["coding"], [*_reads(1_000, 1_000), Step(text="SUMMARY."), Step(text="done")])
    _outcome, events, recorder, _cfg = _run(fake, tmp_path, CompressionSettings(enabled=False),
                                            requested=lambda: next(asks, False))
    (event,) = _of(events, EventType.CONTEXT_EMERGENCY_COMPRESSED)
    assert event["requested"] is True and len(recorder.compactions) == 1
    assert any("as asked (/compact)" in d["message"] for d in _of(events, EventType.LOG))


def test_a_thought_block_out_of_shape_is_counted_and_shown(fake: FakeProvider, tmp_path: Path) -> None:
    _files(tmp_path)
    bad = "<thought>\ngoal: count\nplan:\n- [>] one\n- [>] two\n</thought>"
    fake.script("coding", MARKERS["coding"], [
        Step(text=bad, tool_calls=[ToolCallSpec("read_file", {"path": "a.txt"})]),
        Step(text="<thought>\ngoal: count", tool_calls=[ToolCallSpec("read_file", {"path": "b.txt"})]),
        Step(text="done")])
    _outcome, events, _recorder, cfg = _run(fake, tmp_path, CompressionSettings())
    (entry,) = _of(events, EventType.THINKLINK_ENTRY)
    assert entry["parse_failures"] == 1 and "reason is empty" in entry["problems"]
    notes = [d for d in _of(events, EventType.LOG) if "out of shape" in d["message"]]
    assert [d["level"] for d in notes] == ["warning", "info"] and "2 such blocks this run" in notes[1]["message"]
    assert cfg.thinklink.parse_failures == 2


def test_a_replay_after_a_compaction_counts_the_steps_the_compacted_history_no_longer_shows(tmp_path: Path) -> None:
    compacted = [Message.system("sys"), Message.user(f"{COMPACTED_HEADING}\n\nsummary")]
    after = [Message.assistant("step 7", tool_calls=()), Message.assistant("step 8")]
    path = write_rollout(tmp_path / "r.jsonl", [Message.system("sys"), Message.user("task"),
                                                Message.assistant("step 1")],
                         extra=[records.compacted(compacted, 7), *(records.response_item(m, 7) for m in after)],
                         step=8)
    replay = load_for_replay(path)
    assert [m.content for m in replay.messages][1:] == [compacted[1].content, "step 7", "step 8"]
    assert replay.compacted_at == 7 and finished_steps(replay.messages, replay.compacted_at) == 8


async def _no_boundary() -> None:
    pass


def test_the_gauges_window_is_the_providers_context_window_when_set_and_the_threshold_never_moves(
        fake: FakeProvider) -> None:
    def engine(**extra: Any) -> Any:
        table = {**fake.provider_table(), **extra}
        return build_engine(parse_llm_config({"global": {"llm": {"use_provider": "fake",
                                                                 "providers": {"fake": table}}}}, {}), agent="coding")

    configured, plain = engine(context_window=262_144), engine()
    assert configured.context_window == 262_144 and plain.context_window == 0
    windows = []
    for run_engine in (configured, plain):
        events: list[tuple[str, dict]] = []
        compactor = ContextCompactor(CompressionSettings(), ThinkLink(), request=REQUEST,
                                     window_of=lambda _model: 128_000)
        cfg = LoopConfig(agent="coding", engine=run_engine, surface=build_surface("coding"),
                         tool_ctx=ToolContext(project_root=Path("/")), messages=[], max_steps=1,
                         emit=lambda t, d, events=events: events.append((t, d)), step_boundary=_no_boundary)
        report = asyncio.run(compactor.before_call(cfg, [Message.system("s"), Message.user(REQUEST)], 1, []))
        assert not [d for t, d in events if t == EventType.CONTEXT_STATUS]  # made when the caller says
        report()
        report()  # once only
        (status,) = [d for t, d in events if t == EventType.CONTEXT_STATUS]
        windows.append((status["window"], status["threshold"]))
    assert windows == [(262_144, 96_000), (128_000, 96_000)]  # the catalog's 128k × 0.75 either way
