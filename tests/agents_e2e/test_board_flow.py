"""The board through a real daemon: a Director delegation leaves a note in the task's state directory,
the Director's next model call carries the index line, and the conversation memory never holds it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent_harness import MARKERS, run_turn, tool_messages
from tests.daemon_harness import of_type
from tests.fake_provider import Step, ToolCallSpec
from yagent.ipc.state_layout import MEMORY_FILE, notes_dir, task_dir
from yagent.ipc.vocabulary import EventType
from yagent.workers.board import INDEX_HEADER, NoteStore

pytestmark = pytest.mark.e2e


def test_a_delegation_leaves_a_note_and_the_next_call_carries_its_index_line(fake, agent_daemon,
                                                                             project: Path) -> None:
    (project / "app.py").write_text('print("hello")\n')
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("delegate_repo", {"task": "Where is the greeting printed?"}, id="call_repo")]),
        Step(text="The greeting is printed in app.py line 1."),
    ])
    fake.script("repo", MARKERS["repo"], [
        Step(text="The greeting is printed by app.py line 1, the only statement of the file.", tool_calls=[
            ToolCallSpec("agent_exit", {"summary": "app.py:1", "handoff": {
                "conclusion": "app.py line 1 prints the greeting",
                "facts": [{"claim": "prints hello", "where": "app.py:1"}], "status": "ok"}})]),
    ])

    task, events = run_turn(agent_daemon, project, "Where is the greeting printed?")
    assert of_type(events, EventType.TURN_FINISHED)[0].data["output"] == "The greeting is printed in app.py line 1."
    fake.assert_no_problems()

    (ref,) = NoteStore(notes_dir(agent_daemon.home, task)).refs()
    note = NoteStore(notes_dir(agent_daemon.home, task)).read(ref)
    deliverable, account = note.body.split("\n\n> [blueprint] ")  # a Repo note ends with its blueprint account
    assert deliverable == "The greeting is printed by app.py line 1, the only statement of the file."
    assert account.startswith("nothing submitted")
    assert note.handoff.conclusion == "app.py line 1 prints the greeting"
    assert note.task == "Where is the greeting printed?"

    first, second = fake.requests_for("director")
    assert not any(INDEX_HEADER in str(m.get("content")) for m in first.body["messages"])
    index = [m["content"] for m in second.body["messages"] if INDEX_HEADER in str(m.get("content"))]
    assert len(index) == 1 and f"{ref.handle} [ok] app.py line 1 prints the greeting" in index[0]
    assert ref.handle in tool_messages(second)[0]["content"]  # the result names its note

    memory = (task_dir(agent_daemon.home, task) / MEMORY_FILE).read_text()
    assert "app.py line 1 prints the greeting" in memory  # the tool result is in memory, as always
    assert INDEX_HEADER not in memory  # the index never is


def test_a_report_over_the_artifact_budget_reaches_the_director_as_its_summary_and_artifact(fake, agent_daemon,
                                                                                          project: Path) -> None:
    report = "".join(f"Finding {i}: the module at src/m{i}.py looks fine.\n" for i in range(400))
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("delegate_repo", {"task": "Review every module."}, id="c1")]),
        Step(tool_calls=[ToolCallSpec("list_notes", {}, id="c2")]),
        Step(text="Reviewed: every module is fine."),
    ])
    fake.script("repo", MARKERS["repo"], [Step(text=report, tool_calls=[ToolCallSpec("agent_exit", {
        "summary": "all fine", "handoff": {"conclusion": "Every module is fine.", "status": "ok"}})])])
    task, _ = run_turn(agent_daemon, project, "Review the code.")
    result = tool_messages(fake.requests_for("director")[1])[0]["content"]
    assert "Every module is fine." in result and "Finding 399:" not in result
    (artifact,) = [w.removeprefix("artifact:").rstrip(".") for w in result.split() if w.startswith("artifact:")]
    listing = tool_messages(fake.requests_for("director")[2])[1]["content"]
    assert f"artifact:{artifact}" in listing
    store = NoteStore(notes_dir(agent_daemon.home, task))
    body = store.read(store.refs()[0]).body
    assert body.split("\n\n> [blueprint] ")[0] == report.strip()  # the note keeps the whole deliverable
    fake.assert_no_problems()
