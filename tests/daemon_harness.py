"""A real yagentd in a subprocess, with its own home and runtime directory, for end-to-end tests.

Readiness is the systemd notify datagram (READY=1) on a socket the harness owns — a signal, not a
poll. Scripted runs use the test-only `scripted` agent kind (`tests/agents/scripted.py`).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from yagent.ipc import DaemonClient, EventStream
from yagent.ipc.messages import DaemonStatus, Event, StatusRequest, Submit, Submitted
from yagent.ipc.vocabulary import EventType

REPO = Path(__file__).resolve().parent.parent


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.02) -> Any:
    """Wait for a condition with a deadline; fail naming what was awaited."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def arun(coro: Any, timeout: float = 60.0) -> Any:
    async def bounded() -> Any:
        async with asyncio.timeout(timeout):
            return await coro

    return asyncio.run(bounded())


class DaemonProcess:
    def __init__(self, root: Path, config: str = "", env: dict[str, str] | None = None) -> None:
        self.root = root
        self.home = root / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        # Socket paths are capped at 107 bytes; pytest's tmp paths can be long.
        self._short = Path(tempfile.mkdtemp(prefix="yg-", dir="/tmp"))
        self.runtime = self._short / "run"
        self.config = config
        self.extra_env = env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = root / "yagentd.log"
        self._notify: socket.socket | None = None
        self.notifications: list[str] = []
        self.write_config(config)

    def write_config(self, extra: str) -> None:
        cfg = self.home / "config"
        cfg.mkdir(parents=True, exist_ok=True)
        text = extra
        if "agent_modules" not in text:
            section = '[daemon]\nagent_modules = ["tests.agents.scripted"]\n'
            # Appended, not prepended: top-level keys in `extra` must stay top-level.
            text = text.replace("[daemon]\n", section, 1) if "[daemon]" in text else f"{text}\n{section}"
        if "[codeseek]" not in text:
            # The built-in code server is a process per project: tests that are not about it do without it (its own
            # tests write their own [codeseek]).
            text += "\n[codeseek]\nenabled = false\n"
        if "[sandbox]" not in text:
            # Scripted test runs write beside the project (notes under the test's tmp dir): let them, confined
            # otherwise as any run is. Tests of the sandbox itself write their own [sandbox].
            text += f"\n[sandbox]\nwritable_roots = [{json.dumps(str(self.root.parent))}]\n"
        (cfg / "config.toml").write_text(text)

    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({
            "YAGENT_HOME": str(self.home),
            "YAGENT_RUNTIME_DIR": str(self.runtime),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")])),
            "PYTHONUNBUFFERED": "1",
        })
        env.pop("NOTIFY_SOCKET", None)
        env.pop("WATCHDOG_USEC", None)
        env.update(self.extra_env)
        return env

    def start(self, timeout: float = 30.0) -> DaemonProcess:
        notify_path = self._short / "notify.sock"
        if notify_path.exists():
            notify_path.unlink()
        self.notifications.clear()  # a restart must wait for the new daemon's READY, not find the old one's
        self._notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._notify.bind(str(notify_path))
        env = self.env
        env["NOTIFY_SOCKET"] = str(notify_path)
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "yagent.daemon.main", "--log-level", "debug"],
                                         env=env, stdout=log, stderr=subprocess.STDOUT, cwd=str(self.root))
        self.wait_notification("READY=1", timeout)
        return self

    def wait_notification(self, needle: str, timeout: float) -> str:
        assert self._notify is not None
        deadline = time.monotonic() + timeout
        while True:
            for note in self.notifications:
                if needle in note:
                    return note
            remaining = deadline - time.monotonic()
            if remaining <= 0 or (self.proc is not None and self.proc.poll() is not None and not self._pending()):
                raise AssertionError(f"yagentd never sent {needle!r}; log:\n{self.log_tail()}")
            self._notify.settimeout(min(remaining, 0.5))
            try:
                self.notifications.append(self._notify.recv(4096).decode())
            except TimeoutError:
                continue

    def _pending(self) -> bool:
        assert self._notify is not None
        self._notify.setblocking(False)
        try:
            self.notifications.append(self._notify.recv(4096).decode())
            return True
        except BlockingIOError:
            return False
        finally:
            self._notify.setblocking(True)

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def client(self, **kw: Any) -> DaemonClient:
        return DaemonClient(self.runtime, **kw)

    def status(self) -> DaemonStatus:
        async def ask() -> DaemonStatus:
            async with self.client() as c:
                return await c.request(StatusRequest(id=0), DaemonStatus)

        return arun(ask(), 15)

    def cli(self, *args: str, timeout: float = 60.0, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "yagent.client.cli", *args], env=self.env, text=True,
                              capture_output=True, timeout=timeout, cwd=str(cwd or self.root))

    def terminate(self, timeout: float = 30.0) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(f"yagentd did not exit within {timeout}s of SIGTERM; log:\n{self.log_tail()}")

    def close(self) -> None:
        try:
            if self.proc is not None and self.proc.poll() is None:
                self.terminate()
        finally:
            if self._notify is not None:
                self._notify.close()
            shutil.rmtree(self._short, ignore_errors=True)


def script(*steps: dict[str, Any], output: str = "done") -> str:
    return json.dumps({"steps": list(steps), "output": output})


async def submit(client: DaemonClient, project: Path, text: str, *, agent: str = "scripted",
                 task: str | None = None, yolo: str = "none") -> Submitted:
    return await client.request(Submit(id=0, project=str(project), text=text, agent=agent, task=task, yolo=yolo),
                                Submitted)


async def collect_turn(client: DaemonClient, task: str, *, turn: int | None = None, after_seq: int = 0,
                       on_event: Callable[[Event], Any] | None = None) -> list[Event]:
    """All events of the task after `after_seq` up to the end of `turn` (default: the first to end)."""
    events: list[Event] = []
    async with EventStream(client, task, after_seq=after_seq) as stream:
        async for ev in stream.events():
            events.append(ev)
            if on_event is not None:
                result = on_event(ev)
                if asyncio.iscoroutine(result):
                    await result
            if ev.type == EventType.TURN_FINISHED and (turn is None or ev.data.get("turn") == turn):
                return events
    return events


def of_type(events: list[Event], type_: str) -> list[Event]:
    return [e for e in events if e.type == type_]
