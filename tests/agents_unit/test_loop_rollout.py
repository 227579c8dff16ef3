"""The loop writes its rollout: one checkpoint per run (never per step), a usable one when cancelled, and a
replay that rebuilds exactly the messages the loop held."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent_harness import MARKERS
from tests.fake_provider import FakeProvider, Step, ToolCallSpec
from yagent.ipc.messages import FOLLOWUP_OPTION, RunOutcome, RunSpec
from yagent.ipc.provider_config import parse_llm_config
from yagent.ipc.vocabulary import EventType, RunStatus, StopReason
from yagent.workers.agents.followup import previous_conversation_written
from yagent.workers.agents.loop import LoopConfig, LoopPolicy, run_agent_loop
from yagent.workers.kinds import RunContext
from yagent.workers.llm import Message, ToolCall, build_engine
from yagent.workers.memory import rollout_records as records
from yagent.workers.memory.git_identity import read_git_identity
from yagent.workers.memory.replay import assess_replay, load_for_replay
from yagent.workers.memory.rollout_reader import read_rollout
from yagent.workers.memory.rollout_recorder import RunRecorder, open_recorder
from yagent.workers.memory.rollout_records import RolloutRecord
from yagent.workers.memory.rollout_writer import RolloutWriter
from yagent.workers.tools import ToolContext, build_surface


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        yield server


def _config(fake: FakeProvider, root: Path, rollout: Path, *, max_steps: int = 30,
            cancel_reason: StopReason = StopReason.CANCELLED) -> tuple[LoopConfig, RunRecorder, list]:
    """A devops loop recording to `rollout`, opened as a child run of delegation `call_x` opens it."""
    events: list[tuple[str, dict]] = []
    config = {"global": {"llm": {"use_provider": "fake", "providers": {"fake": fake.provider_table()}}},
              "llm": {"max_retries": 0}}
    recorder = RunRecorder(RolloutWriter(rollout), project_root=root, delegation_id="call_x",
                           model=lambda: "fake-model", tier=lambda: "", stop_reason_of_cancel=lambda: cancel_reason)

    async def boundary() -> None:
        pass

    recorder.writer.enqueue(records.session_meta(
        run="run-child", task="t1", agent="devops", turn=1, parent_run="run-parent", delegation_id="call_x", depth=1,
        project_root=str(root), git=read_git_identity(root)))
    messages = [Message.system(MARKERS["devops"] + " (test)"), Message.user("do the thing")]
    recorder.begin({"type": RolloutRecord.TURN_CONTEXT.value, "ts": 0, "payload": {}}, messages)
    cfg = LoopConfig(
        agent="devops", engine=build_engine(parse_llm_config(config, {}), agent="devops"),
        surface=build_surface("devops"),
        tool_ctx=ToolContext(project_root=root, run_id="r-test", emit=lambda t, d: events.append((t, dict(d)))),
        messages=messages, max_steps=max_steps, emit=lambda t, d: events.append((t, d)), step_boundary=boundary,
        policy=LoopPolicy(), recorder=recorder)
    return cfg, recorder, events


def _kinds(path: Path) -> list[str]:
    return [rec["type"] for rec in read_rollout(path).records]


def test_a_twenty_step_run_writes_one_checkpoint_and_replays_its_exact_messages(fake: FakeProvider,
                                                                                tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    steps = [Step(reasoning=f"step {i}", tool_calls=[ToolCallSpec("list_dir", {"path": "."})]) for i in range(19)]
    fake.script("devops", MARKERS["devops"], [*steps, Step(text="all done")])
    path = tmp_path / "rollout.jsonl"
    cfg, recorder, _ = _config(fake, tmp_path, path)
    result = asyncio.run(run_agent_loop(cfg))
    assert result.stop_reason == StopReason.PLAIN_TEXT and result.steps == 20
    kinds = _kinds(path)
    assert kinds.count(RolloutRecord.AGENT_CHECKPOINT) == 1 and recorder.checkpoints == 1
    assert kinds[-2:] == [RolloutRecord.AGENT_CHECKPOINT, RolloutRecord.EVENT_MSG]
    replay = load_for_replay(path)
    assert replay.messages == cfg.messages  # identical in shape and content, reasoning included
    assert replay.messages[2].reasoning == "step 0"
    assert replay.stop_reason == StopReason.PLAIN_TEXT and replay.checkpoint["step"] == 20
    fake.assert_no_problems()


def test_a_cancelled_run_leaves_a_usable_checkpoint_and_its_terminal_record(fake: FakeProvider,
                                                                            tmp_path: Path) -> None:
    fake.script("devops", MARKERS["devops"], [
        Step(tool_calls=[ToolCallSpec("list_dir", {"path": "."})]),
        Step(tool_calls=[ToolCallSpec("run_bash", {"command": "sleep 30"}, id="c_sleep")])])
    task_home = tmp_path / "home" / "tasks" / "t1" / "rollout"
    path = task_home / "20260101-000000_run-child_devops.jsonl"
    cfg, recorder, events = _config(fake, tmp_path, path)

    async def go() -> None:
        task = asyncio.create_task(run_agent_loop(cfg))
        async with asyncio.timeout(30):
            while not any(t == EventType.TOOL_CALL_START and d.get("name") == "run_bash" for t, d in events):
                await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    cfg.tool_ctx.processes.kill_all()
    assert recorder.checkpoints == 1
    replay = load_for_replay(path)
    assert replay.stop_reason == StopReason.CANCELLED and replay.checkpoint["step"] == 2
    assert replay.messages == cfg.messages  # the cancelled call's result included
    verdict = assess_replay(tmp_path / "home" / "tasks" / "t1", "call_x", project_root=tmp_path, max_steps=30)
    assert verdict.replayable, verdict.reason


def test_a_run_that_raises_ends_its_rollout_as_panic(fake: FakeProvider, tmp_path: Path) -> None:
    fake.script("devops", MARKERS["devops"], [Step(text="never reached")])
    path = tmp_path / "rollout.jsonl"
    cfg, recorder, _ = _config(fake, tmp_path, path)

    async def broken() -> None:
        raise RuntimeError("the gate broke")

    cfg.step_boundary = broken
    with pytest.raises(RuntimeError):
        asyncio.run(run_agent_loop(cfg))
    replay = load_for_replay(path)
    assert replay.stop_reason == StopReason.PANIC and recorder.checkpoints == 1


def test_a_tool_that_loads_a_cold_tool_re_records_the_turn_context_a_resume_restores(tmp_path: Path) -> None:
    surface = build_surface("director")
    rollout = tmp_path / "r.jsonl"
    recorder = RunRecorder(RolloutWriter(rollout), project_root=tmp_path, delegation_id=None,
                           model=lambda: "m", tier=lambda: "", stop_reason_of_cancel=lambda: StopReason.CANCELLED)

    def tools() -> dict:
        return {"loaded_tools": [d["name"] for d in surface.tool_definitions()]}

    recorder.begin(records.turn_context(model="m", tier="", cwd=str(tmp_path), yolo="none", **tools()),
                   [Message.user("go")], surface=tools)
    call = ToolCall(id="c1", name="load_tool", arguments='{"names": ["delegate_meta"]}')
    recorder.appended(Message.assistant("", tool_calls=(call,)), 1)
    surface.materialize(["delegate_meta"])
    recorder.appended(Message.tool("c1", "Loaded delegate_meta", name="load_tool"), 1)
    recorder.appended(Message.assistant("done"), 2)
    assert recorder.writer.close()
    contexts = [rec["payload"] for rec in read_rollout(rollout).records if rec["type"] == RolloutRecord.TURN_CONTEXT]
    assert "delegate_meta" not in contexts[0]["loaded_tools"]
    assert len(contexts) == 2 and "delegate_meta" in contexts[-1]["loaded_tools"]
    assert load_for_replay(rollout).turn_context["loaded_tools"] == contexts[-1]["loaded_tools"]


def test_a_follow_up_waits_on_the_rollout_of_the_run_it_continues_and_says_when_it_gave_up(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    recorder, _ = open_recorder(home=tmp_path, task="t1", run="rprev1", agent="repo", turn=1, parent_run="rdir",
                                delegation_id="c1", depth=1, project_root=tmp_path, yolo="none", model=lambda: "m",
                                tier=lambda: "", stop_reason_of_cancel=lambda: StopReason.CANCELLED)
    assert recorder is not None
    # The run returned: its result went out, and its end is written after it (`end_after_result`).
    recorder.end_after_result()
    recorder.finished(1, RunOutcome(status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT, output="mapped"))
    spec = RunSpec(run="rnext2", task="t1", turn=1, project="p", input="and then?", home=str(tmp_path), agent="repo",
                   project_root=str(tmp_path), options={FOLLOWUP_OPTION: {"subagent": "a1", "run": "rprev1"}})
    ctx = RunContext(spec, channel=None)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING):
        asyncio.run(previous_conversation_written(ctx, timeout=0))  # its worker still writes its end
        assert any("the rollout of run rprev1 was still being written" in r.getMessage() for r in caplog.records)
        caplog.clear()
        recorder.finish_returned()
        asyncio.run(previous_conversation_written(ctx, timeout=0))
        assert caplog.records == []
    assert [rec["type"] for rec in read_rollout(recorder.path).records][-1] == RolloutRecord.EVENT_MSG


def _opened_soon(tmp_path: Path, problems: list[str] | None = None) -> tuple[RunRecorder, Path]:
    path = tmp_path / "soon.jsonl"
    recorder = RunRecorder(RolloutWriter(path), project_root=tmp_path, delegation_id=None, model=lambda: "m",
                           tier=lambda: "", stop_reason_of_cancel=lambda: StopReason.CANCELLED,
                           on_problem=problems.append if problems is not None else None)
    return recorder, path


def test_each_turn_context_keeps_the_delegations_as_they_were_when_it_was_recorded(tmp_path: Path) -> None:
    path = tmp_path / "ctx.jsonl"
    # A window that never closes by itself: every record is encoded at the close, long after the state changed.
    recorder = RunRecorder(RolloutWriter(path, batch_seconds=3600), project_root=tmp_path, delegation_id=None,
                           model=lambda: "m", tier=lambda: "", stop_reason_of_cancel=lambda: StopReason.CANCELLED)
    recorder.begin(records.turn_context(model="m", tier="", cwd=str(tmp_path), yolo="none"), [Message.user("go")])
    call = ToolCall(id="call_1", name="delegate_repo", arguments={"task": "map it"})
    recorder.appended(Message.assistant("", tool_calls=(call,)), 1)
    recorder.appended(Message.tool("call_1", "mapped", name="delegate_repo"), 1)
    assert recorder.writer.close(10)
    contexts = [r["payload"] for r in read_rollout(path).records if r["type"] == RolloutRecord.TURN_CONTEXT]
    assert [[d["state"] for d in c.get("delegations", [])] for c in contexts] == [[], ["running"], ["returned"]]


def test_an_opening_left_for_later_comes_before_any_other_record_with_the_messages_it_was_given(
        tmp_path: Path) -> None:
    recorder, path = _opened_soon(tmp_path)
    made: list[str] = []

    def context() -> dict:
        made.append("context")
        return records.turn_context(model="m", tier="", cwd=str(tmp_path), yolo="none")

    messages = [Message.system("you are"), Message.user("go")]
    recorder.begin_soon(context, messages)
    messages.append(Message.assistant("appended by the loop meanwhile"))  # the opening keeps its own copy
    assert made == []
    recorder.appended(messages[-1], 1)  # before `begin_now`: the opening is written first
    recorder.begin_now()  # nothing left to do
    assert made == ["context"] and recorder.writer.close(10)
    rows = read_rollout(path).records
    assert [r["type"] for r in rows] == [RolloutRecord.TURN_CONTEXT] + [RolloutRecord.RESPONSE_ITEM] * 3
    assert [r["payload"]["message"]["content"] for r in rows[1:]] == ["you are", "go", "appended by the loop meanwhile"]


def test_an_opening_whose_context_cannot_be_made_still_records_the_messages_and_says_so(tmp_path: Path) -> None:
    problems: list[str] = []
    recorder, path = _opened_soon(tmp_path, problems)

    def context() -> dict:
        raise ValueError("no model")

    recorder.begin_soon(context, [Message.user("go")])
    recorder.begin_now()
    recorder.finished(1, None)
    rows = read_rollout(path).records
    assert RolloutRecord.TURN_CONTEXT not in [r["type"] for r in rows]
    assert rows[0]["payload"]["message"]["content"] == "go"
    assert problems and "its turn context could not be made (ValueError: no model)" in problems[0]


def _two_steps(fake: FakeProvider, tmp_path: Path) -> tuple[LoopConfig, list]:
    """A loop of two model requests (a tool call, then a plain answer), and the list its events go to."""
    (tmp_path / "a.txt").write_text("a\n")
    fake.script("devops", MARKERS["devops"], [
        Step(text="looking", tool_calls=[ToolCallSpec("list_dir", {"path": "."})]),
        Step(text="all done, nothing else to say")])
    cfg, _recorder, events = _config(fake, tmp_path, tmp_path / "rollout.jsonl")
    return cfg, events


def test_what_follows_the_first_request_runs_once_while_the_model_answers(fake: FakeProvider, tmp_path: Path) -> None:
    cfg, events = _two_steps(fake, tmp_path)
    seen: list[list[str]] = []
    cfg.on_first_request = lambda: seen.append([t for t, _ in events])
    result = asyncio.run(run_agent_loop(cfg))
    assert result.stop_reason == StopReason.PLAIN_TEXT and result.steps == 2
    assert len(seen) == 1  # once, not once per step
    # Out with the request: nothing of the answer had streamed in yet.
    assert EventType.LLM_CALL_START in seen[0] and EventType.AI_CHUNK not in seen[0]


def test_the_events_on_the_way_to_each_request_are_held_until_it_is_out(fake: FakeProvider, tmp_path: Path) -> None:
    cfg, events = _two_steps(fake, tmp_path)
    cfg.hold_events = lambda: events.append(("hold", {}))
    cfg.release_events = lambda: events.append(("release", {}))
    result = asyncio.run(run_agent_loop(cfg))
    assert result.stop_reason == StopReason.PLAIN_TEXT and result.steps == 2
    kinds = [t for t, _ in events]
    # Held from the run's start; let go once per request, as soon as it is out: before any of its answer.
    assert kinds[0] == "hold" and kinds.count("release") == 2
    starts = [i for i, kind in enumerate(kinds) if kind == EventType.LLM_CALL_START]
    releases = [i for i, kind in enumerate(kinds) if kind == "release"]
    chunks = [i for i, kind in enumerate(kinds) if kind == EventType.AI_CHUNK]
    assert starts[0] < releases[0] < chunks[0] and starts[1] < releases[1]
    assert not [i for i in chunks if releases[1] > i > starts[1]]  # the second answer streamed after its release


def test_what_follows_the_first_request_still_runs_when_that_request_never_went_out(tmp_path: Path) -> None:
    with FakeProvider() as fake:
        fake.script("devops", MARKERS["devops"], [Step(text="never")])
        cfg, _recorder, _ = _config(fake, tmp_path, tmp_path / "rollout.jsonl")
    ran: list[str] = []
    cfg.on_first_request = lambda: ran.append("ran")  # the provider is gone: the connection is refused
    result = asyncio.run(run_agent_loop(cfg))
    assert result.stop_reason == StopReason.LLM_ERROR and ran == ["ran"]


def test_a_run_that_ends_before_its_first_request_still_opens_its_rollout(tmp_path: Path) -> None:
    recorder, path = _opened_soon(tmp_path)
    recorder.begin_soon(lambda: records.turn_context(model="m", tier="", cwd=str(tmp_path), yolo="none"),
                        [Message.user("go")])
    recorder.finished(0, None)  # stopped at its first gate: no request ever went out
    kinds = [r["type"] for r in read_rollout(path).records]
    assert kinds[:2] == [RolloutRecord.TURN_CONTEXT, RolloutRecord.RESPONSE_ITEM]
    assert load_for_replay(path).stop_reason == StopReason.CANCELLED


def test_what_follows_the_first_request_may_fail_without_failing_the_call(
        fake: FakeProvider, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    fake.script("devops", MARKERS["devops"], [Step(text="answered anyway")])
    cfg, _recorder, _ = _config(fake, tmp_path, tmp_path / "rollout.jsonl")

    def broken() -> None:
        raise RuntimeError("broken on purpose")

    cfg.on_first_request = broken
    with caplog.at_level(logging.ERROR):
        result = asyncio.run(run_agent_loop(cfg))
    assert (result.stop_reason, result.output) == (StopReason.PLAIN_TEXT, "answered anyway")
    assert "what its first model request was to be followed by failed" in caplog.text
    assert "broken on purpose" in caplog.text
