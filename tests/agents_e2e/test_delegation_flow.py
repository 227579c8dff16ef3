"""The whole product path: user → Director → parallel Repo + Chat → Coding edits and verifies → answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent_harness import MARKERS, run_turn, tool_messages
from tests.daemon_harness import of_type
from tests.fake_provider import Failure, Step, ToolCallSpec
from yagent.ipc.vocabulary import EventType
from yagent.workers.agents.director import MAX_NON_DELEGATION_REMINDERS
from yagent.workers.board import INDEX_HEADER

pytestmark = pytest.mark.e2e


def _spans(events, agent):
    starts = {e.run: e.ts for e in of_type(events, EventType.RUN_STARTED) if e.agent == agent}
    ends = {e.run: e.ts for e in of_type(events, EventType.RUN_FINISHED) if e.agent == agent}
    return [(starts[r], ends[r]) for r in starts]


def test_director_delegates_in_parallel_then_coding_edits_and_verifies(fake, agent_daemon, project: Path) -> None:
    (project / "app.py").write_text('print("hello")\n')
    thought = "<thought>\ngoal: change the greeting\nstep: start\nreason: need facts\nplan:\n- [>] look\n</thought>\n"
    fake.script("director", MARKERS["director"], [
        Step(text=thought, tool_calls=[
            ToolCallSpec("delegate_repo", {"task": "Where is the greeting printed?"}, id="call_repo"),
            ToolCallSpec("delegate_chat", {"task": "What is a friendly farewell word?"}, id="call_chat")]),
        Step(tool_calls=[ToolCallSpec("delegate_coding", {
            "task": "In app.py replace hello with goodbye, then run python3 app.py to verify."}, id="call_code")]),
        Step(text="app.py now prints goodbye; I verified it by running it."),
    ])
    # Each of the two read-only children streams slowly enough that both must be alive at once.
    fake.script("repo", MARKERS["repo"], [
        Step(tool_calls=[ToolCallSpec("read_file", {"path": "app.py"})], latency=0.05),
        Step(text="The greeting is printed in app.py line 1.", latency=0.05, tool_calls=[ToolCallSpec(
            "agent_exit", {"summary": "app.py:1 prints it", "handoff": {
                "conclusion": "app.py line 1", "facts": [{"claim": "prints hello", "where": "app.py:1"}],
                "status": "ok"}})]),
    ])
    fake.script("chat", MARKERS["chat"], [
        Step(text="Goodbye is a friendly farewell.", latency=0.1, chunk_size=3, tool_calls=[
            ToolCallSpec("agent_exit", {"summary": "goodbye", "handoff": {"conclusion": "goodbye", "status": "ok"}})]),
    ])
    fake.script("coding", MARKERS["coding"], [
        Step(text=thought, tool_calls=[ToolCallSpec("search_replace_in_file",
                                                    {"path": "app.py", "search": "hello", "replace": "goodbye"})]),
        Step(tool_calls=[ToolCallSpec("run_bash", {"command": "python3 app.py"})]),
        Step(text="Replaced hello with goodbye in app.py; running it prints goodbye.", tool_calls=[
            ToolCallSpec("agent_exit", {"summary": "done", "handoff": {
                "conclusion": "greeting changed", "facts": [{"claim": "prints goodbye", "where": "app.py:1"}],
                "status": "ok"}})]),
    ])

    _, events = run_turn(agent_daemon, project, "Change the greeting in app.py to a farewell.")

    assert (project / "app.py").read_text() == 'print("goodbye")\n'
    finished = of_type(events, EventType.TURN_FINISHED)[0].data
    assert finished["status"] == "done", finished
    assert finished["output"] == "app.py now prints goodbye; I verified it by running it."
    fake.assert_no_problems()

    # Repo and Chat ran as two live worker processes at the same time.
    (repo_span,), (chat_span,) = _spans(events, "repo"), _spans(events, "chat")
    assert max(repo_span[0], chat_span[0]) < min(repo_span[1], chat_span[1]), (repo_span, chat_span)
    pids = {e.agent: e.data["pid"] for e in of_type(events, EventType.RUN_STARTED)}
    assert len({pids["director"], pids["repo"], pids["chat"], pids["coding"]}) == 4

    # The Director's second call carried both children's results, each paired with its call id.
    director_calls = fake.requests_for("director")
    assert len(director_calls) == 3
    results = {m["tool_call_id"]: m["content"] for m in tool_messages(director_calls[1])}
    assert "The greeting is printed in app.py line 1." in results["call_repo"]
    assert "Facts:" in results["call_repo"] and "app.py:1" in results["call_repo"]
    assert "Goodbye is a friendly farewell." in results["call_chat"]
    coding_result = {m["tool_call_id"]: m["content"] for m in tool_messages(director_calls[2])}["call_code"]
    # The deliverable is the report text, not the exit summary.
    assert "Replaced hello with goodbye in app.py; running it prints goodbye." in coding_result
    assert "status ok" in coding_result

    # Coding saw the diff and the verification output.
    coding_calls = fake.requests_for("coding")
    diff = tool_messages(coding_calls[1])[0]["content"]
    assert "-print(\"hello\")" in diff and "+print(\"goodbye\")" in diff
    assert "goodbye" in tool_messages(coding_calls[2])[0]["content"]

    # Events: thought plans, streamed chunks and tool calls reached the clients.
    plans = of_type(events, EventType.THINKLINK_ENTRY)
    assert any(e.agent == "director" and e.data["goal"] == "change the greeting" for e in plans)
    assert of_type(events, EventType.AI_CHUNK)
    tools_seen = {(e.agent, e.data["name"]) for e in of_type(events, EventType.TOOL_CALL_START)}
    assert all(e.data["brief"] == "app.py" for e in of_type(events, EventType.TOOL_CALL_START)
               if e.data["name"] == "read_file")
    results = of_type(events, EventType.TOOL_CALL_RESULT)
    assert all(set(e.data) == {"call_id", "name", "content", "is_error", "duration"} for e in results)
    assert ("coding", "search_replace_in_file") in tools_seen and ("director", "delegate_repo") in tools_seen
    usage = [e.data["usage"] for e in of_type(events, EventType.LLM_CALL_END) if e.agent == "director"]
    assert all(u["total_input_tokens"] > 0 for u in usage)


def test_a_second_turn_continues_the_conversation(fake, agent_daemon, project: Path) -> None:
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("delegate_chat", {"task": "What is 2+2?"})]),
        Step(text="It is 4."),
        Step(text="You asked about 2+2, and the answer was 4.",
             tool_calls=[ToolCallSpec("agent_exit", {"summary": "recalled the earlier question"})]),
    ])
    fake.script("chat", MARKERS["chat"], [Step(text="4", tool_calls=[ToolCallSpec("agent_exit", {"summary": "4"})])])
    task, _ = run_turn(agent_daemon, project, "What is 2+2?")
    _, events = run_turn(agent_daemon, project, "What did I ask before?", task=task, turn=2)
    assert of_type(events, EventType.TURN_FINISHED)[-1].data["output"] == "You asked about 2+2, and the answer was 4."
    second = fake.requests_for("director")[2].body["messages"]
    contents = [m.get("content") for m in second]
    assert "What is 2+2?" in contents[1]  # the first turn's user message is in the history
    assert "It is 4." in contents
    # Last comes the board's index (this call only, never in memory), and before it the new message.
    assert contents[-1].startswith(INDEX_HEADER) and contents[-2] == "What did I ask before?"
    assert sum(1 for m in second if m["role"] == "system") == 1  # the system prompt is not stored in memory
    fake.assert_no_problems()


def test_yagent_run_prints_the_streamed_answer(fake, agent_daemon, project: Path) -> None:
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("delegate_chat", {"task": "Greet."})]),
        Step(text="Hello from the Director, streamed in small pieces.", chunk_size=4,
             tool_calls=[ToolCallSpec("agent_exit", {"summary": "greeted"})]),
    ])
    fake.script("chat", MARKERS["chat"], [Step(text="hi", tool_calls=[ToolCallSpec("agent_exit", {"summary": "hi"})])])
    result = agent_daemon.cli("run", "--project", str(project), "Say hello.")
    assert result.returncode == 0, result.stderr
    assert "Hello from the Director, streamed in small pieces." in result.stdout
    assert "→ chat started" in result.stdout and "← chat done (agent_exit)" in result.stdout


def test_a_huge_child_report_reaches_the_director_bounded_with_its_handoff(fake, make_agent_daemon,
                                                                          project: Path) -> None:
    agent_daemon = make_agent_daemon("[blackboard]\nartifact_budget_tokens = 0\n")  # the report stays inline
    report = "".join(f"Finding {i}: the module at src/m{i}.py looks fine.\n" for i in range(4000))  # ~190 kB
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("delegate_chat", {"task": "Review everything."}, id="c1")]),
        Step(text="Reviewed.", tool_calls=[ToolCallSpec("agent_exit", {"summary": "reviewed"})]),
    ])
    fake.script("chat", MARKERS["chat"], [Step(text=report, chunk_size=8192, tool_calls=[ToolCallSpec("agent_exit", {
        "summary": "all fine", "handoff": {"conclusion": "Every module is fine.", "status": "partial",
                                           "facts": [{"claim": "m0 is fine", "where": "src/m0.py:1"}],
                                           "open_questions": ["Were the tests run?"]}})])])
    run_turn(agent_daemon, project, "Review the code.")
    result = tool_messages(fake.requests_for("director")[1])[0]["content"]
    assert len(result) < 64_000  # within the delegation result's cap, so nothing is cut blindly
    assert result.startswith("[chat finished (agent_exit), status partial]")
    # The report is shortened in the middle, and says so; the hand-off after it survives whole.
    assert "Finding 0:" in result and "Finding 3999:" in result and "characters of the report left out" in result
    assert "Conclusion: Every module is fine." in result and "- m0 is fine (src/m0.py:1)" in result
    assert "- Were the tests run?" in result
    fake.assert_no_problems()


def test_yagent_run_prints_two_replies_of_one_run_on_separate_lines(fake, agent_daemon, project: Path) -> None:
    # The Director answers without delegating and is reminded to delegate: several replies of one run.
    replies = [f"Reply {i}." for i in range(1 + MAX_NON_DELEGATION_REMINDERS)]
    fake.script("director", MARKERS["director"], [Step(text=r) for r in replies])
    result = agent_daemon.cli("run", "--project", str(project), "Say something.")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == replies, result.stdout
    fake.assert_no_problems()


def test_yagent_run_says_when_a_failed_model_call_is_retried(fake, make_agent_daemon, project: Path) -> None:
    # With the engine's own retries off, the agent loop retries the failed step after a pause that can add
    # up to minutes: the plain output says why nothing arrives meanwhile.
    daemon = make_agent_daemon("[llm]\nmax_retries = 0\n")
    fake.script("director", MARKERS["director"], [Step(failure=Failure.http(503, message="overloaded")),
                                                  Step(text="Recovered.", tool_calls=[
                                                      ToolCallSpec("agent_exit", {"summary": "recovered"})])])
    result = daemon.cli("run", "--project", str(project), "Say something.")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("  ↻ director: the model call failed, retrying: ") and "503" in lines[0], lines
    assert lines[1] == "Recovered."
    assert sum("retrying" in line for line in lines) == 1
