"""Breaker, thought blocks, memory, hand-off formatting, agent table — driven directly."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
from pathlib import Path

import pytest

from tests.run_channel_double import RecordingChannel
from yagent.ipc.config import settings_from_table
from yagent.ipc.messages import RunOutcome, RunSpec
from yagent.ipc.state_layout import task_dir
from yagent.ipc.vocabulary import StopReason
from yagent.workers.agents import AGENT_SPECS
from yagent.workers.agents.circuit_breaker import CircuitBreaker, ProviderBreakers
from yagent.workers.agents.custom_agents import CustomAgentRegistry, DesignError, parse_design
from yagent.workers.agents.loop import LoopConfig
from yagent.workers.context.thought import parse_thought, strip_thought
from yagent.workers.kinds import RunContext, known_kinds
from yagent.workers.llm import Message, ToolCall
from yagent.workers.memory import ConversationMemory, MemoryFileError, load_memory
from yagent.workers.tools.handoff import format_for_parent


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("shared", [False, True])
def test_breaker_opens_at_the_threshold_and_half_open_admits_one_probe(tmp_path: Path, shared: bool) -> None:
    clock = Clock()
    path = tmp_path / "b.json" if shared else None
    breaker = CircuitBreaker(2, 60, path=path, clock=clock)
    assert breaker.allow()
    breaker.record_failure()
    assert breaker.state == "closed"
    breaker.record_failure()
    assert breaker.state == "open" and not breaker.allow()
    clock.now += 61
    other = CircuitBreaker(2, 60, path=path, clock=clock) if shared else breaker
    assert breaker.allow()  # the single probe
    assert not other.allow()  # a second caller is refused until the probe reports
    breaker.record_failure()  # the probe failed: open again for a full period
    assert breaker.state == "open"
    clock.now += 61
    assert breaker.allow()
    breaker.record_success()
    assert other.state == "closed" and other.allow()


def test_a_probe_that_never_reports_expires(tmp_path: Path) -> None:
    clock = Clock()
    breaker = CircuitBreaker(1, 30, clock=clock)
    breaker.record_failure()
    clock.now += 31
    assert breaker.allow()
    assert not breaker.allow()
    clock.now += 31  # the probe's caller died without reporting
    assert breaker.allow()


def test_zero_threshold_is_no_breaker() -> None:
    with pytest.raises(ValueError):
        CircuitBreaker(0)


def test_thought_block_parses_with_aliases_and_marker_variants() -> None:
    reply = ("I will look.\n<thought>\nCurrent goal: ship it\nstep: read the code\nReasoning: need facts\n"
             "Plan update:\n- [x] read\n- [>] edit\n* [ ] test\n1. [X] plan\n</thought>\ncalling")
    plan = parse_thought(reply)
    assert plan is not None and plan.valid
    assert (plan.goal, plan.step, plan.reason) == ("ship it", "read the code", "need facts")
    assert plan.plan == [("done", "read"), ("doing", "edit"), ("todo", "test"), ("done", "plan")]
    assert strip_thought(reply) == "I will look.\n\ncalling"


def test_thought_validation_reports_each_problem() -> None:
    plan = parse_thought("<thought>\nstep: x\nplan:\n- [>] a\n- [>] b\n</thought>")
    assert plan is not None
    assert plan.problems() == ["goal is empty", "reason is empty",
                               "2 plan items are marked [>] (at most one may be in progress)"]
    assert parse_thought("no block here") is None
    assert parse_thought("<thought>garbage without keys</thought>").goal == ""


def test_memory_appends_then_rewrites_and_survives_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    memory = ConversationMemory(path=path)
    memory.append(Message.user("one"), Message.assistant("two"))
    memory.save()
    memory.append(Message.assistant("", tool_calls=(ToolCall("c1", "read_file", '{"path": "a"}'),)),
                  Message.tool("c1", "contents"))
    memory.save()
    assert len(path.read_text().splitlines()) == 4
    loaded = load_memory(path)
    assert [m.role for m in loaded.snapshot()] == ["user", "assistant", "assistant", "tool"]
    assert loaded.snapshot()[2].tool_calls[0].arguments == '{"path": "a"}'
    assert loaded.has_exchange()
    snapshot = loaded.snapshot()
    snapshot.clear()  # a copy: the memory itself is untouched
    assert loaded.size() == 4
    with path.open("a") as fh:
        fh.write('{"role": "assistant", "cont')  # a crash mid-write
    torn = load_memory(path)
    assert torn.size() == 4
    torn.save()
    assert len(path.read_text().splitlines()) == 4  # the torn tail is gone from disk
    torn.replace([Message.user("compressed")])
    torn.save()
    assert [json.loads(line)["content"] for line in path.read_text().splitlines()] == ["compressed"]


def test_memory_without_a_final_newline_is_repaired_before_appending(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    memory = ConversationMemory(path=path)
    memory.append(Message.user("one"), Message.assistant("two"))
    memory.save()
    path.write_bytes(path.read_bytes().rstrip(b"\n"))  # a crash between the JSON and its newline
    loaded = load_memory(path)
    assert [m.content for m in loaded.snapshot()] == ["one", "two"]
    loaded.append(Message.user("three"))
    loaded.save()
    assert [m.content for m in load_memory(path).snapshot()] == ["one", "two", "three"]
    assert path.read_text().endswith("}\n")


def test_memory_with_a_character_cut_by_a_crash_keeps_the_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(Message.user("héllo").to_dict(), ensure_ascii=False) + "\n", encoding="utf-8")
    with path.open("ab") as fh:
        fh.write('{"role": "assistant", "content": "日'.encode()[:-1])  # torn inside a multi-byte character
    loaded = load_memory(path)
    assert [m.content for m in loaded.snapshot()] == ["héllo"]


def test_a_damaged_line_in_the_middle_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"role": "user", "content": "a"}\nnot json\n{"role": "user", "content": "b"}\n')
    with pytest.raises(MemoryFileError, match=r"t\.jsonl:2: not a conversation message .*move the file aside"):
        load_memory(path)


def test_first_turn_means_no_assistant_or_tool_message_yet(tmp_path: Path) -> None:
    memory = ConversationMemory([Message.user("written before the run started")])
    assert not memory.has_exchange()
    memory.append(Message.assistant("hi"))
    assert memory.has_exchange()


def test_every_agent_stops_on_agent_exit() -> None:
    assert set(AGENT_SPECS) == {"coding", "repo", "chat", "devops", "browser", "custom"}
    assert all(spec.stop_on_exit for spec in AGENT_SPECS.values())
    assert LoopConfig.__dataclass_fields__["stop_on_exit"].default is True  # the Director's setting
    assert set(known_kinds()) >= {"director", "coding", "repo", "chat", "devops", "browser", "meta", "custom:"}


def test_parent_sees_deliverable_handoff_and_stop_reasons() -> None:
    done = RunOutcome(run="r1", agent="repo", status="done", stop_reason="agent_exit", output="The report.",
                      handoff={"conclusion": "found", "status": "partial",
                               "facts": [{"claim": "x is y", "where": "a.py:3"}], "open_questions": ["why?"]})
    text = format_for_parent(done)
    assert text.startswith("[repo finished (agent_exit), status partial]")
    assert "The report." in text and "- x is y (a.py:3)" in text and "- why?" in text
    stuck = RunOutcome(run="r2", agent="chat", status="failed", stop_reason=StopReason.IDLE_TIMEOUT, output="half",
                       error="no progress for 60s")
    text = format_for_parent(stuck)
    assert "did not finish: idle_timeout" in text and "no progress for 60s" in text and "Partial output:\nhalf" in text


def test_a_huge_partial_output_is_shortened_and_the_reason_it_stopped_stays_in_front() -> None:
    from yagent.workers.tools.handoff import PARENT_RESULT_BUDGET

    output = "".join(f"step {i} narration\n" for i in range(20_000))
    stuck = RunOutcome(run="r3", agent="coding", status="failed", stop_reason=StopReason.MAX_STEPS, output=output,
                       error="stopped after 150 steps without finishing" + " (detail)" * 2_000)
    text = format_for_parent(stuck)
    assert len(text) <= PARENT_RESULT_BUDGET
    assert text.startswith("[coding did not finish: max_steps — it used all its steps before finishing]")
    assert "step 0 narration" in text and "step 19999 narration" in text
    assert "characters of the output left out" in text and "characters of the error detail left out" in text


def test_meta_designs_are_validated_and_registered(tmp_path: Path) -> None:
    good = json.dumps({"name": "Doc Writer", "description": "Writes docs.", "system_prompt": "Write docs.",
                       "tools": ["read_file", "list_dir"]})
    design = parse_design(f"sure: {good}", "fallback task")
    assert design.name == "doc_writer" and design.task == "fallback task"
    registry = CustomAgentRegistry(tmp_path, "t1")
    assert registry.add(design) is None
    assert registry.add(design) == design  # a second design of that name replaces the first, and says so
    again = CustomAgentRegistry(tmp_path, "t1")
    assert [s.name for s in again.specs()] == ["delegate_doc_writer"]
    assert again.get("doc_writer").tools == ["read_file", "list_dir"]
    for bad, why in [({"name": "coding"}, "taken"), ({"name": "x"}, "snake_case"),
                     ({"tools": ["run_bash"]}, "unknown or unavailable"), ({"system_prompt": ""}, "non-empty")]:
        data = {**json.loads(good), **bad}
        with pytest.raises(DesignError, match=why):
            parse_design(json.dumps(data), "t")
    with pytest.raises(DesignError, match="no JSON"):
        parse_design("I cannot", "t")


def test_a_pipe_or_a_link_planted_as_the_custom_agents_registry_loads_no_design(tmp_path: Path, caplog) -> None:
    # A run may write its task's directory: a pipe there must not hang every later Director's start, and a link must
    # not hand it designs (system prompts) from a file elsewhere.
    design = parse_design(json.dumps({"name": "doc_writer", "description": "Writes docs.", "system_prompt": "Write.",
                                      "tools": ["read_file"]}), "t")
    elsewhere = CustomAgentRegistry(tmp_path / "elsewhere", "t1")
    elsewhere.add(design)
    path = CustomAgentRegistry(tmp_path, "t1").path
    path.parent.mkdir(parents=True)
    path.symlink_to(elsewhere.path)
    assert CustomAgentRegistry(tmp_path, "t1").designs() == []
    path.unlink()
    os.mkfifo(path)  # nobody ever writes it
    assert CustomAgentRegistry(tmp_path, "t1").designs() == []
    assert "custom agents not loaded" in caplog.text and "named pipe" in caplog.text
    CustomAgentRegistry(tmp_path, "t1").add(design)  # what was planted is replaced, never written through
    assert not path.is_fifo() and [d.name for d in CustomAgentRegistry(tmp_path, "t1").designs()] == ["doc_writer"]


def test_a_registry_too_large_to_read_is_not_overwritten_by_a_new_design(tmp_path: Path, monkeypatch) -> None:
    from yagent.workers.agents import custom_agents
    design = parse_design(json.dumps({"name": "doc_writer", "description": "Writes docs.", "system_prompt": "Write.",
                                      "tools": ["read_file"]}), "t")
    registry = CustomAgentRegistry(tmp_path, "t1")
    registry.add(design)
    kept = registry.path.read_bytes()
    monkeypatch.setattr(custom_agents, "MAX_REGISTRY_BYTES", 16)  # the bound, made small enough to pass
    with pytest.raises(OSError, match="more than the 16"):
        CustomAgentRegistry(tmp_path, "t1").add(dataclasses.replace(design, name="other_writer"))
    assert registry.path.read_bytes() == kept


def test_every_agent_run_holds_a_routing_engine(tmp_path: Path) -> None:
    import contextlib

    from yagent.ipc.messages import RunSpec
    from yagent.workers.agents.runtime import AgentRun
    from yagent.workers.kinds import RunContext
    from yagent.workers.llm import RoutingEngine

    class Channel:
        @contextlib.asynccontextmanager
        async def hold(self):
            yield

    providers = {"a": {"api_base_url": "http://127.0.0.1:9/v1", "api_key": "k", "model": "gpt-4o"},
                 "b": {"api_base_url": "http://127.0.0.1:9/v1", "api_key": "k", "model": "gpt-4o-mini"}}
    config = {"global": {"llm": {"use_provider": "a", "providers": providers}},
              "agents": {"llm": {"coding": {"use_provider": "b"}}}}
    for role in ("director", "coding", "repo", "chat", "devops", "meta"):
        spec = RunSpec(run="r", task="t", turn=1, project="p", project_root=str(tmp_path), agent=role, input="x",
                       home=str(tmp_path), settings=settings_from_table(config).run_settings,
                       options={"model_override": "b"} if role == "repo" else {})
        run = AgentRun(RunContext(spec, Channel()), role)
        assert isinstance(run.engine, RoutingEngine), role
        assert isinstance(run._engine_for_tool("deepthinking"), RoutingEngine), role
        expected = "b" if role in ("coding", "repo") else "a"  # configured per agent; repo by runtime override
        assert run.engine.provider == expected, role


def _run_spec(tmp_path: Path, agent: str, config: dict, *, task: str = "t", run: str = "r",
              yolo: str = "none") -> RunSpec:
    return RunSpec(run=run, task=task, turn=1, project="p", project_root=str(tmp_path), agent=agent, input="x",
                   home=str(tmp_path), settings=settings_from_table(config).run_settings, yolo=yolo)


def test_the_breaker_is_the_one_of_the_provider_routing_chose(tmp_path: Path) -> None:
    from tests.agent_harness import MARKERS
    from tests.fake_provider import FakeProvider, Step
    from yagent.ipc.vocabulary import StopReason
    from yagent.workers.agents.loop import LoopPolicy
    from yagent.workers.agents.runtime import AgentRun

    # The configured provider failed until its breaker opened; the router sends this turn elsewhere.
    CircuitBreaker(1, 600, path=tmp_path / "breaker" / "mid.json").record_failure()
    with FakeProvider() as fake:
        fake.script("router", "You route tasks", [Step(text='{"tier": "high"}')])
        fake.script("director", MARKERS["director"], [Step(text="answered by the high tier")])
        config = {"global": {"llm": {"use_provider": "mid", "providers": {
                      "cheap": fake.provider_table("openai", model="gpt-4o-mini"),
                      "mid": fake.provider_table("openai", model="deepseek-chat"),
                      "smart": fake.provider_table("anthropic", model="claude-sonnet-4-5")}}},
                  "llm": {"max_retries": 0, "circuit_breaker_threshold": 1, "circuit_breaker_reset_timeout": "10m"},
                  "routing": {"mode": "auto"}}
        run = AgentRun(RunContext(_run_spec(tmp_path, "director", config), RecordingChannel()), "director")
        assert run.engine.provider == "mid"  # before routing
        loop_config = run.loop_config([Message.system(MARKERS["director"]), Message.user("x")], LoopPolicy(),
                                      route_task="Redesign the scheduler across twelve modules")

        async def go():
            try:
                return await run.run_loop(loop_config)
            finally:
                await run.close()

        result = asyncio.run(go())
        fake.assert_no_problems()
    assert (result.stop_reason, result.output) == (StopReason.PLAIN_TEXT, "answered by the high tier")
    assert CircuitBreaker(1, 600, path=tmp_path / "breaker" / "mid.json").state == "open"  # untouched
    assert CircuitBreaker(1, 600, path=tmp_path / "breaker" / "smart.json").state == "closed"  # the one asked


def test_per_provider_breakers_keep_their_states_apart(tmp_path: Path) -> None:
    breakers = ProviderBreakers(1, 60, directory=tmp_path)
    breakers.for_provider("a").record_failure()
    assert not breakers.for_provider("a").allow() and breakers.for_provider("b").allow()
    assert ProviderBreakers(1, 60, directory=tmp_path).for_provider("a").state == "open"  # shared through the file
    assert breakers.path_for("../x/y") == tmp_path / "_x_y.json"  # a provider name cannot leave the directory


def test_a_custom_design_keeps_working_when_full_yolo_removes_a_tool_it_picked(tmp_path: Path) -> None:
    from tests.agent_harness import MARKERS
    from tests.fake_provider import FakeProvider, Step, ToolCallSpec
    from yagent.workers.agents.subagents import custom

    design = parse_design(json.dumps({"name": "asker", "description": "Reads and asks.",
                                      "system_prompt": "Read files; ask the user when unsure.",
                                      "tools": ["read_file", "ask_user_for_help"]}), "read things")
    CustomAgentRegistry(tmp_path, "t").add(design)
    with FakeProvider() as fake:
        fake.script("custom", MARKERS["custom"], [Step(text="Done without asking.", tool_calls=[
            ToolCallSpec("agent_exit", {"summary": "done"})])])
        config = {"global": {"llm": {"use_provider": "fake", "providers": {"fake": fake.provider_table()}}},
                  "llm": {"max_retries": 0}}
        channel = RecordingChannel()
        ctx = RunContext(_run_spec(tmp_path, "custom:asker", config, yolo="full"), channel)
        outcome = asyncio.run(custom(ctx))
        fake.assert_no_problems()
        request = fake.requests_for("custom")[0]
    assert (outcome.status, outcome.stop_reason, outcome.output) == ("done", "agent_exit", "Done without asking.")
    assert {t["function"]["name"] for t in request.body["tools"]} == {"read_file", "agent_exit"}
    system = request.body["messages"][0]["content"]
    assert "ask_user_for_help" in system and "Work without" in system  # the agent is told what it lacks
    warnings = [d["message"] for t, d in channel.events if t == "log" and d.get("level") == "warning"]
    assert any("ask_user_for_help" in w for w in warnings)  # and so are the people watching


def test_a_run_starts_with_the_session_approvals_its_spec_carries_and_a_grants_file_counts_for_nothing(
        tmp_path: Path) -> None:
    from dataclasses import replace

    from yagent.workers.agents.runtime import AgentRun
    from yagent.workers.tools import AuthDecision, AuthRequest

    config = {"global": {"llm": {"use_provider": "a", "providers": {
        "a": {"api_base_url": "http://127.0.0.1:9/v1", "api_key": "k", "model": "gpt-4o"}}}}}
    # What runs used to keep in the task's directory, which every run of the task may write: read no more.
    (task_dir(tmp_path, "t") / "grants.json").parent.mkdir(parents=True, exist_ok=True)
    (task_dir(tmp_path, "t") / "grants.json").write_text(json.dumps(["outside:/"]))
    spec = replace(_run_spec(tmp_path, "coding", config, run="r1"), session_grants=["outside:/srv/kept"])
    run = AgentRun(RunContext(spec, RecordingChannel()), "coding")
    assert run.tool_ctx.guard.approvals.session_grants() == {"outside:/srv/kept"}
    request = AuthRequest(tool="read_file", summary="read /srv/new", project_root=str(tmp_path),
                          outside_paths=("/srv/new",))
    run.tool_ctx.guard.approvals.remember(request, AuthDecision.ALLOW_SESSION)
    assert run.tool_ctx.guard.approvals.session_grants() == {"outside:/srv/kept", "outside:/srv/new"}
    asyncio.run(run.close())
    assert json.loads((task_dir(tmp_path, "t") / "grants.json").read_text()) == ["outside:/"]
    assert [p.name for p in task_dir(tmp_path, "t").glob("grants*")] == ["grants.json"]  # no lock, no temp file


def test_a_confirm_with_its_own_wording_is_answered_with_the_option_picked() -> None:
    from yagent.ipc.vocabulary import QuestionKind
    from yagent.workers.agents.ports import confirm_value
    from yagent.workers.tools import AskRequest

    deploy = AskRequest(kind=QuestionKind.CONFIRM, prompt="Deploy now?", options=("Deploy", "Abort"))
    assert [confirm_value(deploy, v) for v in ("Deploy", "abort", "y", "n")] == ["Deploy", "Abort", "Deploy", "Abort"]
    plain = AskRequest(kind=QuestionKind.CONFIRM, prompt="Go on?")
    assert [confirm_value(plain, v) for v in ("yes", "Y", "ok", "no", "nope")] == ["yes", "yes", "yes", "no", "no"]
    pick = AskRequest(kind=QuestionKind.SELECT, prompt="Which?", options=("a", "b"))
    assert confirm_value(pick, "b") == "b"


def test_a_sub_agents_rollout_gets_its_end_after_its_result_when_its_run_can_leave_work_for_then(
        tmp_path: Path) -> None:
    from tests.agent_harness import MARKERS
    from tests.fake_provider import FakeProvider, Step, ToolCallSpec
    from yagent.workers.agents.subagents import run_subagent
    from yagent.workers.memory.replay import load_for_replay, rollout_of_run
    from yagent.workers.memory.rollout_writer import wait_for_writer

    with FakeProvider() as fake:
        fake.script("chat", MARKERS["chat"], [Step(text="the answer", tool_calls=[
            ToolCallSpec("agent_exit", {"summary": "the answer"})])])
        config = {"global": {"llm": {"use_provider": "f", "providers": {"f": fake.provider_table("openai")}}}}
        after_result: list = []
        ctx = RunContext(_run_spec(tmp_path, "chat", config, run="rchat1"), RecordingChannel(),  # type: ignore[arg-type]
                         after_result=after_result)

        async def go() -> tuple[RunOutcome, bool, StopReason | None, bool, StopReason | None]:
            outcome = await run_subagent(ctx, AGENT_SPECS["chat"])  # the result, as the worker sends it
            path = rollout_of_run(task_dir(tmp_path, "t"), "rchat1")
            assert path is not None
            before = load_for_replay(path).stop_reason
            unlocked_before = await wait_for_writer(path, 0)
            for wrap_up in after_result:  # what the worker runs once the daemon has the result
                await wrap_up()
            return outcome, unlocked_before, before, await wait_for_writer(path, 0), load_for_replay(path).stop_reason

        outcome, unlocked_before, before, unlocked_after, after = asyncio.run(go())
        fake.assert_no_problems()
    assert outcome.stop_reason == StopReason.AGENT_EXIT
    assert (unlocked_before, before) == (False, None)  # a follow-up started now would wait for the end
    assert (unlocked_after, after) == (True, StopReason.AGENT_EXIT)


def test_the_signature_is_of_the_run_as_it_was_signed_though_digested_later(tmp_path: Path) -> None:
    from yagent.workers.agents.configuration_signature import configuration_signature
    from yagent.workers.agents.runtime import AgentRun

    config = {"global": {"llm": {"use_provider": "f", "providers": {"f": {
        "api_format": "openai", "api_base_url": "http://127.0.0.1:9/v1", "api_key": "k", "model": "m"}}}}}
    run = AgentRun(RunContext(_run_spec(tmp_path, "director", config), RecordingChannel()), "director")
    assert run.signature == "" and run.configuration_parts == {}
    run.sign("the stable prompt")
    signed_then = configuration_signature(run.configuration("the stable prompt"))
    cold = run.surface.deferred()[0].name
    run.surface.materialize([cold])  # a follow-up restores what its conversation had loaded, after the signing
    assert configuration_signature(run.configuration("the stable prompt")) != signed_then  # that changes it
    assert run.signature == signed_then and run.configuration_parts["tool list"]


def test_a_run_whose_first_request_waits_has_its_rollout_opened_all_the_same(tmp_path: Path) -> None:
    from yagent.workers.agents.loop import LoopPolicy
    from yagent.workers.agents.runtime import AgentRun

    config = {"global": {"llm": {"use_provider": "f", "providers": {"f": {
        "api_format": "openai", "api_base_url": "http://127.0.0.1:9/v1", "api_key": "k", "model": "m"}}}}}
    run = AgentRun(RunContext(_run_spec(tmp_path, "chat", config), RecordingChannel()), "chat")
    assert run.recorder is not None
    loop_config = run.loop_config([Message.system("you chat"), Message.user("hello")], LoopPolicy())

    async def go() -> None:
        opened = asyncio.Event()
        begin_now = run.recorder.begin_now

        def opening() -> None:
            begin_now()
            opened.set()

        run.recorder.begin_now = opening  # type: ignore[method-assign]
        held = asyncio.Event()

        async def paused_gate() -> None:  # the run waits at its first gate: no request goes out
            await held.wait()

        loop_config.step_boundary = paused_gate
        task = asyncio.create_task(run.run_loop(loop_config))
        await asyncio.wait_for(opened.wait(), 10.0)  # written without the first request
        assert run.recorder.writer.drain(10)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await run.close()

    asyncio.run(go())
    from yagent.workers.memory.replay import rollout_of_run
    from yagent.workers.memory.rollout_reader import read_rollout
    path = rollout_of_run(task_dir(tmp_path, "t"), "r")
    assert path is not None
    kinds = [r["type"] for r in read_rollout(path).records]
    assert kinds[:4] == ["session_meta", "turn_context", "response_item", "response_item"]


def test_a_run_slow_to_reach_its_loop_has_its_rollout_opened_and_locked_all_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from yagent.workers.agents.runtime import AgentRun
    from yagent.workers.memory.rollout_reader import read_rollout
    from yagent.workers.memory.rollout_writer import RolloutWriter, wait_for_writer

    started = asyncio.Event()
    start = RolloutWriter.start

    def starting(writer: RolloutWriter) -> None:
        start(writer)
        started.set()

    monkeypatch.setattr(RolloutWriter, "start", starting)

    config = {"global": {"llm": {"use_provider": "f", "providers": {"f": {
        "api_format": "openai", "api_base_url": "http://127.0.0.1:9/v1", "api_key": "k", "model": "m"}}}}}

    async def go() -> Path:
        run = AgentRun(RunContext(_run_spec(tmp_path, "chat", config), RecordingChannel()), "chat")
        assert run.recorder is not None
        path = run.recorder.path
        assert not path.exists()  # built: nothing opened on the way to a first request
        # No loop, no request (it waits for its MCP servers, say): the writer opens and locks its file by itself.
        await asyncio.wait_for(started.wait(), 10.0)
        assert not await wait_for_writer(path, 0)  # opened and locked
        assert run.recorder.writer.drain(10)
        assert [r["type"] for r in read_rollout(path).records] == ["session_meta"]
        await run.close()
        assert await wait_for_writer(path, 0)
        return path

    asyncio.run(go())
