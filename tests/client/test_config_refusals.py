"""What the client does with a configuration it cannot use, a missing daemon and an unsafe runtime
directory: three lines and exit 2 for what the user must fix, a started daemon for commands that need one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.client.conftest import PROVIDER_CONFIG
from tests.daemon_harness import DaemonProcess, script
from tests.ipc.hostile_config_files import FILE_KIND_CASES, HOSTILE_CASES, make_hostile

pytestmark = pytest.mark.e2e


@pytest.fixture
def stopped(tmp_path: Path) -> Iterator[DaemonProcess]:
    """A home and runtime directory with no daemon running (one a command starts is stopped at the end)."""
    d = DaemonProcess(tmp_path / "d", PROVIDER_CONFIG)
    try:
        yield d
    finally:
        d.cli("daemon", "stop", timeout=60)
        d.close()


def three_lines(result, config: Path, phrase: str) -> list[str]:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 3, lines
    assert lines[0].startswith("configuration error: ") and phrase in lines[0], lines
    assert lines[1] == f"file: {config}"
    return lines


@pytest.mark.parametrize("case", sorted(HOSTILE_CASES))
def test_every_command_that_reads_the_config_refuses_a_hostile_one_with_three_lines(
        stopped: DaemonProcess, project: Path, case: str) -> None:
    config = stopped.home / "config" / "config.toml"
    phrase = make_hostile(case, config)
    seen = set()
    for command in (["-p", "hello"], ["run", "hello"], [], ["attach", "t123"], ["ps"], ["logs", "t123"]):
        # A pipe read the blocking way never returns: the timeout turns that into a failure.
        result = stopped.cli(*command, cwd=project, timeout=30)
        seen.add(tuple(three_lines(result, config, phrase)))
        assert result.stdout == ""
    assert len(seen) == 1  # one error, said the same way by every command


@pytest.mark.parametrize("case", sorted(FILE_KIND_CASES))
def test_setup_refuses_a_file_it_cannot_read_rather_than_hang_or_overwrite_it(
        stopped: DaemonProcess, project: Path, case: str) -> None:
    config = stopped.home / "config" / "config.toml"
    phrase = make_hostile(case, config)
    kind = config.lstat().st_mode
    lines = three_lines(stopped.cli("setup", cwd=project, timeout=30), config, phrase)
    assert lines[2] != "run `yagent setup` to fix it"  # the wizard is not the fix for what it cannot open
    assert config.lstat().st_mode == kind  # left as it was


def test_ps_and_logs_start_the_daemon_like_run_does(stopped: DaemonProcess, project: Path) -> None:
    listed = stopped.cli("ps", cwd=project)
    assert listed.returncode == 0, listed.stderr
    assert "yagent: yagentd was not running; yagentd started (pid" in listed.stderr
    assert "no tasks yet" in listed.stdout
    ran = stopped.cli("--json", "run", "--agent", "scripted", script({"emit": 1}, output="fin"), cwd=project)
    assert ran.returncode == 0, ran.stderr
    task = json.loads(ran.stdout.splitlines()[-1])["task"]
    assert stopped.cli("daemon", "stop").returncode == 0
    logs = stopped.cli("--json", "logs", task, cwd=project)
    assert logs.returncode == 0, logs.stderr
    assert "yagentd was not running; yagentd started" in logs.stderr
    assert json.loads(logs.stdout.splitlines()[-1])["output"] == "fin"  # the task's log, from the new daemon


def test_ps_with_a_broken_config_and_no_daemon_says_what_is_wrong_with_the_config(
        stopped: DaemonProcess, project: Path) -> None:
    config = stopped.home / "config" / "config.toml"
    config.write_text("[llm]\ntimeout = \"soon\"\n")
    result = stopped.cli("ps", cwd=project)
    three_lines(result, config, "[llm] timeout = 'soon' is not a duration")
    assert "starting it failed" not in result.stderr


@pytest.mark.parametrize("command", [["ps"], ["logs", "t123"], ["-p", "hello"], ["daemon", "status"],
                                     ["daemon", "start"], ["pause", "t123"]])
def test_an_unsafe_runtime_directory_is_a_configuration_problem(
        stopped: DaemonProcess, project: Path, command: list[str]) -> None:
    stopped.runtime.mkdir(mode=0o700)
    stopped.runtime.chmod(0o755)
    result = stopped.cli(*command, cwd=project)
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert f"runtime directory {stopped.runtime} is accessible by group or others (mode 755)" in result.stderr
    assert f"`chmod 700 {stopped.runtime}`" in result.stderr
    assert "not running" not in result.stderr and "Traceback" not in result.stderr
