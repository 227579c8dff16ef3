"""sd_notify against a real datagram socket, and the unit file against systemd-analyze."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from yagent.client.unit_file import render_unit
from yagent.daemon.sd_notify import SystemdNotifier


def _listener(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(5)
    return sock


def test_notify_sends_ready_status_and_watchdog(tmp_path: Path) -> None:
    path = str(tmp_path / "notify.sock")
    sock = _listener(path)
    try:
        notifier = SystemdNotifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "30000000"})
        assert notifier.enabled
        assert notifier.watchdog_interval == 15.0
        assert notifier.ready("0 tasks running")
        assert sock.recv(100) == b"READY=1\nSTATUS=0 tasks running"
        assert notifier.watchdog()
        assert sock.recv(100) == b"WATCHDOG=1"
        assert notifier.status("busy")
        assert sock.recv(100) == b"STATUS=busy"
    finally:
        sock.close()


def test_notify_supports_abstract_socket_names() -> None:
    name = f"yagent-test-{os.getpid()}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    sock.settimeout(5)
    try:
        assert SystemdNotifier({"NOTIFY_SOCKET": "@" + name}).ready()
        assert sock.recv(100) == b"READY=1"
    finally:
        sock.close()


def test_without_notify_socket_nothing_is_sent_and_watchdog_is_scoped_to_its_pid() -> None:
    assert not SystemdNotifier({}).ready()
    assert SystemdNotifier({}).watchdog_interval is None
    other = SystemdNotifier({"NOTIFY_SOCKET": "/x", "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "1"})
    assert other.watchdog_interval is None


@pytest.mark.e2e
def test_daemon_pings_the_systemd_watchdog(make_daemon) -> None:
    daemon = make_daemon(env={"WATCHDOG_USEC": "400000"})
    assert daemon.wait_notification("WATCHDOG=1", timeout=10) == "WATCHDOG=1"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "yagentd"
    unit = tmp_path / "yagentd.service"
    unit.write_text(render_unit(str(exe if exe.exists() else "/bin/true"), {"YAGENT_HOME": str(tmp_path / "a b")}))
    assert "YAGENT_HOME" in unit.read_text()  # a carried variable, with a space, parses too
    result = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "yagentd.service" not in result.stderr, result.stderr  # parse warnings exit 0 but name the file
    bad = tmp_path / "bad.service"
    bad.write_text(unit.read_text().replace("KillMode=mixed", "KillMode=sometimes"))
    bad_result = subprocess.run(["systemd-analyze", "verify", str(bad)], capture_output=True, text=True, timeout=60)
    assert "kill mode" in bad_result.stderr.lower()  # the check above can fail


def test_unit_is_a_notify_user_service_with_a_watchdog() -> None:
    text = render_unit("/opt/bin/yagentd")
    assert "ExecStart=/opt/bin/yagentd" in text
    for line in ("Type=notify", "WatchdogSec=", "Restart=on-failure", "KillMode=mixed", "WantedBy=default.target"):
        assert line in text
    assert "@YAGENTD@" not in text and "@ENVIRONMENT@" not in text


def test_install_unit_writes_into_the_user_unit_directory(tmp_path: Path) -> None:
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    cmd = [sys.executable, "-m", "yagent.client.cli", "daemon", "install-unit"]
    first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    unit = tmp_path / "cfg" / "systemd" / "user" / "yagentd.service"
    assert "Type=notify" in unit.read_text()
    assert "systemctl --user daemon-reload" in first.stdout
    unit.write_text("# edited by hand\n")
    refused = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "--force" in refused.stderr
    forced = subprocess.run([*cmd, "--force"], env=env, capture_output=True, text=True, timeout=60)
    assert forced.returncode == 0 and "Type=notify" in unit.read_text()


def test_a_listener_that_stops_reading_never_blocks_the_daemon(tmp_path: Path) -> None:
    path = str(tmp_path / "notify.sock")
    sock = _listener(path)  # bound, but never read: its receive queue fills up
    try:
        notifier = SystemdNotifier({"NOTIFY_SOCKET": path})
        results = [notifier.status("x" * 1000) for _ in range(2000)]
        assert results[0] is True
        assert results[-1] is False  # dropped once the queue is full, instead of blocking forever
    finally:
        sock.close()


def test_install_unit_gives_the_service_the_home_and_runtime_dir_of_this_shell(tmp_path: Path) -> None:
    # Otherwise systemd runs a daemon on ~/.yagent while `yagent` in this shell looks for one on $YAGENT_HOME.
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "cfg"), YAGENT_HOME=str(tmp_path / "my home"),
               YAGENT_RUNTIME_DIR=str(tmp_path / "rt"))
    cmd = [sys.executable, "-m", "yagent.client.cli", "daemon", "install-unit"]
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "YAGENT_HOME and YAGENT_RUNTIME_DIR" in result.stdout
    text = (tmp_path / "cfg" / "systemd" / "user" / "yagentd.service").read_text()
    assert f'\nEnvironment="YAGENT_HOME={tmp_path / "my home"}"\n' in text
    assert f'\nEnvironment="YAGENT_RUNTIME_DIR={tmp_path / "rt"}"\n' in text
    plain = {k: v for k, v in env.items() if k not in ("YAGENT_HOME", "YAGENT_RUNTIME_DIR")}
    printed = subprocess.run([*cmd, "--print"], env=plain, capture_output=True, text=True, timeout=60)
    assert "Environment=\"YAGENT" not in printed.stdout
