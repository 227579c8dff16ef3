"""A running daemon picks up config.toml changes (e.g. from `yagent setup`) at the next submitted turn."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.agent_harness import MARKERS, llm_config, run_turn
from tests.client.conftest import PROVIDER_CONFIG
from tests.daemon_harness import DaemonProcess, arun, collect_turn, of_type, script, submit
from tests.fake_provider import Step
from tests.ipc.hostile_config_files import HOSTILE_CASES, make_hostile
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


def test_a_key_variable_set_nowhere_fails_the_turn_naming_it_and_where_it_was_looked_for(
        fake, make_daemon, project: Path) -> None:
    # The config names a key variable that neither this shell nor yagentd has: the turn fails saying which and
    # where it looked; nothing refuses the file, and no restart is asked for (the next turn sends it).
    daemon = make_daemon(llm_config(fake))
    config = daemon.home / "config" / "config.toml"
    config.write_text(config.read_text().replace('api_key = "fake-key"', 'api_key_env = "YAGENT_TEST_KEY_SET_NOWHERE"'))
    result = daemon.cli("-p", "Hello.", cwd=project)
    assert result.returncode == 1, result.stderr
    said = result.stdout + result.stderr
    assert ("YAGENT_TEST_KEY_SET_NOWHERE is set neither in the environment of the `yagent` command that sent this "
            "turn nor in yagentd's own") in said, said
    assert "restart" not in said.replace("no restart needed", "")
    assert fake.requests == []


def _yagentd(daemon: DaemonProcess, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "yagent.daemon.main"], env=daemon.env, text=True,
                          capture_output=True, timeout=timeout, cwd=str(daemon.root))


@pytest.mark.parametrize("case", sorted(HOSTILE_CASES))
def test_yagentd_refuses_to_start_on_a_hostile_config_with_three_lines(tmp_path: Path, case: str) -> None:
    daemon = DaemonProcess(tmp_path / "d", PROVIDER_CONFIG)
    try:
        config = daemon.home / "config" / "config.toml"
        phrase = make_hostile(case, config)
        result = _yagentd(daemon)  # a pipe read the blocking way never returns: the timeout fails the test
    finally:
        daemon.close()
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 3 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith("configuration error: ") and phrase in lines[0]
    assert lines[1] == f"file: {config}"


def test_a_hostile_config_at_submit_time_is_refused_and_the_daemon_keeps_serving(make_daemon, project: Path) -> None:
    daemon = make_daemon(PROVIDER_CONFIG)
    config = daemon.home / "config" / "config.toml"
    good = config.read_text()

    async def submit_error() -> RemoteError:
        async with daemon.client() as c:
            with pytest.raises(RemoteError) as caught:
                await submit(c, project, script({"emit": 1}))
            return caught.value

    for case in sorted(HOSTILE_CASES):
        phrase = make_hostile(case, config)
        error = arun(submit_error(), 30)
        assert error.code == ErrorCode.BAD_CONFIG, (case, error)
        lines = str(error).splitlines()
        assert len(lines) == 3 and phrase in lines[0] and lines[1] == f"file: {config}", (case, lines)
    config.unlink()
    config.write_text(good)

    async def one_turn() -> str:
        async with daemon.client() as c:
            sub = await submit(c, project, script({"emit": 1}, output="still serving"))
            events = await collect_turn(c, sub.task)
            return of_type(events, EventType.TURN_FINISHED)[0].data["output"]

    assert arun(one_turn(), 60) == "still serving"
