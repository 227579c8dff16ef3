"""The resume inspection over real files (memory and rollouts written by the real writers), and its confinement
over the real kernel: what it reports is what a resume's replay decides, and it can read but never write."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import pytest

from tests.memory.rollout_fixtures import GIT, write_rollout
from yagent.ipc.confinement import ConfinementSpec, landlock_abi
from yagent.ipc.messages import ResumeInspectionReport, ResumeInspectionSpec
from yagent.ipc.run_settings import RunSettings
from yagent.ipc.state_layout import rollout_dir, task_dir
from yagent.ipc.vocabulary import ReplayVerdict, StopReason, Unconfined
from yagent.workers import resume_inspection
from yagent.workers.agents.custom_agents import CustomAgentRegistry, Design
from yagent.workers.llm import Message, ToolCall
from yagent.workers.memory import ConversationMemory, memory_path
from yagent.workers.resume_inspection import inspect_stopped_turn
from yagent.workers.tools.result import INTERRUPTED_RESULT

needs_landlock = pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock")
ROOT = "rootrun"


def _project(tmp_path: Path) -> Path:
    """A project whose git identity is the fixtures' (GIT): a replay's workspace has not moved."""
    project = tmp_path / "project"
    (project / ".git" / "refs" / "heads").mkdir(parents=True)
    (project / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (project / ".git" / "refs" / "heads" / "main").write_text(GIT.sha + "\n")
    return project


def _stopped_director(home: Path, calls: list[tuple[str, str]], *, task: str = "t1") -> None:
    """The task's memory: a Director turn stopped in a step that made `calls` (id, tool), none answered."""
    history = [Message.user("find the greeting and fix it"),
               Message.assistant("delegating", tool_calls=tuple(ToolCall(i, name, '{"task": "do it"}')
                                                                for i, name in calls))]
    history += [Message.tool(i, f"{INTERRUPTED_RESULT} (the run stopped)", name=name) for i, name in calls[:1]]
    memory = ConversationMemory(path=memory_path(home, task))
    memory.append(*history)
    memory.save()


def _child(home: Path, call_id: str, *, agent: str = "repo", parent_run: str = ROOT, run: str = "run-child",
           messages: list[Message] | None = None, stop: StopReason = StopReason.INTERRUPTED, task: str = "t1") -> Path:
    messages = messages or [Message.system("you are repo"), Message.user("do it"),
                            Message.assistant("reading", tool_calls=(ToolCall("r1", "read_file", '{"path": "a"}'),)),
                            Message.tool("r1", "print('hello')", name="read_file")]
    path = rollout_dir(home, task) / f"20260101-00000{len(list(rollout_dir(home, task).glob('*')))}_{run}_{agent}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_rollout(path, messages, agent=agent, delegation_id=call_id, parent_run=parent_run, stop=stop, run=run)


def _spec(home: Path, project: Path, *, settings: RunSettings | None = None, agent: str = "director",
          task: str = "t1") -> ResumeInspectionSpec:
    return ResumeInspectionSpec(task=task, home=str(home), project_root=str(project), stopped_run=ROOT, agent=agent,
                                yolo="none", settings=settings or RunSettings())


def _verdicts(report: ResumeInspectionReport) -> list[tuple[str, str, str, int, str]]:
    return [(c.call_id, c.agent, c.verdict, c.depth, c.parent) for c in report.children]


def test_each_interrupted_delegation_gets_the_verdict_its_replay_would_and_other_calls_none(tmp_path: Path) -> None:
    home, project = tmp_path / "home", _project(tmp_path)
    CustomAgentRegistry(home, "t1").add(Design("reviewer", "reviews code", "review it", ["read_file"]))
    _stopped_director(home, [("c1", "delegate_repo"), ("c2", "delegate_chat"), ("c3", "delegate_meta"),
                             ("c4", "delegate_reviewer"), ("c5", "not_a_delegation")])
    _child(home, "c1")
    _child(home, "c4", agent="custom:reviewer", run="run-reviewer")

    report = inspect_stopped_turn(_spec(home, project))
    assert report.problem == ""
    assert _verdicts(report) == [
        ("c1", "repo", ReplayVerdict.REPLAYABLE, 1, ""),
        ("c2", "chat", ReplayVerdict.NO_CHILD_ROLLOUT, 1, ""),
        ("c3", "meta", ReplayVerdict.STARTS_OVER, 1, ""),
        ("c4", "custom:reviewer", ReplayVerdict.REPLAYABLE, 1, ""),
    ]
    replayable = report.children[0]
    assert replayable.step == 2 and "replayable" in replayable.reason  # one step finished: the second goes on
    assert report.children[1].step == 0 and "no rollout" in report.children[1].reason


