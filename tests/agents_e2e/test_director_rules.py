"""Director planner rules end to end: reminders, project context, custom agents, limits and failures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agent_harness import LINE_COUNTER_DESIGN, MARKERS, run_turn, tool_messages
from tests.daemon_harness import of_type
from tests.fake_provider import Failure, Step, ToolCallSpec
from yagent.ipc.vocabulary import EventType, StopReason
from yagent.workers.agents.director import FIRST_REMINDER, LATER_REMINDER
from yagent.workers.memory import memory_path

pytestmark = pytest.mark.e2e


def _last_user(request) -> str:
    return [m for m in request.body["messages"] if m["role"] == "user"][-1]["content"]


def test_forced_delegation_reminders_then_the_reply_stands(fake, agent_daemon, project: Path) -> None:
    fake.script("director", MARKERS["director"], [Step(text=f"answer {i}") for i in range(4)])
    task, events = run_turn(agent_daemon, project, "Tell me about this project.")
    calls = fake.requests_for("director")
    assert len(calls) == 4
    reminders = [_last_user(c) for c in calls[1:]]
    assert reminders == [FIRST_REMINDER, LATER_REMINDER, LATER_REMINDER]
    assert FIRST_REMINDER != LATER_REMINDER
    finished = of_type(events, EventType.TURN_FINISHED)[0].data
    assert finished["stop_reason"] == StopReason.PLAIN_TEXT and finished["output"] == "answer 3"
    # Reminders went to this step's call only: the stored conversation never contains them.
    memory = memory_path(agent_daemon.home, task).read_text()
    assert "You replied without delegating" not in memory and "Still no delegation" not in memory
    assert "answer 0" in memory and "answer 3" in memory
    fake.assert_no_problems()


def test_repeating_the_answer_after_a_reminder_makes_it_final(fake, agent_daemon, project: Path) -> None:
    # The first reminder offers this way out; without it a greeting would cost four model calls.
    again = "<thought>\ngoal: greet\n</thought>\nHello!  How can I help?"  # same words, other spacing
    fake.script("director", MARKERS["director"], [Step(text="Hello! How can I help?"), Step(text=again)])
    _, events = run_turn(agent_daemon, project, "hi")
    calls = fake.requests_for("director")
    assert len(calls) == 2 and _last_user(calls[1]) == FIRST_REMINDER
    finished = of_type(events, EventType.TURN_FINISHED)[0].data
    assert finished["stop_reason"] == StopReason.PLAIN_TEXT and "Hello!  How can I help?" in finished["output"]
    fake.assert_no_problems()


def _responses(daemon, task: str) -> list[bool]:
    """The `repeats` mark of every ai_response the task's log holds."""
    logged = daemon.cli("--json", "logs", task)
    assert logged.returncode == 0, logged.stderr
    events = [json.loads(line) for line in logged.stdout.splitlines()]
    return [e["data"]["repeats"] for e in events if e["type"] == EventType.AI_RESPONSE]


def test_an_answer_sent_again_after_the_reminder_is_shown_once(fake, agent_daemon, project: Path) -> None:
    again = "<thought>\ngoal: greet\n</thought>\nHello!  How can I help?"
    fake.script("director", MARKERS["director"], [Step(text="Hello! How can I help?", chunk_size=3),
                                                  Step(text=again, chunk_size=3)])
    printed = agent_daemon.cli("-p", "hi", cwd=project)
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == "Hello! How can I help?\n"
    task = printed.stderr.split("yagent attach ")[1].split("`")[0]
    assert _responses(agent_daemon, task) == [False, True]  # the worker says which reply is the repeat
    log = agent_daemon.cli("logs", task).stdout
    assert log.count("How can I help?") == 1, log
    fake.assert_no_problems()


def test_a_different_answer_after_the_reminder_is_shown_too(fake, agent_daemon, project: Path) -> None:
    fake.script("director", MARKERS["director"], [Step(text="Hello!"), Step(text="Hello! The project is a CLI."),
                                                  Step(text="Hello! The project is a CLI.")])
    printed = agent_daemon.cli("-p", "hi", cwd=project)
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.splitlines() == ["Hello!", "Hello! The project is a CLI."]
    task = printed.stderr.split("yagent attach ")[1].split("`")[0]
    assert _responses(agent_daemon, task) == [False, False, True]


def test_the_reminder_quota_resets_every_run(fake, agent_daemon, project: Path) -> None:
    fake.script("director", MARKERS["director"], [Step(text=f"first {i}") for i in range(4)]
                + [Step(text=f"second {i}") for i in range(4)])
    task, _ = run_turn(agent_daemon, project, "One.")
    _, events = run_turn(agent_daemon, project, "Two.", task=task, turn=2)
    assert len(fake.requests_for("director")) == 8
    assert of_type(events, EventType.TURN_FINISHED)[-1].data["output"] == "second 3"


