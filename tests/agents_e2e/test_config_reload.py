"""A running daemon picks up config.toml changes (e.g. from `yagent setup`) at the next submitted turn."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent_harness import MARKERS, llm_config, run_turn
from tests.daemon_harness import arun, submit
from tests.fake_provider import Step
from yagent.ipc.errors import RemoteError
from yagent.ipc.vocabulary import ErrorCode, EventType


def test_a_changed_provider_is_used_from_the_next_turn_without_a_restart(fake, make_daemon, project: Path) -> None:
    daemon = make_daemon(llm_config(fake))
    fake.script("director", MARKERS["director"], [Step(text=f"answer {i}") for i in range(8)])
    task, _ = run_turn(daemon, project, "One.")
    assert {r.body["model"] for r in fake.requests_for("director")} == {fake.provider_table()["model"]}

    config = daemon.home / "config" / "config.toml"
    config.write_text(config.read_text().replace(f'"{fake.provider_table()["model"]}"', '"model-after-setup"'))
    run_turn(daemon, project, "Two.", task=task, turn=2)
    assert [r.body["model"] for r in fake.requests_for("director")[4:]] == ["model-after-setup"] * 4
    fake.assert_no_problems()


def test_a_config_broken_while_running_refuses_the_turn_and_the_daemon_keeps_serving(
    fake, make_daemon, project: Path
) -> None:
    daemon = make_daemon(llm_config(fake))
    config = daemon.home / "config" / "config.toml"
    good = config.read_text()
    config.write_text(good + "\n[agent\n")

    async def refused() -> RemoteError:
        async with daemon.client() as c:
            with pytest.raises(RemoteError) as caught:
                await submit(c, project, "One.", agent="director")
            return caught.value

    error = arun(refused(), 30)
    assert error.code == ErrorCode.BAD_CONFIG
    assert "configuration error: TOML syntax error" in str(error)
    assert f"file: {config}" in str(error) and "run `yagent setup` to fix it" in str(error)

    config.write_text(good)
    fake.script("director", MARKERS["director"], [Step(text=f"answer {i}") for i in range(4)])
    _, events = run_turn(daemon, project, "One.")
    assert [e for e in events if e.type == EventType.TURN_FINISHED][0].data["output"] == "answer 3"


def test_a_key_variable_missing_in_the_daemon_says_to_restart_it(fake, make_daemon, project: Path) -> None:
    # The typical slip: the config now names a key variable, exported in the shell after yagentd started.
    daemon = make_daemon(llm_config(fake))
    config = daemon.home / "config" / "config.toml"
    config.write_text(config.read_text().replace('api_key = "fake-key"',
                                                 'api_key_env = "YAGENT_TEST_KEY_SET_TOO_LATE"'))
    result = daemon.cli("-p", "Hello.", cwd=project)
    # The turn fails (exit 1) saying what to do; the file itself is fine, so nothing refuses to load it.
    assert result.returncode == 1, result.stderr
    said = result.stdout + result.stderr
    assert "YAGENT_TEST_KEY_SET_TOO_LATE is not set where yagentd runs" in said, said
    assert "restart yagentd (`yagent daemon stop`, then `yagent daemon start`" in said
    assert "systemctl --user restart yagentd" in said
    assert fake.requests == []