def test_a_meta_delegation_that_had_started_its_first_run_is_judged_by_that_run(tmp_path: Path) -> None:
    home, project = tmp_path / "home", _project(tmp_path)
    CustomAgentRegistry(home, "t1").add(Design("reviewer", "reviews code", "review it", ["read_file"]))
    _stopped_director(home, [("c1", "delegate_meta"), ("c2", "delegate_meta")])
    # c1: Meta had designed and started its first run (Meta's own rollout names its run id, the first run's parent).
    _child(home, "c1", agent="meta", run="runmeta1", messages=[Message.user("design")])
    _child(home, "c1", agent="custom:reviewer", parent_run="runmeta1", run="runfirst")
    # c2: Meta had not got as far as a first run: it designs again.
    _child(home, "c2", agent="meta", run="runmeta2", messages=[Message.user("design")])
    # A first run of the same call under another Meta run is not this one's.
    _child(home, "c2", agent="custom:reviewer", parent_run="someoneelse", run="runstray")

    report = inspect_stopped_turn(_spec(home, project))
    assert _verdicts(report) == [
        ("c1", "custom:reviewer", ReplayVerdict.REPLAYABLE, 1, ""),
        ("c2", "meta", ReplayVerdict.STARTS_OVER, 1, ""),
    ]
    assert "designs it again" in report.children[1].reason


def test_the_limits_are_the_replays_own_max_steps_of_its_role_and_the_resume_budget(tmp_path: Path) -> None:
    home, project = tmp_path / "home", _project(tmp_path)
    _stopped_director(home, [("c1", "delegate_repo")])
    _child(home, "c1")
    tight_role = RunSettings(max_steps={"repo": 2, "director": 100})
    assert _verdicts(inspect_stopped_turn(_spec(home, project, settings=tight_role)))[0][2] == \
        ReplayVerdict.MAX_STEPS_REACHED
    other_role = RunSettings(max_steps={"coding": 2, "director": 100})  # not the repo's: no effect
    assert _verdicts(inspect_stopped_turn(_spec(home, project, settings=other_role)))[0][2] == ReplayVerdict.REPLAYABLE
    small_budget = RunSettings(replay_max_messages=2)
    assert _verdicts(inspect_stopped_turn(_spec(home, project, settings=small_budget)))[0][2] == \
        ReplayVerdict.OVER_BUDGET


def test_a_replayable_childs_own_interrupted_delegation_is_judged_one_level_down(tmp_path: Path) -> None:
    home, project = tmp_path / "home", _project(tmp_path)
    _stopped_director(home, [("c1", "delegate_repo")])
    ask = ToolCall("d1", "delegate_devops", '{"task": "x"}')
    repo_history = [Message.system("you are repo"), Message.user("do it"),
                    Message.assistant("asking devops", tool_calls=(ask,)),
                    Message.tool("d1", f"{INTERRUPTED_RESULT} (the run stopped)", name="delegate_devops")]
    _child(home, "c1", run="runrepo", messages=repo_history)
    _child(home, "d1", agent="devops", parent_run="runrepo", run="rundevops")
    _child(home, "d1", agent="devops", parent_run="someoneelse", run="runother", stop=StopReason.IDLE_TIMEOUT)

    report = inspect_stopped_turn(_spec(home, project))
    assert _verdicts(report) == [("c1", "repo", ReplayVerdict.REPLAYABLE, 1, ""),
                                 ("d1", "devops", ReplayVerdict.REPLAYABLE, 2, "c1")]


def test_a_damaged_root_rollout_is_a_problem_and_the_memory_still_answers(tmp_path: Path) -> None:
    home, project = tmp_path / "home", _project(tmp_path)
    _stopped_director(home, [("c1", "delegate_repo")])
    root = rollout_dir(home, "t1") / f"20260101-000000_{ROOT}.jsonl"
    root.parent.mkdir(parents=True)
    root.write_bytes(b'{"type": "session_meta", "payload": {}}\n\xff\xfe garbage\n{"type": "x", "payload": {}}\n')
    report = inspect_stopped_turn(_spec(home, project))
    assert "cannot be read" in report.problem
    assert _verdicts(report) == [("c1", "repo", ReplayVerdict.NO_CHILD_ROLLOUT, 1, "")]


def test_a_turn_of_another_root_agent_says_it_starts_over(tmp_path: Path) -> None:
    home, project = tmp_path / "home", _project(tmp_path)
    report = inspect_stopped_turn(_spec(home, project, agent="repo"))
    assert report.children == [] and "runs it again" in report.problem


def test_a_forged_history_cannot_make_the_report_unbounded(tmp_path: Path) -> None:
    home, project = tmp_path / "home", _project(tmp_path)
    _stopped_director(home, [(f"c{i}", "delegate_repo") for i in range(5000)])
    report = inspect_stopped_turn(_spec(home, project))
    assert len(report.children) == resume_inspection.MAX_REPORTED