def test_no_reminder_after_a_delegation(fake, agent_daemon, project: Path) -> None:
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("delegate_chat", {"task": "hi"})]), Step(text="final")])
    fake.script("chat", MARKERS["chat"], [
        Step(text="hello", tool_calls=[ToolCallSpec("agent_exit", {"summary": "x"})])])
    _, events = run_turn(agent_daemon, project, "Say hi via chat.")
    assert len(fake.requests_for("director")) == 2
    assert of_type(events, EventType.TURN_FINISHED)[0].data["output"] == "final"


def test_project_context_is_injected_on_the_first_turn_only_and_never_from_below_the_working_directory(
        fake, agent_daemon, project: Path) -> None:
    # Over the 32 KiB budget: cut where it goes over, and said so.
    (project / "YAGENT.md").write_text("Always run `make check` after edits.\n" + "Padding line.\n" * 3000)
    (project / "AGENTS.md").write_text("Use tabs, never spaces.\n")
    (project / "sub").mkdir()
    (project / "sub" / "CLAUDE.md").write_text("NESTED INSTRUCTIONS\n")
    exit_step = [ToolCallSpec("agent_exit", {"summary": "ok"})]
    fake.script("director", MARKERS["director"], [Step(text="ok", tool_calls=exit_step),
                                                  Step(text="ok again", tool_calls=exit_step)])
    task, events = run_turn(agent_daemon, project, "Hello.")
    warnings = [e.data["message"] for e in of_type(events, EventType.LOG) if e.data["level"] == "warning"]
    assert any(f"{project / 'YAGENT.md'} cut after" in w and "32,768-byte budget" in w for w in warnings), warnings
    run_turn(agent_daemon, project, "And again.", task=task, turn=2)
    first, second = fake.requests_for("director")
    first_user = _last_user(first)
    assert "Always run `make check` after edits." in first_user and "Use tabs, never spaces." in first_user
    assert "NESTED INSTRUCTIONS" not in first_user
    assert _last_user(second) == "And again."
    assert sum("make check" in (m.get("content") or "") for m in second.body["messages"]) == 1


def test_meta_designs_a_custom_agent_that_stays_for_the_task(fake, agent_daemon, project: Path) -> None:
    (project / "notes.txt").write_text("alpha\nbeta\n")
    design = LINE_COUNTER_DESIGN
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("load_tool", {"names": ["delegate_meta"]})]),
        Step(tool_calls=[ToolCallSpec("delegate_meta", {"task": "I need an agent that counts lines in files."})]),
        Step(tool_calls=[ToolCallSpec("delegate_line_counter", {"task": "Count the lines in notes.txt again."})]),
        Step(text="notes.txt has 2 lines.", tool_calls=[ToolCallSpec("agent_exit", {"summary": "done"})]),
    ])
    fake.script("meta", MARKERS["meta"], [Step(text="Here it is:\n" + json.dumps(design))])
    exit_call = ToolCallSpec("agent_exit", {"summary": "2 lines", "handoff": {"conclusion": "2", "status": "ok"}})
    fake.script("custom", MARKERS["custom"], [
        Step(tool_calls=[ToolCallSpec("read_file", {"path": "notes.txt"})]),
        Step(text="notes.txt has 2 lines.", tool_calls=[exit_call]),
        Step(text="Still 2 lines.", tool_calls=[exit_call]),
    ])
    task, events = run_turn(agent_daemon, project, "Count lines with a purpose-built agent.")
    finished = of_type(events, EventType.TURN_FINISHED)[0].data
    assert finished["status"] == "done", finished
    calls = fake.requests_for("director")
    tool_names = [[t["function"]["name"] for t in c.body.get("tools", [])] for c in calls]
    assert "delegate_line_counter" not in tool_names[1] and "delegate_line_counter" in tool_names[2]
    meta_result = tool_messages(calls[2])[-1]["content"]
    assert "delegate_line_counter" in meta_result and "notes.txt has 2 lines." in meta_result
    assert "Still 2 lines." in tool_messages(calls[3])[-1]["content"]
    custom_runs = [e for e in of_type(events, EventType.RUN_STARTED) if e.agent.startswith("custom:")]
    assert [e.agent for e in custom_runs] == ["custom:line_counter", "custom:line_counter"]
    # The custom agent got only the tools its design picked, plus agent_exit.
    custom_tools = {t["function"]["name"] for t in fake.requests_for("custom")[0].body["tools"]}
    assert custom_tools == {"read_file", "agent_exit"}
    assert fake.requests_for("custom")[0].body["messages"][0]["content"].startswith(
        "You are a yagent custom agent named line_counter")
    fake.assert_no_problems()
    # A later turn of the task still offers the custom agent.
    fake.script("director", MARKERS["director"], [Step(text="yes", tool_calls=[
        ToolCallSpec("agent_exit", {"summary": "y"})])])
    run_turn(agent_daemon, project, "Is the counter still there?", task=task, turn=2)
    later_tools = [t["function"]["name"] for t in fake.requests_for("director")[-1].body["tools"]]
    assert "delegate_line_counter" in later_tools


