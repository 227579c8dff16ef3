"""`yagent skills` and the TUI's `/skills` show the account the agents start with: the same function, the same
configuration — the skills, what overrides what, and every problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.client.doubles import FakeBackend
from tests.client.tui_harness import running_tui, until
from tests.daemon_harness import arun
from yagent.client.cli import main
from yagent.ipc.vocabulary import EventType


@pytest.fixture
def homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    user, state, project = tmp_path / "user", tmp_path / "user" / ".yagent", tmp_path / "project"
    (state / "config").mkdir(parents=True)
    project.mkdir()
    monkeypatch.setenv("HOME", str(user))
    monkeypatch.setenv("YAGENT_HOME", str(state))
    skill = state / "skills" / "deploy" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\ndescription: Deploy the service\n---\nSteps.\n")
    local = project / ".yagent" / "skills"
    local.mkdir(parents=True)
    (local / "deploy.md").write_text("# Deploy this project instead\n")
    (local / "bad.md").write_text("---\ndescription: [\n---\n# Bad one\n")
    return state, project


def test_yagent_skills_prints_the_account_and_json_for_scripts(homes: tuple[Path, Path],
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    _state, project = homes
    assert main(["skills", "--project", str(project)]) == 0
    text = capsys.readouterr().out
    assert "2 skills for the Director" in text and "Deploy this project instead  [project:" in text
    assert "deploy: " in text and "gives way to" in text  # the user's deploy is overridden by the project's
    assert "bad.md: the front matter is not valid YAML" in text
    assert main(["skills", "--json", "--project", str(project)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in data["skills"]] == ["bad", "deploy"]
    assert data["overrides"][0]["kept"]["scope"] == "project" and "chat" not in data["holders"]


def test_yagent_skills_refuses_a_broken_skills_table_in_three_lines(homes: tuple[Path, Path],
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    state, project = homes
    (state / "config" / "config.toml").write_text('[skills]\ndirs = ["relative"]\n')
    assert main(["skills", "--project", str(project)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "[skills] dirs" in err[0] and "config.toml" in err[1]


def test_the_tui_skills_command_shows_the_same_account(homes: tuple[Path, Path]) -> None:
    state, project = homes
    backend = FakeBackend(project=str(project))
    backend.add_task("t1", state="done", title="first task")
    backend.emit("t1", EventType.TURN_STARTED, {"turn": 1, "text": "hello", "agent": "director"}, run="r1")

    async def go() -> None:
        async with running_tui(backend, config_path=state / "config" / "config.toml") as (tui, pipe):
            pipe.send_text("/skills\r")
            await until(lambda: any("skills for the Director" in e.text for e in tui.c.view.entries), "/skills")
            (shown,) = [e.text for e in tui.c.view.entries if "skills for the Director" in e.text]
            assert "Deploy this project instead" in shown and "gives way to" in shown
            assert "front matter is not valid YAML" in shown

    arun(go(), 30)
