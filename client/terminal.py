"""`yagent` / `yagent attach TASK` / `yagent setup`: the interactive commands, up to the full screen.

Order of checks before the screen is taken: a terminal is there, the configuration loads (else three
lines and exit 2), the wizard runs first when no usable provider is configured, and the daemon runs
(else the user is offered to start it).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from yagent.ipc import DaemonNotRunning, IpcError, RemoteError
from yagent.ipc.config_location import ConfigLocation
from yagent.ipc.home import yagent_home
from yagent.ipc.vocabulary import TaskState

from . import daemon_control, exit_codes, startup
from .config_choice import ConfigChoice
from .setup.readiness import needs_setup
from .setup.view import run_setup
from .tui.app import run_tui
from .tui.backend import DaemonBackend
from .tui.controller import TuiController, TuiOptions

__all__ = ["open_client", "open_setup"]

# A task in these states goes on without a client; one in any other state waits for the next message.
_STILL_WORKING = {TaskState.RUNNING, TaskState.PAUSED, TaskState.WAITING, TaskState.BACKGROUND}


def _err(text: str) -> None:
    print(f"yagent: {text}", file=sys.stderr)


def _interactive() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def open_setup(location: ConfigLocation) -> int:
    config = location.path  # a named file that is missing is written by the wizard, at the user's word
    gate = startup.file_gate(config)
    if gate is not None:
        return gate
    if not _interactive():
        _err(f"`yagent setup` needs a terminal; to configure by hand, edit {config}")
        return exit_codes.USAGE
    wizard = asyncio.run(run_setup(config))
    print(wizard.note)
    return exit_codes.OK


def open_client(*, project: Path, task: str | None, new: bool, agent: str, yolo: str, config: ConfigChoice) -> int:
    location = config.location
    named = location.path if location.named else None

    async def ensure_daemon() -> None:
        await asyncio.to_thread(daemon_control.ensure_daemon, named)

    gate = startup.config_gate(location, os.environ)
    if gate is not None:
        return gate
    if not _interactive():
        _err("the full-screen client needs a terminal; in scripts use `yagent -p TEXT` or `yagent run TEXT`")
        return exit_codes.USAGE
    if task is None and not project.is_dir():
        _err(f"project directory {project} does not exist")
        return exit_codes.USAGE
    need = needs_setup(location.path, os.environ)
    if need is not None and need.kind == "no_provider" and config.daemon is not None and config.daemon.env_provider:
        need = None  # the running daemon's own environment offers a provider (zero-config)
    if need is not None:
        print(f"{need.reason}: starting the setup wizard (q leaves it)", file=sys.stderr)
        wizard = asyncio.run(run_setup(location.path))
        print(wizard.note, file=sys.stderr)
        gate = startup.config_gate(location, os.environ)
        if gate is not None:
            return gate
    if daemon_control.running_paths() is None and not startup.offer_daemon_start(
            input, lambda: daemon_control.start_background(named)):
        return exit_codes.NOT_RUNNING
    home = yagent_home()
    controller = TuiController(DaemonBackend(), TuiOptions(project=project, agent=agent, yolo=yolo,
                                                           config_path=location.path, home=home),
                               start_daemon=ensure_daemon)
    try:
        info = asyncio.run(run_tui(controller, task=task, latest=not new, history_path=home / "history" / "tui"))
    except RemoteError as exc:
        _err(str(exc))
        return exit_codes.FAILED
    except DaemonNotRunning as exc:
        _err(str(exc))
        return exit_codes.NOT_RUNNING
    except IpcError as exc:
        _err(f"cannot reach yagentd: {exc}")
        return exit_codes.for_ipc_error(exc)
    if info.task:
        if info.reason == "detached":
            goes_on = "; it keeps running in the daemon" if info.state in _STILL_WORKING else ""
            print(f"detached from task {info.task} ({info.state}){goes_on} — `yagent attach {info.task}` comes back")
        else:
            print(f"left task {info.task} ({info.state}) — `yagent attach {info.task}` comes back")
    else:
        print("left without starting a task")
    return exit_codes.OK
