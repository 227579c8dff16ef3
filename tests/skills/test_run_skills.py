"""How a run takes its skills (`AgentRun`): the agents whose surface holds use_skill get the catalogue in their
system prompt; a root run shows the account's problems once, a delegated run never again; a defect in reading
skills costs the run its skills, never the run."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from yagent.ipc.config import settings_from_table
from yagent.ipc.messages import RunSpec
from yagent.ipc.vocabulary import EventType
from yagent.workers.agents import runtime
from yagent.workers.agents.runtime import AgentRun
from yagent.workers.kinds import RunContext

CONFIG = {"global": {"llm": {"use_provider": "x", "providers": {"x": {
    "api_base_url": "http://127.0.0.1:9/v1", "api_key": "k", "model": "gpt-4o"}}}}}


class _Channel:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    @contextlib.asynccontextmanager
    async def hold(self):
        yield

    def emit(self, type_: str, data: dict) -> None:
        self.events.append((type_, data))

    def heartbeat(self) -> None:
        pass


@pytest.fixture(autouse=True)
def _closed() -> Iterator[None]:
    yield
    for run in _OPENED:
        asyncio.run(run.close())  # its rollout writer's thread goes with it
    _OPENED.clear()


_OPENED: list[AgentRun] = []


def _run(tmp_path: Path, agent: str, *, parent: str | None = None) -> tuple[AgentRun, _Channel]:
    channel = _Channel()
    spec = RunSpec(run="r", task="t", turn=1, project="p", project_root=str(tmp_path / "project"), agent=agent,
                   input="x", home=str(tmp_path / "state"), settings=settings_from_table(CONFIG).run_settings,
                   parent_run=parent)
    run = AgentRun(RunContext(spec, channel), agent)  # type: ignore[arg-type]
    _OPENED.append(run)
    return run, channel


@pytest.fixture
def skills(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    root = tmp_path / "project" / ".yagent" / "skills"
    root.mkdir(parents=True)
    (root / "deploy.md").write_text("---\ndescription: Deploy the service\n---\nSteps.\n")
    (root / "broken.md").write_text("---\ndescription: [\n---\n# Broken one\n")
    return root


def _warnings(channel: _Channel) -> list[str]:
    return [d["message"] for t, d in channel.events if t == EventType.LOG and d["level"] == "warning"]


def test_the_catalogue_follows_the_agents_own_prompt_and_problems_are_shown_once_per_turn(tmp_path: Path,
                                                                                          skills: Path) -> None:
    director, channel = _run(tmp_path, "director")
    prompt = director.with_skills("You are the Director.")
    assert prompt.startswith("You are the Director.\n\n# Skills\n")
    assert "- deploy: Deploy the service" in prompt and "- broken: Broken one" in prompt
    (warning,) = _warnings(channel)
    assert "1 skill problem" in warning and "broken.md" in warning and "yagent skills" in warning
    child, child_channel = _run(tmp_path, "coding", parent="r0")
    assert "# Skills" in child.with_skills("You are Coding.") and _warnings(child_channel) == []
    chat, _ = _run(tmp_path, "chat")
    assert chat.skills is None and chat.with_skills("You are Chat.") == "You are Chat."


def test_a_defect_in_reading_skills_costs_the_run_its_skills_not_the_run(tmp_path: Path, skills: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(**_kwargs: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(runtime, "load_skill_account", broken)
    run, channel = _run(tmp_path, "director")
    assert run.skills is not None and run.skills.account.skills == ()
    assert run.with_skills("p") == "p"
    assert any("skills are left out of this run" in w and "a bug" in w for w in _warnings(channel))
