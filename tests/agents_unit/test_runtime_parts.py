"""Breaker, thought blocks, memory, hand-off formatting, agent table — driven directly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from yagent.ipc.messages import RunOutcome
from yagent.workers.agents import AGENT_SPECS
from yagent.workers.agents.circuit_breaker import CircuitBreaker
from yagent.workers.agents.custom_agents import CustomAgentRegistry, DesignError, parse_design
from yagent.workers.agents.handoff_format import format_for_parent
from yagent.workers.agents.loop import LoopConfig
from yagent.workers.context.thought import parse_thought, strip_thought
from yagent.workers.kinds import known_kinds
from yagent.workers.llm import Message, ToolCall
from yagent.workers.memory import ConversationMemory, load_memory


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


def test_first_turn_means_no_assistant_or_tool_message_yet(tmp_path: Path) -> None:
    memory = ConversationMemory([Message.user("written before the run started")])
    assert not memory.has_exchange()
    memory.append(Message.assistant("hi"))
    assert memory.has_exchange()


def test_every_agent_stops_on_agent_exit() -> None:
    assert set(AGENT_SPECS) == {"coding", "repo", "chat", "devops", "custom"}
    assert all(spec.stop_on_exit for spec in AGENT_SPECS.values())
    assert LoopConfig.__dataclass_fields__["stop_on_exit"].default is True  # the Director's setting
    assert set(known_kinds()) >= {"director", "coding", "repo", "chat", "devops", "meta", "custom:"}


def test_parent_sees_deliverable_handoff_and_stop_reasons() -> None:
    done = RunOutcome(run="r1", agent="repo", status="done", stop_reason="agent_exit", output="The report.",
                      data={"handoff": {"conclusion": "found", "status": "partial",
                                        "facts": [{"claim": "x is y", "where": "a.py:3"}],
                                        "open_questions": ["why?"]}})
    text = format_for_parent(done)
    assert text.startswith("[repo finished (agent_exit), status partial]")
    assert "The report." in text and "- x is y (a.py:3)" in text and "- why?" in text
    stuck = RunOutcome(run="r2", agent="chat", status="failed", stop_reason="idle_timeout", output="half",
                       error="no progress for 60s")
    text = format_for_parent(stuck)
    assert "did not finish: idle_timeout" in text and "no progress for 60s" in text and "Partial output:\nhalf" in text


def test_meta_designs_are_validated_and_registered(tmp_path: Path) -> None:
    good = json.dumps({"name": "Doc Writer", "description": "Writes docs.", "system_prompt": "Write docs.",
                       "tools": ["read_file", "list_dir"]})
    design = parse_design(f"sure: {good}", "fallback task")
    assert design.name == "doc_writer" and design.task == "fallback task"
    registry = CustomAgentRegistry(tmp_path, "t1")
    registry.add(design)
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
                       home=str(tmp_path), config=config, options={"model_override": "b"} if role == "repo" else {})
        run = AgentRun(RunContext(spec, Channel()), role)
        assert isinstance(run.engine, RoutingEngine), role
        assert isinstance(run._engine_for_tool("deepthinking"), RoutingEngine), role
        expected = "b" if role in ("coding", "repo") else "a"  # configured per agent; repo by runtime override
        assert run.engine.provider == expected, role
