"""The repository blueprint end to end: a scripted Repo run (confined, granted its project's blueprint directory)
reads a file and finishes with blueprint entries; the file appears, the Director is told what was kept and refused,
the next turn's Director sees the repository map in its prompt and reads the note with read_blueprint, and `yagent
blueprint` shows it; only the model is scripted."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent_harness import MARKERS, run_turn, tool_messages
from tests.blueprint.fixtures import make_project
from tests.daemon_harness import of_type
from tests.fake_provider import Step, ToolCallSpec
from yagent.daemon.registry import project_id_for
from yagent.ipc.vocabulary import EventType

pytestmark = pytest.mark.e2e

KEPT = {"section": "module", "module": "shop", "field": "purpose", "claim": "The shop's command line; orders go to "
        "core's ledger.", "where": "shop/cli.py:main"}
GUESSED = {"section": "module", "module": "web", "field": "purpose", "claim": "The web client.", "where": "web/app.js"}


def _exit(summary: str, **extra: object) -> ToolCallSpec:
    return ToolCallSpec("agent_exit", {"summary": summary, "handoff": {"conclusion": summary, "status": "ok"},
                                       **extra})


def test_a_repo_run_writes_the_blueprint_and_the_next_turn_sees_it(fake, agent_daemon, tmp_path: Path) -> None:
    project = make_project(tmp_path / "shop")
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("delegate_repo", {"task": "Explore shop and record what it is."})]),
        Step(text="recorded", tool_calls=[ToolCallSpec("agent_exit", {"summary": "recorded"})]),
    ])
    fake.script("repo", MARKERS["repo"], [
        Step(tool_calls=[ToolCallSpec("read_file", {"path": "shop/cli.py"})]),
        Step(text="shop/cli.py is the command line.", tool_calls=[_exit("explored", blueprint=[KEPT, GUESSED])]),
    ])
    task, events = run_turn(agent_daemon, project, "Explore the shop.")
    assert of_type(events, EventType.TURN_FINISHED)[-1].data["status"] == "done"
    repo_prompt = fake.requests_for("repo")[0].body["messages"][0]["content"]
    assert "# Repository map" in repo_prompt and "- shop (5 files, python) → core" in repo_prompt
    told = [m["content"] for m in tool_messages(fake.requests_for("director")[-1])][-1]
    assert ("> [blueprint] submitted 2, written 1, rejected 1: outside-evidence-set ×1 (#2: no file of module web "
            "was read in this run), evidence: 1 file read") in told
    document = agent_daemon.home / "data" / "blueprint" / project_id_for(project.resolve()) / "blueprint.md"
    assert document.exists() and oct(document.stat().st_mode & 0o777) == "0o600"
    text = document.read_text()
    assert KEPT["claim"] in text and "The web client." not in text
    notes = list((agent_daemon.home / "tasks" / task / "notes" / "repo").glob("*.md"))
    assert len(notes) == 1 and "> [blueprint] submitted 2, written 1" in notes[0].read_text()

    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("read_blueprint", {"module": "shop"})]),
        Step(text="done", tool_calls=[ToolCallSpec("agent_exit", {"summary": "done"})]),
    ])
    run_turn(agent_daemon, project, "What is shop?", task=task)
    first, second = fake.requests_for("director")[-2:]
    system = first.body["messages"][0]["content"]
    assert "# Repository map (derived from the project's files now: 6 modules" in system
    assert "1 modules have notes: read_blueprint gives them" in system and KEPT["claim"] not in system
    answer = [m["content"] for m in tool_messages(second)][-1]
    assert "module shop: 5 files" in answer and KEPT["claim"] in answer and "stale" not in answer

    shown = agent_daemon.cli("blueprint", cwd=project)
    assert shown.returncode == 0, shown.stderr
    assert "6 modules" in shown.stdout and f"purpose: {KEPT['claim']}" in shown.stdout

    (project / "shop" / "refunds.py").write_text("")  # a structural change: the note goes stale, its prose stays
    stale = agent_daemon.cli("blueprint", "--module", "shop", cwd=project)
    assert KEPT["claim"] in stale.stdout and "stale: the structure changed since" in stale.stdout
