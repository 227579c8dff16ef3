"""The configuration belongs to the daemon: `--config` / YAGENT_CONFIG name a file used as given, yagentd says which
file it reads, a client naming another is refused, the warnings about the file reach `yagent daemon status`, and a
named file swapped or removed under a running daemon is refused at the next turn while the daemon keeps serving."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.client.conftest import PROVIDER_CONFIG
from tests.daemon_harness import DaemonProcess, script

pytestmark = pytest.mark.e2e


@pytest.fixture
def stopped(tmp_path: Path) -> Iterator[DaemonProcess]:
    """A home and runtime directory with no daemon running; one a command starts is stopped at the end."""
    d = DaemonProcess(tmp_path / "d", PROVIDER_CONFIG)
    try:
        yield d
    finally:
        d.cli("daemon", "stop", timeout=60)
        d.close()


def test_daemon_start_with_config_reads_that_file_and_a_client_naming_another_is_refused(
        stopped: DaemonProcess, project: Path, tmp_path: Path) -> None:
    named = tmp_path / "elsewhere.toml"
    default = stopped.home / "config" / "config.toml"
    named.write_text(default.read_text() + "\n[agent]\nlang = 'German'\ncoding_max_step = 3\n[keywords]\n"
                                           "enabled = true\n")
    started = stopped.cli("daemon", "start", "--config", str(named))
    assert started.returncode == 0, started.stderr

    status = stopped.cli("--json", "daemon", "status")
    reported = json.loads(status.stdout)
    assert reported["config"] == str(named)
    assert reported["config_warnings"] == [
        "[agent] coding_max_step is not a setting yagent knows, so it does nothing; did you mean coding_max_steps?",
        "[keywords] is not supported yet: keyword routing is not built yet, so nothing in it has an effect; "
        "remove it, or keep it for when it is"]
    human = stopped.cli("daemon", "status").stdout
    assert f"config       {named}" in human and "! [agent] coding_max_step is not a setting" in human
    log = (stopped.home / "logs" / "yagentd.log").read_text()
    assert f"{named}: [agent] coding_max_step is not a setting yagent knows" in log

    # The same file named again (through a link, even) is fine; another one is refused with both names, exit 2.
    link = tmp_path / "link.toml"
    link.symlink_to(named)
    assert stopped.cli("--config", str(link), "ps").returncode == 0
    env = stopped.env | {"YAGENT_CONFIG": str(default)}
    refused = subprocess.run([sys.executable, "-m", "yagent.client.cli", "-p", "hi"], env=env, text=True,
                             capture_output=True, timeout=60, cwd=str(project))
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith(f"yagent: yagentd (pid {reported['pid']}) reads the configuration {named}, but "
                                     f"YAGENT_CONFIG names {default}: the configuration belongs to the daemon")
    assert "yagent daemon start --config" in refused.stderr
    # The turn sent without naming a file runs on the daemon's (where the scripted agent needs no provider).
    ran = stopped.cli("--json", "run", "--agent", "scripted", script({"emit": 1}, output="fine"), cwd=project)
    assert ran.returncode == 0 and json.loads(ran.stdout.splitlines()[-1])["output"] == "fine", ran.stderr


def test_a_named_file_swapped_or_removed_under_the_daemon_refuses_the_next_turn_and_the_daemon_serves_on(
        stopped: DaemonProcess, project: Path, tmp_path: Path) -> None:
    named = tmp_path / "named.toml"
    named.write_text((stopped.home / "config" / "config.toml").read_text())
    assert stopped.cli("daemon", "start", "--config", str(named)).returncode == 0
    good = named.read_text()

    named.unlink()
    os.mkfifo(named)  # a reader that opened it the blocking way would hang here
    refused = stopped.cli("run", "--agent", "scripted", script({"emit": 1}), cwd=project, timeout=30)
    assert refused.returncode == 2 and "the file is a named pipe (FIFO)" in refused.stderr, refused.stderr

    named.unlink()
    refused = stopped.cli("run", "--agent", "scripted", script({"emit": 1}), cwd=project, timeout=30)
    assert refused.returncode == 2, refused.stderr
    assert "the file does not exist" in refused.stderr and "never creates" in refused.stderr
    assert not named.exists()  # a named file is never written by yagent

    named.write_text(good)
    ran = stopped.cli("--json", "run", "--agent", "scripted", script({"emit": 1}, output="back"), cwd=project)
    assert ran.returncode == 0 and json.loads(ran.stdout.splitlines()[-1])["output"] == "back", ran.stderr


@pytest.mark.parametrize("kind", ["missing", "directory", "fifo", "dangling link"])
def test_yagent_config_naming_something_unusable_stops_the_command_with_three_lines_and_starts_nothing(
        stopped: DaemonProcess, project: Path, tmp_path: Path, kind: str) -> None:
    named = tmp_path / "named.toml"
    if kind == "directory":
        named.mkdir()
    elif kind == "fifo":
        os.mkfifo(named)
    elif kind == "dangling link":
        named.symlink_to(tmp_path / "gone.toml")
    result = subprocess.run([sys.executable, "-m", "yagent.client.cli", "-p", "hi"],
                            env=stopped.env | {"YAGENT_CONFIG": str(named)}, text=True, capture_output=True,
                            timeout=30, cwd=str(project))
    lines = result.stderr.splitlines()
    assert result.returncode == 2 and len(lines) == 3, result.stderr
    assert lines[0] == "configuration error: " + {
        "missing": "the file does not exist", "directory": "the file is a directory, not a regular file",
        "fifo": "the file is a named pipe (FIFO), not a regular file",
        "dangling link": f"{named} is a symbolic link to {tmp_path / 'gone.toml'}, which does not exist"}[kind]
    assert lines[1] == f"file: {named}"
    assert not stopped.runtime.exists() or not (stopped.runtime / "control.sock").exists()
    assert kind != "missing" or not named.exists()


def test_the_default_file_is_written_from_the_template_on_first_use(tmp_path: Path, project: Path) -> None:
    d = DaemonProcess(tmp_path / "d", "")
    try:
        config = d.home / "config" / "config.toml"
        config.unlink()
        (d.home / "config").rmdir()
        listed = d.cli("ps", cwd=project)  # the first command that needs the daemon starts it
        assert listed.returncode == 0, listed.stderr
        assert config.read_text().startswith("# yagent configuration. Every setting below is commented out")
        assert stat.S_IMODE(config.stat().st_mode) == 0o600
        assert json.loads(d.cli("--json", "daemon", "status").stdout)["config_warnings"] == []
    finally:
        d.cli("daemon", "stop", timeout=60)
        d.close()
