"""The workflow engine in-process over real fact files, its channel to the daemon a scripted double: what it does
with each kind of decision — a step, a hold, a question, a planner — and when it stops instead of going round."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from yagent.ipc.messages import RunOutcome, RunSpec
from yagent.ipc.vocabulary import EventType, RunStatus, StopReason
from yagent.ipc.workflows import WORKFLOW_AGENT, WORKFLOW_OPTION, workflow_dir
from yagent.workers.kinds import RunContext, resolve_kind
from yagent.workers.workflows.fiction_facts import prepare


class ScriptedChannel:
    """What the engine asks of its channel: steps (each a function that writes what the node would), answers."""

    def __init__(self, steps: dict[str, Callable[[str], None]], answer: str = "") -> None:
        self.steps = steps
        self.answer = answer
        self.delegations: list[tuple[str, str, str]] = []
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.questions: list[str] = []

    async def run_child(self, agent: str, task: str, call_id: str, context: str, *, replay: bool = False,
                        subagent: str = "", reuse_key: str = "") -> RunOutcome:
        self.delegations.append((agent, task, reuse_key))
        self.steps[reuse_key](task)
        return RunOutcome(status=RunStatus.DONE, stop_reason=StopReason.AGENT_EXIT, output="ok", agent=agent)

    def emit(self, type_: str, data: dict[str, Any]) -> None:
        self.events.append((type_, data))

    async def pause_gate(self) -> None:
        return None

    async def ask_user(self, kind: str, prompt: str, **_: Any) -> dict[str, Any]:
        self.questions.append(prompt)
        return {"value": self.answer}


def _facts(project: Path, *, completed: str = "", flow: str = "writing", chapters: int = 2) -> Path:
    directory = workflow_dir(project, "fiction")
    prepare(directory)
    (directory / "progress.toml").write_text(f'phase = "writing"\nflow = "{flow}"\ncompleted = [{completed}]\n')
    (directory / "planning.toml").write_text('tier = "short"\n')
    for name in ("premise.md", "characters.md", "world.md"):
        (directory / "foundation" / name).write_text("x\n")
    (directory / "foundation" / "outline.md").write_text("".join(f"{n}. C{n}\n" for n in range(1, chapters + 1)))
    return directory


def _run(project: Path, channel: ScriptedChannel) -> RunOutcome:
    spec = RunSpec(run="rwf", task="twf", turn=1, project="p", project_root=str(project), agent=WORKFLOW_AGENT,
                   input="workflow fiction", home=str(project / "home"), options={WORKFLOW_OPTION: "fiction"})
    kind = resolve_kind(WORKFLOW_AGENT)
    assert kind is not None
    return asyncio.run(kind(RunContext(spec, channel)))  # type: ignore[arg-type]


def _writer(project: Path) -> Callable[[str], None]:
    def write(task: str) -> None:
        chapter = int(task.removeprefix("Write chapter ").rstrip("."))
        (project / "chapters").mkdir(exist_ok=True)
        (project / "chapters" / f"{chapter:04d}.md").write_text(f"# {chapter}\n")
    return write


def _complete(project: Path) -> Callable[[str], None]:
    return lambda _task: (workflow_dir(project, "fiction") / "complete.md").write_text("done\n")


def test_a_hold_stops_the_engine_before_the_chapter_after_it_and_goes_with_it(project: Path) -> None:
    directory = _facts(project, chapters=3)
    (directory / "holds.toml").write_text("[[hold]]\nafter_chapter = 1\n\n[[hold]]\nafter_chapter = 3\n")
    channel = ScriptedChannel({"writer": _writer(project)})
    outcome = _run(project, channel)
    assert outcome.status == RunStatus.DONE and "stopped after chapter 1, as holds.toml asked" in outcome.output
    assert [d[1] for d in channel.delegations] == ["Write chapter 1."]
    assert "after_chapter = 1" not in (directory / "holds.toml").read_text()  # one-shot: gone
    assert "after_chapter = 3" in (directory / "holds.toml").read_text()  # not reached: kept
    assert channel.events[-1][1]["situation"] == "hold"


def test_steering_asks_the_user_records_the_answer_and_writing_goes_on(project: Path) -> None:
    directory = _facts(project, completed="1, 2", flow="steering")
    channel = ScriptedChannel({"architect_short": _complete(project)}, answer="Give Mara a brother.")
    outcome = _run(project, channel)
    assert outcome.status == RunStatus.DONE and "complete" in outcome.output
    assert len(channel.questions) == 1 and "steering" in channel.questions[0]
    assert "Give Mara a brother." in (directory / "steering.md").read_text()
    assert 'flow = "writing"' in (directory / "progress.toml").read_text()
    situations = [d["situation"] or d["agent"] for t, d in channel.events if t == EventType.WORKFLOW_DECISION]
    assert situations == ["steering", "architect_short", "complete"]
    # No answer: the engine stops saying it waits, and the facts stay as they were.
    (_facts(project, completed="1, 2", flow="steering") / "complete.md").unlink()
    quiet = ScriptedChannel({}, answer="")
    assert "waits for you (steering)" in _run(project, quiet).output and quiet.delegations == []


def test_the_planner_decides_the_tier_and_the_same_architect_completes_the_foundation(project: Path) -> None:
    directory = workflow_dir(project, "fiction")
    prepare(directory)

    def plan(_task: str) -> None:
        (directory / "planning.toml").write_text('tier = "short"\n')

    def found(task: str) -> None:
        if "Complete the book's foundation" in task:
            for name in ("premise.md", "characters.md", "world.md"):
                (directory / "foundation" / name).write_text("x\n")
            (directory / "foundation" / "outline.md").write_text("1. Only\n")
        else:
            (directory / "complete.md").write_text("done\n")

    channel = ScriptedChannel({"planner": plan, "architect_short": found, "writer": _writer(project)})
    assert _run(project, channel).status == RunStatus.DONE
    assert [(agent.rsplit(":", 1)[1], key) for agent, _task, key in channel.delegations] == [
        ("planner", "planner"), ("architect_short", "architect_short"), ("writer", "writer"),
        ("architect_short", "architect_short")]


def test_a_step_that_made_nothing_stops_the_engine_instead_of_running_it_again(project: Path) -> None:
    _facts(project, completed="1, 2")  # the outline is used up: the architect must extend it or complete the book
    lazy = ScriptedChannel({"architect_short": lambda _task: None})
    outcome = _run(project, lazy)
    assert outcome.status == RunStatus.FAILED and "left the facts as they were" in outcome.error
    assert len(lazy.delegations) == 1
    # A writer that wrote no chapter: the step's output is checked, and said missing.
    _facts(project / "b", completed="")
    silent = ScriptedChannel({"writer": lambda _task: None})
    failed = _run(project / "b", silent)
    assert failed.status == RunStatus.FAILED and "did not write chapter 1" in failed.error
    assert silent.events[-1][1]["error"]