# -- confinement: run in a child process, since it cannot be undone -------------------------------------------

def _confinement(home: Path, project: Path, runtime: Path, *, unconfined: Unconfined | None = None
                 ) -> ConfinementSpec:
    return ConfinementSpec(abi=landlock_abi(), agent="inspect", project_root=str(project), home=str(home),
                           runtime_dir=str(runtime), task_dir=str(task_dir(home, "t1")), scratch_dir="",
                           unconfined=unconfined)


def _in_child(confinement: ConfinementSpec, spec: ResumeInspectionSpec) -> ResumeInspectionReport:
    ctx = multiprocessing.get_context("fork")
    reader, writer = ctx.Pipe(duplex=False)

    def run() -> None:
        report = resume_inspection._confined_inspection(confinement, spec)
        writer.send_bytes(json.dumps(report.to_wire()).encode())
        os._exit(0)

    process = ctx.Process(target=run)
    process.start()
    writer.close()
    try:
        assert reader.poll(60), "the inspection never answered"
        return ResumeInspectionReport.from_wire(json.loads(reader.recv_bytes()))
    finally:
        process.join(30)
        reader.close()


def _attempts(home: Path, project: Path, runtime: Path, outside: Path) -> dict[str, str]:
    """What the probe tries after confinement: each write it must not make, and the reads it needs."""
    return {"write task memory": str(memory_path(home, "t1")), "create in the task": str(task_dir(home, "t1") / "x"),
            "write the project": str(project / "README.md"), "create in /tmp": str(outside / "new"),
            "read the config": str(home / "config" / "config.toml"), "read the runtime dir": str(runtime / "token")}


def _probe(attempts: dict[str, str], home: Path, project: Path):
    def probe(spec: ResumeInspectionSpec) -> ResumeInspectionReport:
        results = {}
        for what, path in attempts.items():
            try:
                if what.startswith("read"):
                    Path(path).read_bytes()
                else:
                    with open(path, "a") as fh:
                        fh.write("x")
                results[what] = "done"
            except OSError as exc:
                results[what] = exc.strerror or "refused"
        results["read the memory"] = "done" if memory_path(home, "t1").read_bytes() else "empty"
        results["read the project"] = "done" if (project / ".git" / "HEAD").read_text() else "empty"
        return ResumeInspectionReport(problem=json.dumps(results))

    return probe


def _setup(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    home, project, runtime, outside = tmp_path / "home", _project(tmp_path), tmp_path / "run", tmp_path / "outside"
    for d in (home / "config", runtime, outside):
        d.mkdir(parents=True)
    (home / "config" / "config.toml").write_text("secret")
    (runtime / "token").write_text("secret")
    (project / "README.md").write_text("a project\n")
    _stopped_director(home, [("c1", "delegate_repo")])
    return home, project, runtime, outside


@needs_landlock
def test_the_inspection_reads_the_task_and_the_project_and_can_write_nothing(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    home, project, runtime, outside = _setup(tmp_path)
    attempts = _attempts(home, project, runtime, outside)
    monkeypatch.setattr(resume_inspection, "inspect_stopped_turn", _probe(attempts, home, project))
    report = _in_child(_confinement(home, project, runtime), _spec(home, project))
    results = json.loads(report.problem)
    assert results.pop("read the memory") == "done" and results.pop("read the project") == "done"
    assert all(outcome == os.strerror(13) for outcome in results.values()), results  # EACCES, each of them
    assert report.unconfined is None


def test_unconfined_the_same_probe_does_everything_and_the_report_says_unconfined(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The escapes above are real ones: without Landlock (`landlock_missing`) each succeeds, and it is said."""
    home, project, runtime, outside = _setup(tmp_path)
    attempts = _attempts(home, project, runtime, outside)
    monkeypatch.setattr(resume_inspection, "inspect_stopped_turn", _probe(attempts, home, project))
    report = _in_child(_confinement(home, project, runtime, unconfined=Unconfined.LANDLOCK_MISSING),
                       _spec(home, project))
    assert set(json.loads(report.problem).values()) == {"done"}
    assert report.unconfined == Unconfined.LANDLOCK_MISSING


@pytest.mark.parametrize("swapped", ["tasks", "task"])
def test_a_task_directory_swapped_for_a_link_is_never_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           swapped: str) -> None:
    home, project, runtime, _outside = _setup(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    moved = home / "tasks" if swapped == "tasks" else task_dir(home, "t1")
    moved.rename(elsewhere)
    moved.symlink_to(elsewhere, target_is_directory=True)
    monkeypatch.setattr(resume_inspection, "inspect_stopped_turn", lambda spec: pytest.fail("it read the link"))
    report = _in_child(_confinement(home, project, runtime), _spec(home, project))
    assert "nothing was read" in report.problem and report.children == []