def test_a_stalled_delegation_hits_its_idle_timeout_and_the_director_carries_on(
        fake, make_agent_daemon, project: Path) -> None:
    daemon = make_agent_daemon('[agent]\ndelegate_idle_timeout = "1s"\n[daemon]\nstop_grace = "0.5s"\n')
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("delegate_chat", {"task": "Explain monads."}, id="c1")]),
        Step(text="The chat agent stalled; here is what I know.", tool_calls=[
            ToolCallSpec("agent_exit", {"summary": "partial"})]),
    ])
    fake.script("chat", MARKERS["chat"], [Step(text="Monads are " * 20, chunk_size=5, failure=Failure.stall(2))])
    _, events = run_turn(daemon, project, "Explain monads.")
    result = tool_messages(fake.requests_for("director")[1])[0]["content"]
    assert StopReason.IDLE_TIMEOUT in result and "no progress" in result
    assert of_type(events, EventType.TURN_FINISHED)[0].data["output"] == "The chat agent stalled; here is what I know."
    chat_end = [e for e in of_type(events, EventType.RUN_FINISHED) if e.agent == "chat"][0].data
    assert chat_end["stop_reason"] == StopReason.IDLE_TIMEOUT
    fake.wait_for_disconnect(10)  # the killed worker's connection to the provider went away


def test_a_delegation_streaming_long_tool_arguments_is_not_judged_idle(
        fake, make_agent_daemon, project: Path) -> None:
    # Tool-call arguments stream without events (a big file being written); that is progress, not idleness.
    daemon = make_agent_daemon('[agent]\ndelegate_idle_timeout = "1s"\n[daemon]\nstop_grace = "0.5s"\n',
                               api_format="anthropic")
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("delegate_chat", {"task": "Write a long note."}, id="c1")]),
        Step(text="The note is written.", tool_calls=[ToolCallSpec("agent_exit", {"summary": "ok"})]),
    ])
    # Every stream event comes 0.05s after the one before, a twentieth of the idle timeout (so the test does
    # not hang on machine speed); the ~60 argument fragments take about three times the timeout.
    fake.script("chat", MARKERS["chat"], [Step(
        text="Here it is.", latency=0.05, chunk_size=2,
        tool_calls=[ToolCallSpec("agent_exit", {"summary": "a long note " * 3, "handoff": {
            "conclusion": "written", "status": "ok"}})])])
    _, events = run_turn(daemon, project, "Write a long note.")
    chat = [e for e in events if e.agent == "chat"]
    chat_end = [e for e in of_type(chat, EventType.RUN_FINISHED)][0]
    assert chat_end.data["status"] == "done", chat_end.data
    started = of_type(chat, EventType.RUN_STARTED)[0]
    assert chat_end.ts - started.ts > 1.0  # it did outlast the idle timeout, streaming arguments only
    fake.assert_no_problems()


def test_a_quiet_command_longer_than_a_short_idle_timeout_is_not_judged_idle(
        fake, make_agent_daemon, project: Path) -> None:
    # A command printing nothing is kept alive by heartbeats, which must come well within the idle timeout.
    daemon = make_agent_daemon('[agent]\ndelegate_idle_timeout = "1s"\n[daemon]\nstop_grace = "0.5s"\n')
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("delegate_coding", {"task": "Run the slow check."}, id="c1")]),
        Step(text="Checked.", tool_calls=[ToolCallSpec("agent_exit", {"summary": "ok"})]),
    ])
    fake.script("coding", MARKERS["coding"], [
        Step(tool_calls=[ToolCallSpec("run_bash", {"command": "sleep 2.5; echo checked"})]),
        Step(text="The check printed checked.", tool_calls=[ToolCallSpec("agent_exit", {"summary": "checked"})]),
    ])
    _, events = run_turn(daemon, project, "Run the slow check.", yolo="yolo")
    coding_end = [e for e in of_type(events, EventType.RUN_FINISHED) if e.agent == "coding"][0].data
    assert coding_end["status"] == "done", coding_end
    assert "checked" in tool_messages(fake.requests_for("coding")[1])[0]["content"]
    fake.assert_no_problems()


def test_max_steps_stops_the_run(fake, make_agent_daemon, project: Path) -> None:
    daemon = make_agent_daemon("[agent]\ndirector_max_steps = 2\n")
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("list_dir", {"path": "."})]) for _ in range(2)])
    _, events = run_turn(daemon, project, "Look around forever.")
    finished = of_type(events, EventType.TURN_FINISHED)[0].data
    assert finished["stop_reason"] == StopReason.MAX_STEPS and finished["status"] == "failed"
    assert "2 steps" in finished["error"]
    assert len(fake.requests_for("director")) == 2


