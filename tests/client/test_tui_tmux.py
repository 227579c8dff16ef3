"""The full-screen client in a real terminal: tmux runs `yagent`, send-keys types, capture-pane reads.

Each test owns a private tmux server (`-L` with a unique name, no user config) and waits on screen
content with deadlines.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.client.conftest import PROVIDER_CONFIG
from tests.daemon_harness import DaemonProcess, script, wait_until

TMUX = shutil.which("tmux")
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(TMUX is None, reason="tmux is not installed (CI installs it)")]


class Tmux:
    def __init__(self) -> None:
        self.socket = f"yagent-test-{uuid.uuid4().hex[:10]}"

    def __call__(self, *args: str) -> str:
        assert TMUX is not None
        done = subprocess.run([TMUX, "-L", self.socket, "-f", "/dev/null", *args], capture_output=True, text=True,
                              timeout=15)
        if done.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)} failed: {done.stderr}")
        return done.stdout

    def start(self, name: str, command: str, cwd: Path, columns: int = 100, rows: int = 30) -> None:
        # remain-on-exit keeps the pane (and what the client printed last) after it exits.
        self("new-session", "-d", "-s", name, "-x", str(columns), "-y", str(rows), "-c", str(cwd), command,
             ";", "set-option", "-t", name, "remain-on-exit", "on")

    def keys(self, name: str, *keys: str) -> None:
        self("send-keys", "-t", name, *keys)

    def type(self, name: str, text: str) -> None:
        self("send-keys", "-t", name, "-l", text)

    def screen(self, name: str) -> str:
        return self("capture-pane", "-p", "-t", name)

    def scrollback(self, name: str) -> str:
        """Visible rows plus history, wrapped lines joined: what a program printed after leaving full screen."""
        return self("capture-pane", "-p", "-J", "-S", "-200", "-t", name)

    def wait(self, name: str, *needles: str, timeout: float = 20.0, absent: str | None = None,
             history: bool = False) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.scrollback(name) if history else self.screen(name)
            if all(n in screen for n in needles) and (absent is None or absent not in screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {needles} on the screen of {name}:\n"
                                     f"{screen}")
            time.sleep(0.05)

    def close(self) -> None:
        assert TMUX is not None
        subprocess.run([TMUX, "-L", self.socket, "kill-server"], capture_output=True, timeout=15)


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    t = Tmux()
    yield t
    t.close()


def client_command(daemon: DaemonProcess, *args: str) -> str:
    env = {k: v for k, v in daemon.env.items() if k.startswith(("YAGENT_", "PYTHON", "PATH", "HOME", "LANG", "LC_"))}
    env["TERM"] = "xterm-256color"
    return shlex.join(["env", *(f"{k}={v}" for k, v in env.items()), sys.executable, "-m", "yagent.client.cli",
                       *args])


def test_attach_stream_answer_detach_reattach_and_resize(make_daemon, project: Path, tmux: Tmux) -> None:
    daemon = make_daemon(PROVIDER_CONFIG)
    tmux.start("ui", client_command(daemon, "--agent", "scripted"), project)
    tmux.wait("ui", "new session", "ctrl+q detach")
    turn1 = script({"chunks": ["alpha ", "中文输出 ", "omega"], "delay": 0.05},
                   {"ask": {"kind": "confirm", "prompt": "proceed with step two?"}},
                   {"chunks": ["ANSWERED-AND-DONE"]})
    tmux.type("ui", turn1)
    tmux.keys("ui", "Enter")
    screen = tmux.wait("ui", "proceed with step two?", "waiting for you", "alpha 中文输出 omega")
    assert "y yes" in screen and "esc later" in screen
    tmux.keys("ui", "y")
    tmux.wait("ui", "ANSWERED-AND-DONE", "turn 1 done")
    tmux.keys("ui", "C-q")
    screen = tmux.wait("ui", "detached from task", history=True)
    task = screen.split("detached from task ")[1].split()[0]
    assert f"`yagent attach {task}` comes back" in screen
    assert "keeps running" not in screen  # the turn is done: nothing runs on after the client leaves

    # While nobody is attached, another terminal sends the next turn; it streams and then asks.
    missed = [f"m{i:02d}" for i in range(20)] + ["MISSED-END"]
    streamed = "".join(missed)  # one line on screen; the script's JSON (the user message) splits it up
    turn2 = script({"chunks": missed, "delay": 0.01}, {"ask": {"kind": "confirm", "prompt": "second question?"}})
    sent = daemon.cli("run", "--detach", "--task", task, "--agent", "scripted", turn2, cwd=project)
    assert sent.returncode == 0, sent.stderr
    wait_until(lambda: json.loads(daemon.cli("--json", "ps").stdout)[0]["questions"], 20, "the second question")

    tmux("respawn-pane", "-k", "-t", "ui", client_command(daemon, "attach", task))
    screen = tmux.wait("ui", "second question?", streamed, "waiting for you")
    assert screen.count(streamed) == 1  # every missed chunk, once, in order

    tmux("resize-window", "-t", "ui", "-x", "50", "-y", "15")
    screen = tmux.wait("ui", "second question?", "waiting for you", absent="ctrl+t plans")
    rows = screen.split("\n")
    assert all(len(row) <= 50 for row in rows)
    assert any(row.startswith("╰") for row in rows)  # the dialog's bottom border still fits
    tmux.keys("ui", "n")
    tmux.wait("ui", "turn 2 done")
    tmux("resize-window", "-t", "ui", "-x", "160", "-y", "40")
    screen = tmux.wait("ui", "ctrl+t plans", "turn 2 done")
    assert "answered: no" in screen


def test_two_clients_see_one_stream_and_one_answer_closes_both(make_daemon, project: Path, tmux: Tmux) -> None:
    daemon = make_daemon(PROVIDER_CONFIG)
    sent = daemon.cli("--json", "run", "--detach", "--agent", "scripted",
                      script({"chunks": ["BOTH-SEE-THIS"]}, {"ask": {"kind": "select", "prompt": "which colour?",
                                                                     "options": ["red", "green", "blue"]}}),
                      cwd=project)
    task = json.loads(sent.stdout)["task"]
    for name in ("one", "two"):
        tmux.start(name, client_command(daemon, "attach", task), project, columns=90, rows=24)
    for name in ("one", "two"):
        tmux.wait(name, "BOTH-SEE-THIS", "which colour?", "3. blue")
    tmux.keys("one", "2")
    for name in ("one", "two"):
        tmux.wait(name, "answered: green", "turn 1 done", absent="3. blue")  # the dialog closed in both


def test_no_daemon_is_offered_then_a_dropped_daemon_is_reported(make_daemon, project: Path, tmux: Tmux) -> None:
    daemon = make_daemon(PROVIDER_CONFIG, start=False)
    try:
        tmux.start("ui", client_command(daemon, "--agent", "scripted"), project)
        tmux.wait("ui", "is not running. Start it now? [Y/n]")
        tmux.keys("ui", "y", "Enter")
        tmux.wait("ui", "new session", "ctrl+q detach", timeout=30)
        status = json.loads(daemon.cli("--json", "daemon", "status").stdout)
        os.kill(status["pid"], signal.SIGTERM)
        tmux.wait("ui", "connection to yagentd lost", "ctrl+r reconnect")
        tmux.keys("ui", "C-r")  # starts the daemon again and reattaches
        tmux.wait("ui", "reconnected", absent="connection to yagentd lost", timeout=30)
    finally:
        daemon.cli("daemon", "stop")


def test_first_run_opens_the_wizard_and_leaving_it_opens_the_client(make_daemon, project: Path,
                                                                     tmux: Tmux) -> None:
    daemon = make_daemon("")  # no provider configured
    tmux.start("ui", client_command(daemon, "--agent", "scripted"), project, columns=80, rows=24)
    tmux.wait("ui", "add a provider", "*base URL")
    tmux.type("ui", "https://ops")  # bare letters land in the field, even p and o
    screen = tmux.wait("ui", "https://ops")
    assert "presets fill only" not in screen
    tmux.keys("ui", "Escape")
    tmux.wait("ui", "no providers yet")
    tmux.keys("ui", "q")  # the standalone wizard really exits
    tmux.wait("ui", "new session", "ctrl+q detach")
    config = daemon.home / "config" / "config.toml"
    assert "providers" not in config.read_text()


def test_top_shows_a_live_run_and_quits_on_q(make_daemon, project: Path, tmux: Tmux) -> None:
    daemon = make_daemon(PROVIDER_CONFIG)
    sent = daemon.cli("run", "--detach", "--agent", "scripted", script({"busy": 60}), cwd=project)
    assert sent.returncode == 0, sent.stderr
    task = sent.stdout.split("task ")[1].split()[0]
    tmux.start("top", client_command(daemon, "top"), project)
    tmux.wait("top", task, "cpu ", "q quits", "yagentd pid")
    tmux.keys("top", "q")
    wait_until(lambda: tmux("display-message", "-p", "-t", "top", "#{pane_dead}").strip() == "1", 10,
               "top to quit on q")
    assert daemon.cli("cancel", task).returncode == 0
