"""The shared agent loop in-process: real engine over HTTP to the fake provider, real tools and files."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agent_harness import MARKERS
from tests.fake_provider import Failure, FakeProvider, Step, ToolCallSpec
from yagent.ipc.provider_config import parse_llm_config
from yagent.ipc.vocabulary import EventType, StopReason
from yagent.workers.agents.circuit_breaker import ProviderBreakers
from yagent.workers.agents.loop import LoopConfig, LoopPolicy, run_agent_loop
from yagent.workers.agents.subagents import AGENT_SPECS, DELIVER_NOW, KEEP_WORKING, ReminderPolicy
from yagent.workers.llm import Message, build_engine
from yagent.workers.tools import ToolContext, build_surface


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        yield server


def _config(fake: FakeProvider, root: Path, agent: str, policy: LoopPolicy, *, max_steps: int = 10,
            **over: Any) -> tuple[LoopConfig, list]:
    events: list[tuple[str, dict]] = []
    config = {"global": {"llm": {"use_provider": "fake", "providers": {"fake": fake.provider_table()}}},
              "llm": {"max_retries": 0}}
    steps_seen: list[int] = []

    async def boundary() -> None:
        steps_seen.append(1)

    cfg = LoopConfig(
        agent=agent, engine=build_engine(parse_llm_config(config, {}), agent=agent), surface=build_surface(agent),
        tool_ctx=ToolContext(project_root=root, run_id="r-test", emit=lambda t, d: events.append((t, dict(d)))),
        messages=[Message.system(MARKERS[agent] + " (test)"), Message.user("do the thing")],
        max_steps=max_steps, emit=lambda t, d: events.append((t, d)), step_boundary=boundary,
        policy=policy, **over)
    return cfg, events


def _user_texts(request) -> list[str]:
    return [m["content"] for m in request.body["messages"] if m["role"] == "user"]


def test_coding_is_reminded_twice_then_finishes_as_plain_text(fake: FakeProvider, tmp_path: Path) -> None:
    fake.script("coding", MARKERS["coding"], [Step(text=f"reply {i}") for i in range(3)])
    spec = AGENT_SPECS["coding"]
    cfg, _ = _config(fake, tmp_path, "coding", ReminderPolicy(spec.reminder, spec.reminder_limit))
    result = asyncio.run(run_agent_loop(cfg))
    assert result.stop_reason == StopReason.PLAIN_TEXT and result.output == "reply 2"
    calls = fake.requests_for("coding")
    assert [_user_texts(c)[-1] for c in calls] == ["do the thing", KEEP_WORKING, KEEP_WORKING]
    assert all(m.content != KEEP_WORKING for m in cfg.messages)  # reminders are never stored


def test_repo_is_told_to_deliver_once(fake: FakeProvider, tmp_path: Path) -> None:
    fake.script("repo", MARKERS["repo"], [
        Step(text="The answer is in a.py."),
        Step(text="<thought>\ngoal: g\nreason: r\n</thought>", tool_calls=[
            ToolCallSpec("agent_exit", {"summary": "a.py", "handoff": {"conclusion": "a.py", "status": "ok"},
                                        "blueprint": [{"claim": "kept"}]})]),
    ])
    spec = AGENT_SPECS["repo"]
    cfg, events = _config(fake, tmp_path, "repo", ReminderPolicy(spec.reminder, spec.reminder_limit))
    result = asyncio.run(run_agent_loop(cfg))
    assert result.stop_reason == StopReason.AGENT_EXIT
    assert _user_texts(fake.requests_for("repo")[1])[-1] == DELIVER_NOW
    # The deliverable is the last assistant text with words in it (the exit reply only had a thought).
    assert result.output == "The answer is in a.py."
    assert result.handoff == {"conclusion": "a.py", "status": "ok"}
    assert result.data["exit"]["blueprint"] == [{"claim": "kept"}]  # extra exit arguments survive
    assert [t for t, _ in events].count(EventType.THINKLINK_ENTRY) == 1


def test_a_failed_step_is_retried_then_the_run_stops_with_llm_error(fake: FakeProvider, tmp_path: Path) -> None:
    fake.script("chat", MARKERS["chat"], [Step(failure=Failure.http(500)), Step(text="recovered"),
                                          Step(failure=Failure.http(503)), Step(failure=Failure.http(503))])
    delays: list[float] = []

    async def no_wait(seconds: float) -> None:
        delays.append(seconds)

    cfg, _ = _config(fake, tmp_path, "chat", LoopPolicy(), step_retries=1, sleep=no_wait)
    assert asyncio.run(run_agent_loop(cfg)).output == "recovered"
    cfg2, events = _config(fake, tmp_path, "chat", LoopPolicy(), step_retries=1, sleep=no_wait)
    failed = asyncio.run(run_agent_loop(cfg2))
    assert failed.stop_reason == StopReason.LLM_ERROR and "503" in failed.error
    assert delays == [1.0, 1.0]
    assert any(t == EventType.CONVERSATION_ERROR for t, _ in events)


def test_a_step_the_engine_already_retried_to_its_limit_is_not_retried_again(
    fake: FakeProvider, tmp_path: Path
) -> None:
    failure = Step(failure=Failure.http(503, retry_after=0))  # Retry-After 0: the engine retries at once
    fake.script("chat", MARKERS["chat"], [failure, failure, failure, Step(text="too late")])
    delays: list[float] = []

    async def no_wait(seconds: float) -> None:
        delays.append(seconds)

    cfg, _ = _config(fake, tmp_path, "chat", LoopPolicy(), step_retries=2, sleep=no_wait)
    config = {"global": {"llm": {"use_provider": "fake", "providers": {"fake": fake.provider_table()}}},
              "llm": {"max_retries": 2}}
    cfg.engine = build_engine(parse_llm_config(config, {}), agent="chat")
    result = asyncio.run(run_agent_loop(cfg))
    assert result.stop_reason == StopReason.LLM_ERROR and "after 3 attempts" in result.error
    assert len(fake.requests_for("chat")) == 3 and delays == []


def test_cancellation_mid_batch_leaves_one_result_per_call(fake: FakeProvider, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    fake.script("coding", MARKERS["coding"], [Step(tool_calls=[
        ToolCallSpec("read_file", {"path": "a.txt"}, id="c1"),
        ToolCallSpec("run_bash", {"command": "sleep 30"}, id="c2"),
        ToolCallSpec("read_file", {"path": "a.txt"}, id="c3")])])
    cfg, _events = _config(fake, tmp_path, "coding", LoopPolicy())

    async def go() -> None:
        bash_started = asyncio.Event()

        def watching(emit):  # the signal: run_bash has started (the loop or the tool context may say it)
            def watch(kind: str, data: dict) -> None:
                emit(kind, data)
                if kind == EventType.TOOL_CALL_START and data.get("name") == "run_bash":
                    bash_started.set()
            return watch

        cfg.emit, cfg.tool_ctx.emit = watching(cfg.emit), watching(cfg.tool_ctx.emit)
        async with asyncio.timeout(30):
            task = asyncio.create_task(run_agent_loop(cfg))
            await bash_started.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(go())
    cfg.tool_ctx.processes.kill_all()
    tool_results = [m for m in cfg.messages if m.role == "tool"]
    assert [m.tool_call_id for m in tool_results] == ["c1", "c2", "c3"]
    assert "Cancelled" in tool_results[1].content and "Not run" in tool_results[2].content


def test_max_steps_and_the_pause_gate_run_before_each_step(fake: FakeProvider, tmp_path: Path) -> None:
    fake.script("devops", MARKERS["devops"], [Step(tool_calls=[ToolCallSpec("list_dir", {"path": "."})])] * 3)
    cfg, _ = _config(fake, tmp_path, "devops", LoopPolicy(), max_steps=3)
    gates: list[int] = []
    inner = cfg.step_boundary

    async def counting() -> None:
        gates.append(len(fake.requests))
        await inner()

    cfg.step_boundary = counting
    result = asyncio.run(run_agent_loop(cfg))
    assert result.stop_reason == StopReason.MAX_STEPS and result.steps == 3
    assert gates == [0, 1, 2, 3]  # the gate is passed before each step, and once more before stopping


def test_the_routers_classification_waits_at_the_pause_gate_like_every_model_call(
        fake: FakeProvider, tmp_path: Path) -> None:
    fake.script("devops", MARKERS["devops"], [Step(text="done")])
    cfg, _ = _config(fake, tmp_path, "devops", LoopPolicy(), max_steps=1, route_task="Rework the deploy scripts")
    order: list[str] = []
    inner, route = cfg.step_boundary, cfg.engine.route

    async def gate() -> None:
        order.append("gate")
        await inner()

    async def classify(task: str):  # a paused run is held at the gate: a classification before it would be a call
        order.append("route")
        return await route(task)

    cfg.step_boundary = gate
    cfg.engine.route = classify  # type: ignore[method-assign]
    asyncio.run(run_agent_loop(cfg))
    assert order[:2] == ["gate", "route"]


EXIT_THOUGHT = "<thought>\ngoal: g\nreason: r\n</thought>"


def test_the_exit_deliverable_is_never_narration_from_an_earlier_tool_step(fake: FakeProvider, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def main(): pass\n")
    fake.script("repo", MARKERS["repo"], [
        Step(text="Let me read a.py first.", tool_calls=[ToolCallSpec("read_file", {"path": "a.py"})]),
        Step(text=EXIT_THOUGHT, tool_calls=[ToolCallSpec("agent_exit", {
            "summary": "a.py defines main.", "handoff": {"conclusion": "main is in a.py", "status": "ok"}})]),
    ])
    spec = AGENT_SPECS["repo"]
    cfg, _ = _config(fake, tmp_path, "repo", ReminderPolicy(spec.reminder, spec.reminder_limit))
    result = asyncio.run(run_agent_loop(cfg))
    assert result.stop_reason == StopReason.AGENT_EXIT
    # The exit reply had no words: the summary stands, not what was said before reading the file.
    assert result.output == "a.py defines main."
    fake.assert_no_problems()


def test_the_exit_deliverable_falls_back_to_the_handoff_conclusion(fake: FakeProvider, tmp_path: Path) -> None:
    fake.script("coding", MARKERS["coding"], [
        Step(text="I will look around.", tool_calls=[ToolCallSpec("list_dir", {"path": "."})]),
        Step(text="Nothing more to do here.", tool_calls=[ToolCallSpec("list_dir", {"path": "."})]),
        Step(text=EXIT_THOUGHT, tool_calls=[ToolCallSpec("agent_exit", {
            "summary": " ", "handoff": {"conclusion": "The directory is empty.", "status": "ok"}})]),
    ])
    spec = AGENT_SPECS["coding"]
    cfg, _ = _config(fake, tmp_path, "coding", ReminderPolicy(spec.reminder, spec.reminder_limit))
    result = asyncio.run(run_agent_loop(cfg))
    assert result.stop_reason == StopReason.AGENT_EXIT
    assert result.output == "The directory is empty."


def test_the_exit_deliverable_is_the_final_message_when_it_has_words(fake: FakeProvider, tmp_path: Path) -> None:
    fake.script("chat", MARKERS["chat"], [
        Step(text="A first draft."),
        Step(text=f"{EXIT_THOUGHT}\nThe final answer.", tool_calls=[ToolCallSpec("agent_exit", {"summary": "s"})]),
    ])
    cfg, _ = _config(fake, tmp_path, "chat", ReminderPolicy("deliver it", 1))
    result = asyncio.run(run_agent_loop(cfg))
    assert (result.stop_reason, result.output) == (StopReason.AGENT_EXIT, "The final answer.")


def test_a_retried_step_marks_its_partial_stream_restarted(fake: FakeProvider, tmp_path: Path) -> None:
    fake.script("chat", MARKERS["chat"], [
        Step(text="This reply is cut off half way through.", chunk_size=4, failure=Failure.truncate(after_chunks=3)),
        Step(text="The whole reply."),
        Step(text="Cut again and never retried.", chunk_size=4, failure=Failure.truncate(after_chunks=3)),
    ])

    async def no_wait(seconds: float) -> None:
        pass

    cfg, events = _config(fake, tmp_path, "chat", LoopPolicy(), step_retries=1, sleep=no_wait)
    result = asyncio.run(run_agent_loop(cfg))
    assert result.output == "The whole reply."
    stream = [(t, d) for t, d in events if t in (EventType.AI_CHUNK, EventType.AI_STREAM_END)]
    first_end = next(i for i, (t, _) in enumerate(stream) if t == EventType.AI_STREAM_END)
    assert "".join(d["text"] for t, d in stream[:first_end])  # the first attempt did stream something
    assert stream[first_end][1]["restarted"] is True  # ... and that partial output was declared void
    assert [d["restarted"] for t, d in stream if t == EventType.AI_STREAM_END] == [True, False]
    assert "".join(d["text"] for t, d in stream[first_end + 1:] if t == EventType.AI_CHUNK) == "The whole reply."

    # A failure that is not retried ends its stream for good: nothing follows that could replace it.
    cfg2, events2 = _config(fake, tmp_path, "chat", LoopPolicy(), step_retries=0, sleep=no_wait)
    assert asyncio.run(run_agent_loop(cfg2)).stop_reason == StopReason.LLM_ERROR
    assert [d["restarted"] for t, d in events2 if t == EventType.AI_STREAM_END] == [False]


def test_a_server_repeating_call_ids_across_steps_keeps_each_result_with_its_call(
    fake: FakeProvider, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    (tmp_path / "b.txt").write_text("beta\n")
    # Servers that number calls per response send `call_0` on every step.
    fake.script("repo", MARKERS["repo"], [
        Step(tool_calls=[ToolCallSpec("read_file", {"path": "a.txt"}, id="call_0")]),
        Step(tool_calls=[ToolCallSpec("read_file", {"path": "b.txt"}, id="call_0")]),
        Step(tool_calls=[ToolCallSpec("agent_exit", {"summary": "done"}, id="call_0")]),
    ])
    spec = AGENT_SPECS["repo"]
    cfg, _ = _config(fake, tmp_path, "repo", ReminderPolicy(spec.reminder, spec.reminder_limit))
    result = asyncio.run(run_agent_loop(cfg))
    assert result.stop_reason == StopReason.AGENT_EXIT
    last = fake.requests_for("repo")[-1].body["messages"]
    calls = {c["id"]: json.loads(c["function"]["arguments"])["path"]
             for m in last if m["role"] == "assistant" for c in m.get("tool_calls") or ()}
    results = {m["tool_call_id"]: m["content"] for m in last if m["role"] == "tool"}
    assert len(calls) == 2 and set(results) == set(calls)
    for call_id, path in calls.items():
        assert ("alpha" if path == "a.txt" else "beta") in results[call_id]


def test_an_exit_with_a_malformed_handoff_is_refused_once_with_what_to_fix(fake: FakeProvider, tmp_path: Path) -> None:
    bad = {"summary": "a.py", "handoff": {"conclusion": "main is in a.py", "status": "done",
                                          "facts": ["a.py defines main", {"claim": "no tests"}]}}
    good = {"summary": "a.py", "handoff": {"conclusion": "main is in a.py", "status": "ok",
                                           "facts": [{"claim": "a.py defines main", "where": "a.py:1"}]}}
    fake.script("repo", MARKERS["repo"], [
        Step(text="main is in a.py.", tool_calls=[ToolCallSpec("agent_exit", bad, id="x1")]),
        Step(text="main is in a.py.", tool_calls=[ToolCallSpec("agent_exit", good, id="x2")]),
    ])
    spec = AGENT_SPECS["repo"]
    cfg, _ = _config(fake, tmp_path, "repo", ReminderPolicy(spec.reminder, spec.reminder_limit))
    result = asyncio.run(run_agent_loop(cfg))
    assert result.stop_reason == StopReason.AGENT_EXIT and result.handoff == good["handoff"]
    refusal = {m["tool_call_id"]: m["content"] for m in fake.requests_for("repo")[1].body["messages"]
               if m["role"] == "tool"}["x1"]
    assert "not accepted" in refusal and "'done'" in refusal
    assert "facts[0]" in refusal and "facts[1]" in refusal and "where" in refusal
    fake.assert_no_problems()


def test_a_second_malformed_handoff_ends_the_run_and_the_parent_still_sees_every_fact(
        fake: FakeProvider, tmp_path: Path) -> None:
    from yagent.workers.tools.handoff import format_for_parent

    bad = {"summary": "s", "handoff": {"conclusion": "c", "status": "finished", "facts": ["plain fact"]}}
    fake.script("chat", MARKERS["chat"], [
        Step(text="Answer.", tool_calls=[ToolCallSpec("agent_exit", bad)]) for _ in range(2)])
    cfg, _ = _config(fake, tmp_path, "chat", LoopPolicy())
    result = asyncio.run(run_agent_loop(cfg))
    assert result.stop_reason == StopReason.AGENT_EXIT and len(fake.requests_for("chat")) == 2
    text = format_for_parent(dataclasses.replace(result, run="r", agent="chat"))
    assert "- plain fact (no location given)" in text
    assert "status unclear ('finished')" in text


def test_a_reply_with_no_words_and_no_tool_call_is_nudged_once_and_never_answered_with_old_narration(
        fake: FakeProvider, tmp_path: Path) -> None:
    from yagent.workers.agents.loop import EMPTY_REPLY_REMINDER

    (tmp_path / "a.txt").write_text("a\n")
    fake.script("chat", MARKERS["chat"], [
        Step(text="Let me look at a.txt first.", tool_calls=[ToolCallSpec("read_file", {"path": "a.txt"})]),
        Step(text=EXIT_THOUGHT),  # a thought block and nothing else
        Step(text=EXIT_THOUGHT),
    ])
    cfg, _ = _config(fake, tmp_path, "chat", LoopPolicy())
    result = asyncio.run(run_agent_loop(cfg))
    calls = fake.requests_for("chat")
    assert len(calls) == 3 and _user_texts(calls[2])[-1] == EMPTY_REPLY_REMINDER
    assert all(m.content != EMPTY_REPLY_REMINDER for m in cfg.messages)  # sent with that call only
    # The run ends as plain text without words: the narration of the tool step is not passed off as the answer.
    assert result.stop_reason == StopReason.PLAIN_TEXT and result.output == ""
    fake.assert_no_problems()


def test_delegations_are_counted_by_what_a_tool_declares_not_by_its_name(tmp_path: Path) -> None:
    from yagent.workers.agents.director import FIRST_REMINDER, DirectorPolicy
    from yagent.workers.tools import Effect, ToolResult, ToolSpec
    from yagent.workers.tools.delegation import execute_delegation

    async def lookup(inv: Any) -> ToolResult:
        return ToolResult.ok("looked up")

    no_params = {"type": "object", "properties": {}}
    named_like_one = ToolSpec(name="delegate_lookup", description="Look up the docs.", parameters=no_params,
                              effects=Effect.EXTERNAL, executor=lookup)
    declared = ToolSpec(name="ask_the_repo", description="Ask the Repo agent.", parameters=no_params,
                        effects=Effect.DELEGATE, executor=execute_delegation, audience=frozenset({"director"}),
                        delegate_target="repo")

    def director_run(tool: str) -> tuple[int, list[str]]:
        """Model calls for a Director that calls `tool` once, then answers twice the same way."""
        with FakeProvider() as fake:
            fake.script("director", MARKERS["director"], [
                Step(text="", tool_calls=[ToolCallSpec(tool, {})]), Step(text="answer"), Step(text="answer")])
            cfg, _ = _config(fake, tmp_path, "director", DirectorPolicy())
            assert set(cfg.surface.join([named_like_one, declared])) == {"delegate_lookup", "ask_the_repo"}
            assert asyncio.run(run_agent_loop(cfg)).stop_reason == StopReason.PLAIN_TEXT
            fake.assert_no_problems()
            return len(fake.requests_for("director")), _user_texts(fake.requests_for("director")[-1])

    calls, users = director_run("delegate_lookup")  # not a delegation: the reply earns the reminder
    assert calls == 3 and users[-1] == FIRST_REMINDER
    calls, users = director_run("ask_the_repo")  # a delegation by declaration: the reply stands
    assert calls == 2 and FIRST_REMINDER not in users


def test_the_soft_cap_asks_for_a_hand_off_in_one_extra_step_then_stops_with_max_steps(
        fake: FakeProvider, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    read = ToolCallSpec("read_file", {"path": "a.txt"})
    handoff = {"summary": "half", "handoff": {"conclusion": "a.txt read", "status": "partial"}}
    fake.script("repo", MARKERS["repo"], [Step(tool_calls=[read]), Step(tool_calls=[read]),
                                          Step(text="Read a.txt; b is left.", tool_calls=[
                                              ToolCallSpec("agent_exit", handoff)])])
    wrap_up = "Your step budget is spent: hand off now."
    cfg, events = _config(fake, tmp_path, "repo", LoopPolicy(), max_steps=2, wrap_up=wrap_up)
    result = asyncio.run(run_agent_loop(cfg))
    # The budget's two steps, then the wrap-up step, which handed off: the run finished with its hand-off.
    assert result.stop_reason == StopReason.AGENT_EXIT and result.steps == 3
    assert result.handoff == handoff["handoff"] and result.output == "Read a.txt; b is left."
    calls = fake.requests_for("repo")
    assert len(calls) == 3 and _user_texts(calls[2])[-1] == wrap_up and wrap_up not in _user_texts(calls[1])
    assert any(m.role == "user" and m.content == wrap_up for m in cfg.messages)  # stored: a follow-up sees it
    assert any(t == EventType.LOG and "wrap up" in d["message"] for t, d in events)


def test_a_run_that_ignores_the_wrap_up_is_stopped_with_max_steps_after_that_one_step(
        fake: FakeProvider, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    read = ToolCallSpec("read_file", {"path": "a.txt"})
    fake.script("repo", MARKERS["repo"], [Step(text="still reading", tool_calls=[read]) for _ in range(3)])
    cfg, _ = _config(fake, tmp_path, "repo", LoopPolicy(), max_steps=2, wrap_up="hand off now")
    result = asyncio.run(run_agent_loop(cfg))
    assert result.stop_reason == StopReason.MAX_STEPS and result.steps == 3 and len(fake.requests_for("repo")) == 3
    assert "and the step it was given to wrap up" in result.error
    assert result.output == "still reading"  # the latest words since the wrap-up message
    # Without a wrap-up (the Director's loop) the run stops at its budget, no extra step.
    fake.script("chat", MARKERS["chat"], [Step(text="thinking", tool_calls=[ToolCallSpec("deepthinking", {
        "question": "q"})]) for _ in range(2)])
    cfg2, _ = _config(fake, tmp_path, "chat", LoopPolicy(), max_steps=1)
    assert asyncio.run(run_agent_loop(cfg2)).steps == 1


def test_each_steps_slot_is_asked_for_before_its_request_is_made_and_a_step_without_a_call_gives_it_back(
    fake: FakeProvider, tmp_path: Path
) -> None:
    fake.script("chat", MARKERS["chat"], [Step(tool_calls=[ToolCallSpec("list_directory", {"path": "."})]),
                                          Step(text="done")])
    seen: list[str] = []

    class Gate:
        @contextlib.asynccontextmanager
        async def hold(self) -> AsyncIterator[None]:
            seen.append("hold")
            yield

    @contextlib.contextmanager
    def lease_ahead() -> Iterator[None]:
        seen.append("ahead")
        try:
            yield
        finally:
            seen.append("back")

    def call_context() -> list[Message]:
        seen.append("context")
        return []

    config = {"global": {"llm": {"use_provider": "fake", "providers": {"fake": fake.provider_table()}}},
              "llm": {"max_retries": 0}}
    cfg, _ = _config(fake, tmp_path, "chat", LoopPolicy(), lease_ahead=lease_ahead, call_context=call_context)
    cfg.engine = build_engine(parse_llm_config(config, {}), agent="chat", gate=Gate())
    assert asyncio.run(run_agent_loop(cfg)).output == "done"
    # Asked for before the step's own work (its call context, compaction), taken by the call, left after it.
    assert seen == ["ahead", "context", "hold", "back"] * 2

    # A step that ends without a call (its provider's breaker open) still leaves the block: the slot goes back.
    seen.clear()
    breakers = ProviderBreakers(threshold=1, directory=tmp_path / "breakers")
    breakers.for_provider("fake").record_failure()
    cfg2, _ = _config(fake, tmp_path, "chat", LoopPolicy(), lease_ahead=lease_ahead, call_context=call_context,
                      breaker=breakers)
    assert asyncio.run(run_agent_loop(cfg2)).stop_reason == StopReason.CIRCUIT_BREAKER_OPEN
    assert seen == ["ahead", "context", "back"]