def test_a_provider_error_ends_the_turn_naming_provider_model_and_status(fake, agent_daemon, project: Path) -> None:
    fake.script("director", MARKERS["director"], [Step(failure=Failure.http(401, message="bad key"))])
    _, events = run_turn(agent_daemon, project, "Hello?")
    finished = of_type(events, EventType.TURN_FINISHED)[0].data
    assert finished["stop_reason"] == StopReason.LLM_ERROR
    assert "401" in finished["error"] and "fake" in finished["error"] and "fake-model" in finished["error"]
    assert of_type(events, EventType.CONVERSATION_ERROR)
    assert len(fake.requests_for("director")) == 1  # an auth error is not retried


def test_no_provider_configured_fails_with_setup_advice(make_daemon, project: Path) -> None:
    daemon = make_daemon("")
    _, events = run_turn(daemon, project, "Hello?")
    finished = of_type(events, EventType.TURN_FINISHED)[0].data
    assert finished["status"] == "failed" and "yagent setup" in finished["error"]


def test_an_open_circuit_breaker_fails_the_next_turn_fast(fake, make_agent_daemon, project: Path) -> None:
    daemon = make_agent_daemon('[llm]\ncircuit_breaker_threshold = 1\ncircuit_breaker_reset_timeout = "10m"\n')
    fake.script("director", MARKERS["director"], [Step(failure=Failure.http(401, message="bad key"))])
    task, events = run_turn(daemon, project, "First.")
    assert of_type(events, EventType.TURN_FINISHED)[0].data["stop_reason"] == StopReason.LLM_ERROR
    _, events = run_turn(daemon, project, "Second.", task=task, turn=2)
    finished = of_type(events, EventType.TURN_FINISHED)[-1].data
    assert finished["stop_reason"] == StopReason.CIRCUIT_BREAKER_OPEN
    assert len(fake.requests_for("director")) == 1  # the second turn did not call the provider at all


def test_cancelling_a_turn_keeps_every_tool_call_paired_in_memory(fake, agent_daemon, project: Path) -> None:
    from tests.daemon_harness import arun, collect_turn, submit
    from yagent.ipc.messages import Ack, TaskControl

    fake.script("director", MARKERS["director"], [Step(tool_calls=[
        ToolCallSpec("list_dir", {"path": "."}, id="d1"),
        ToolCallSpec("delegate_coding", {"task": "wait"}, id="d2"),
        ToolCallSpec("list_dir", {"path": "."}, id="d3")])])
    fake.script("coding", MARKERS["coding"], [Step(tool_calls=[ToolCallSpec("run_bash", {"command": "sleep 60"})])])

    async def go():
        async with agent_daemon.client() as c:
            sub = await submit(c, project, "Start and then be cancelled.", agent="director")

            async def cancel_when_running(ev):
                if ev.type == EventType.TOOL_CALL_START and ev.agent == "coding":
                    await c.request(TaskControl(id=0, task=sub.task, action="cancel"), Ack)

            return sub.task, await collect_turn(c, sub.task, on_event=cancel_when_running)

    task, events = arun(go(), 60)
    assert of_type(events, EventType.TURN_FINISHED)[0].data["status"] == "cancelled"
    lines = [json.loads(line) for line in memory_path(agent_daemon.home, task).read_text().splitlines()]
    calls = [c["id"] for m in lines if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    results = [m["tool_call_id"] for m in lines if m["role"] == "tool"]
    assert calls == ["d1", "d2", "d3"] and results == calls


def test_a_custom_agent_whose_first_run_fails_is_reported_as_an_error(fake, agent_daemon, project: Path) -> None:
    design = {"name": "fragile", "description": "Fails.", "system_prompt": "Do the thing.", "tools": ["read_file"],
              "task": "Do the thing."}
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("load_tool", {"names": ["delegate_meta"]})]),
        Step(tool_calls=[ToolCallSpec("delegate_meta", {"task": "Make an agent that does the thing."})]),
        Step(text="It failed.", tool_calls=[ToolCallSpec("agent_exit", {"summary": "failed"})]),
    ])
    fake.script("meta", MARKERS["meta"], [Step(text=json.dumps(design))])
    fake.script("custom", MARKERS["custom"], [Step(failure=Failure.http(400, message="model not found"))])
    run_turn(agent_daemon, project, "Do the thing with a new agent.")
    meta_result = tool_messages(fake.requests_for("director")[2])[-1]["content"]
    assert meta_result.splitlines()[0].startswith("[meta finished (agent_exit), status error]"), meta_result
    assert "its first run did not finish" in meta_result and "model not found" in meta_result
