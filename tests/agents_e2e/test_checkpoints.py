"""Git checkpoints end to end: a real daemon checkpoints a scripted Coding sub-task before and after, `yagent diff`
shows it, `yagent undo` takes it back through the client (refusing over the user's own edit until forced), and the
Coding agent's git_checkpoint_* tools reach the daemon; only the model is scripted."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.agent_harness import MARKERS, run_turn, tool_messages
from tests.checkpoints.repos import files_of, git, make_repo, state
from tests.daemon_harness import of_type
from tests.fake_provider import Step, ToolCallSpec
from yagent.ipc.vocabulary import EventType

pytestmark = pytest.mark.e2e


def _exit(summary: str) -> ToolCallSpec:
    return ToolCallSpec("agent_exit", {"summary": summary, "handoff": {"conclusion": summary, "status": "ok"}})


def _delegate_coding(fake, task: str) -> None:
    fake.script("director", MARKERS["director"], [
        Step(tool_calls=[ToolCallSpec("delegate_coding", {"task": task})]),
        Step(text="done", tool_calls=[ToolCallSpec("agent_exit", {"summary": "done"})]),
    ])


def test_a_coding_sub_task_is_checkpointed_and_diff_and_undo_take_it_back_but_never_over_the_users_edit(
        fake, make_agent_daemon, tmp_path: Path) -> None:
    agent_daemon = make_agent_daemon('[git_checkpoint]\nsquash_on_exit = true\nagent_branch_prefix = "ai/"\n')
    project = make_repo(tmp_path / "proj")
    (project / "a.txt").write_text("one\nuncommitted\n")  # the user's own work in progress
    start, user_state = files_of(project), state(project)
    _delegate_coding(fake, "Change a.txt and add notes.py.")
    fake.script("coding", MARKERS["coding"], [
        Step(tool_calls=[ToolCallSpec("search_replace_in_file", {"path": "a.txt", "search": "uncommitted",
                                                                 "replace": "changed by the agent"}),
                         ToolCallSpec("create_file", {"path": "notes.py", "content": "print('notes')\n"})]),
        Step(text="changed", tool_calls=[_exit("a.txt changed, notes.py added")]),
    ])
    task, events = run_turn(agent_daemon, project, "Do the change.")
    assert of_type(events, EventType.TURN_FINISHED)[-1].data["status"] == "done"
    offered = {t["function"]["name"] for t in fake.requests_for("coding")[0].body["tools"]}
    assert "load_tool" in offered  # the git_checkpoint_* tools wait in the deferred catalogue

    shown = agent_daemon.cli("diff", task, cwd=project)
    assert shown.returncode == 0, shown.stderr
    assert "sub-task 1: coding" in shown.stdout and "(checkpoints 1 → 2)" in shown.stdout
    assert "  M a.txt  +1 -1" in shown.stdout and "  A notes.py  +1 -0" in shown.stdout
    assert "+changed by the agent" in shown.stdout and "-uncommitted" in shown.stdout
    as_json = json.loads(agent_daemon.cli("diff", task, "--json", "--stat", cwd=project).stdout)
    assert [f["path"] for f in as_json["subtasks"][0]["files"]] == ["a.txt", "notes.py"]
    assert all(f["patch"] == "" for f in as_json["subtasks"][0]["files"])
    # squash_on_exit: the turn's changes as one commit on ai/<task>; the user's branch has not moved.
    squashed = git(project, "rev-parse", f"refs/heads/ai/{task}").strip()
    assert git(project, "rev-parse", f"{squashed}^").strip() == user_state["head"].strip()
    assert git(project, "show", f"{squashed}:a.txt") == "one\nchanged by the agent\n"
    assert git(project, "log", "-1", "--format=%s", squashed).strip() == "yagent: Do the change."

    (project / "notes.py").write_text("print('the user edited this')\n")
    edited = files_of(project)
    refused = agent_daemon.cli("undo", task, "--yes", cwd=project)
    assert refused.returncode == 1 and "you changed notes.py since the agents did" in refused.stdout
    assert files_of(project) == edited

    forced = agent_daemon.cli("undo", task, "--yes", "--force", cwd=project)
    assert forced.returncode == 0, forced.stderr + forced.stdout
    assert "2 files put back" in forced.stdout and "yagent undo --to 3" in forced.stdout
    after_undo = state(project)
    assert after_undo.pop("refs") == f"refs/heads/ai/{task} {squashed}\n" + user_state.pop("refs")  # main has not moved
    assert files_of(project) == start and after_undo == user_state  # index, HEAD, stash, status: as before
    again = agent_daemon.cli("undo", task, "--yes", cwd=project)
    assert again.returncode == 2 and "undone already" in again.stderr
    back = agent_daemon.cli("undo", task, "--to", "3", "--yes", cwd=project)  # the undo taken back
    assert back.returncode == 0 and (project / "notes.py").read_text() == "print('the user edited this')\n"


def test_files_the_agent_writes_inside_an_ignored_directory_are_shown_and_undone_and_the_rest_is_left_alone(
        fake, agent_daemon, tmp_path: Path) -> None:
    project = make_repo(tmp_path / "proj")  # its .gitignore ignores build/ as a whole
    (project / "build").mkdir()
    (project / "build" / "keep.txt").write_text("the user's build output\n")
    (project / "build" / "other.txt").write_text("never the agent's\n")
    start, user_state = files_of(project), state(project)
    _delegate_coding(fake, "Regenerate the build files.")
    fake.script("coding", MARKERS["coding"], [
        Step(tool_calls=[ToolCallSpec("search_replace_in_file", {"path": "build/keep.txt", "search": "user's",
                                                                 "replace": "agent's"}),
                         ToolCallSpec("create_file", {"path": "build/gen/made.txt", "content": "generated\n"}),
                         ToolCallSpec("create_file", {"path": "plain.txt", "content": "tracked kind\n"})]),
        Step(text="regenerated", tool_calls=[_exit("build regenerated")]),
    ])
    task, events = run_turn(agent_daemon, project, "Regenerate.")
    assert of_type(events, EventType.TURN_FINISHED)[-1].data["status"] == "done"
    assert (project / "build" / "keep.txt").read_text() == "the agent's build output\n"

    shown = json.loads(agent_daemon.cli("diff", task, "--json", cwd=project).stdout)
    changed = {(f["path"], f["change"]) for f in shown["subtasks"][0]["files"]}
    assert changed == {("build/keep.txt", "modified"), ("build/gen/made.txt", "added"), ("plain.txt", "added")}

    (project / "build" / "later.txt").write_text("the user builds on\n")  # never written by an agent
    agent_daemon.proc.send_signal(signal.SIGKILL)  # what was noted must outlive the daemon: it is in the registry
    agent_daemon.proc.wait(30)
    agent_daemon.start()
    undone = agent_daemon.cli("undo", task, "--yes", cwd=project)
    assert undone.returncode == 0, undone.stderr + undone.stdout
    assert "3 files put back" in undone.stdout
    assert files_of(project) == {**start, "build/later.txt": b"the user builds on\n"}
    assert state(project) == user_state


def test_the_coding_agent_makes_lists_and_rolls_back_checkpoints_and_a_forged_number_is_refused(
        fake, agent_daemon, tmp_path: Path) -> None:
    project = make_repo(tmp_path / "proj")
    _delegate_coding(fake, "Try a change and roll it back.")
    fake.script("coding", MARKERS["coding"], [
        Step(tool_calls=[ToolCallSpec("load_tool", {"names": ["git_checkpoint_create", "git_checkpoint_list",
                                                              "git_checkpoint_rollback"]})]),
        Step(tool_calls=[ToolCallSpec("git_checkpoint_create", {"label": "before the experiment"})]),
        Step(tool_calls=[ToolCallSpec("create_file", {"path": "a.txt", "content": "experiment\n",
                                                      "overwrite": True})]),
        Step(tool_calls=[ToolCallSpec("git_checkpoint_rollback", {"checkpoint": 99})]),
        Step(tool_calls=[ToolCallSpec("git_checkpoint_rollback", {"checkpoint": 2})]),
        Step(tool_calls=[ToolCallSpec("git_checkpoint_list", {})]),
        Step(text="rolled back", tool_calls=[_exit("rolled back")]),
    ])
    task, events = run_turn(agent_daemon, project, "Experiment.")
    assert of_type(events, EventType.TURN_FINISHED)[-1].data["status"] == "done"
    results = [m["content"] for m in tool_messages(fake.requests_for("coding")[-1])]
    made, _write, forged, rolled, listed = results[1:6]
    assert made.startswith("checkpoint 2 made (before the experiment)")
    assert "no checkpoint 99 in this task" in forged and "Nothing was changed" in forged
    assert rolled.startswith("rolled back to checkpoint 2: 1 file put back (a.txt)") and "checkpoint 3" in rolled
    assert "1: before coding" in listed and "2: agent coding — before the experiment" in listed
    assert "3: safety" in listed
    assert (project / "a.txt").read_text() == "one\n"
    records = json.loads(agent_daemon.cli("diff", task, "--json", cwd=project).stdout)
    assert [c["kind"] for c in records["checkpoints"]] == ["before", "agent", "safety", "after", "after"]
    assert records["subtasks"][0]["files"] == []  # rolled back: the sub-task left the project as it found it


def test_a_project_that_is_no_repository_has_checkpoints_off_said_once_and_no_checkpoint_tools(
        fake, agent_daemon, project: Path) -> None:
    notices: list[list[str]] = []
    task = None
    for turn in (1, 2):
        _delegate_coding(fake, f"Write file {turn}.")
        fake.script("coding", MARKERS["coding"], [
            Step(tool_calls=[ToolCallSpec("create_file", {"path": f"f{turn}.txt", "content": "x\n"})]),
            Step(text="ok", tool_calls=[_exit("written")]),
        ])
        task, events = run_turn(agent_daemon, project, f"Turn {turn}.", task=task)
        assert of_type(events, EventType.TURN_FINISHED)[-1].data["status"] == "done"
        notices.append([e.data["message"] for e in of_type(events, EventType.LOG)
                        if "checkpoints are off" in e.data.get("message", "")])
    assert len(notices[0]) == 1 and "not a git repository" in notices[0][0]
    assert notices[1] == notices[0]  # the second turn's collection replays the task from its start: still one
    offered = {t["function"]["name"] for t in fake.requests_for("coding")[0].body["tools"]}
    catalogue = fake.requests_for("coding")[0].body["messages"][0]["content"]
    assert "git_checkpoint" not in catalogue and not any(n.startswith("git_checkpoint") for n in offered)
    shown = agent_daemon.cli("diff", task, cwd=project)
    assert shown.returncode == 0 and "not a git repository" in shown.stdout


def test_checkpoints_turned_off_make_no_ref_offer_no_tool_and_diff_says_why(fake, make_agent_daemon,
                                                                            tmp_path: Path) -> None:
    daemon = make_agent_daemon("[git_checkpoint]\nenabled = false\n")
    project = make_repo(tmp_path / "proj")
    _delegate_coding(fake, "Write a file.")
    fake.script("coding", MARKERS["coding"], [
        Step(tool_calls=[ToolCallSpec("create_file", {"path": "n.txt", "content": "x\n"})]),
        Step(text="ok", tool_calls=[_exit("written")]),
    ])
    task, events = run_turn(daemon, project, "Write.")
    assert of_type(events, EventType.TURN_FINISHED)[-1].data["status"] == "done"
    assert git(project, "for-each-ref", "refs/yagent") == ""
    catalogue = fake.requests_for("coding")[0].body["messages"][0]["content"]
    assert "git_checkpoint" not in catalogue
    shown = daemon.cli("diff", task, cwd=project)
    assert "turned off ([git_checkpoint] enabled = false)" in shown.stdout
