"""`yagent daemon start|stop|status|install-unit`."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from yagent.ipc import DaemonClient, DaemonNotRunning, IpcError, RuntimeDirError, daemon_listening
from yagent.ipc.atomic_file import write_atomic
from yagent.ipc.home import yagent_home
from yagent.ipc.messages import Ack, DaemonStatus, Shutdown, StatusRequest
from yagent.ipc.private_files import make_private_dirs
from yagent.ipc.runtime_dir import RuntimePaths, ensure_runtime_dir, resolve_runtime_dir, runtime_paths

from . import exit_codes
from .humanize import age
from .unit_file import CARRIED_VARIABLES, UNIT_NAME, render_unit, unit_dir, yagentd_command

__all__ = [
    "DaemonStartFailed",
    "daemon_install_unit",
    "daemon_start",
    "daemon_status",
    "daemon_stop",
    "ensure_daemon",
    "running_paths",
    "start_background",
]

START_TIMEOUT = 20.0


def _err(text: str) -> None:
    print(f"yagent: {text}", file=sys.stderr)


async def _status(timeout: float = 5.0) -> DaemonStatus:
    async with DaemonClient(connect_timeout=timeout) as client:
        return await client.request(StatusRequest(id=0), DaemonStatus)


def running_paths() -> RuntimePaths | None:
    """The runtime paths when yagentd accepts connections, else None."""
    root = resolve_runtime_dir()
    if not root.exists():
        return None
    paths = runtime_paths(root)
    return paths if daemon_listening(paths) else None


def start_background(config: Path | None = None) -> tuple[bool, str]:
    """Launch yagentd detached and wait until it answers; returns (ok, message). `config`: the file the user
    named (`--config` / `$YAGENT_CONFIG`), handed to yagentd as given."""
    root = resolve_runtime_dir()
    ensure_runtime_dir(root)  # refuses an unsafe directory before anything is launched
    paths = runtime_paths(root)
    if daemon_listening(paths):
        return True, "yagentd is already running"
    home = yagent_home()
    logs = home / "logs"
    make_private_dirs(logs)
    out_path = logs / "yagentd.out"
    # -P: not the working directory (the user's project) first on sys.path, where its modules would shadow ours.
    cmd = [sys.executable, "-P", "-m", "yagent.daemon.main", *(["--config", str(config)] if config else [])]
    with open(os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600), "ab") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            tail = _tail(out_path)
            return False, f"yagentd exited with code {code} before becoming ready (log: {out_path}):\n{tail}"
        if daemon_listening(paths):
            try:
                status = asyncio.run(_status())
                return True, f"yagentd started (pid {status.pid}, runtime dir {status.runtime_dir})"
            except IpcError:
                pass
        time.sleep(0.05)
    return False, f"yagentd (pid {proc.pid}) did not become ready within {START_TIMEOUT:.0f}s; see {out_path}"


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


def daemon_start(as_json: bool = False, config: Path | None = None) -> int:
    try:
        ok, message = start_background(config)
    except IpcError as exc:
        _err(str(exc))
        return exit_codes.USAGE
    if not ok:
        _err(message)
        return exit_codes.FAILED
    print(json.dumps({"ok": True, "message": message}) if as_json else message)
    return exit_codes.OK


class DaemonStartFailed(IpcError):
    """yagentd was not running and starting it failed."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"yagentd is not running and starting it failed: {reason}")


def ensure_daemon(config: Path | None = None) -> str | None:
    """Start the daemon if it is not running (used by commands that need it), with the configuration file the
    user named, if any. Returns what was done (None when it was already running) for the caller to show;
    raises `DaemonStartFailed`."""
    if running_paths() is not None:
        return None
    ok, message = start_background(config)
    if not ok:
        raise DaemonStartFailed(message)
    return message


def daemon_stop(as_json: bool = False, timeout: float = 30.0) -> int:
    if running_paths() is None:
        print(json.dumps({"ok": True, "running": False}) if as_json else "yagentd is not running")
        return exit_codes.OK

    async def stop() -> int:
        async with DaemonClient() as client:
            pid = client.hello.daemon_pid if client.hello else 0
            await client.request(Shutdown(id=0), Ack)
            return pid

    try:
        pid = asyncio.run(stop())
    except DaemonNotRunning:
        print("yagentd is not running")
        return exit_codes.OK
    except RuntimeDirError as exc:
        _err(str(exc))
        return exit_codes.for_ipc_error(exc)
    except IpcError as exc:
        _err(str(exc))
        return exit_codes.FAILED
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _pid_alive(pid):
            print(json.dumps({"ok": True, "stopped": pid}) if as_json else f"yagentd (pid {pid}) stopped")
            return exit_codes.OK
        time.sleep(0.05)
    _err(f"yagentd (pid {pid}) is still running after {timeout:.0f}s; `kill {pid}` ends it")
    return exit_codes.FAILED


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of ours counts as gone
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def daemon_status(as_json: bool = False) -> int:
    try:
        status = asyncio.run(_status())
    except DaemonNotRunning as exc:
        if as_json:
            print(json.dumps({"running": False}))
        else:
            print(str(exc))
        return exit_codes.NOT_RUNNING
    except IpcError as exc:
        _err(str(exc))
        return exit_codes.for_ipc_error(exc)
    if as_json:
        print(json.dumps({"running": True, **status.to_wire()}))
        return exit_codes.OK
    up = time.time() - status.started_at
    leases = status.leases
    limit = leases.get("limit") or "unlimited"
    print(f"yagentd {status.version} running (pid {status.pid}, up {age(up)})")
    print(f"  runtime dir  {status.runtime_dir}")
    print(f"  home         {status.home}")
    print(f"  tasks        {status.tasks_running} running")
    print(f"  workers      {status.live_workers} live (cap {status.max_workers}), {status.runs_started} started, "
          f"{status.warm_workers} warm")
    print(f"  LLM leases   {leases.get('in_use')} in flight of {limit}, {leases.get('waiting')} waiting, "
          f"peak {leases.get('peak')}")
    limit_text = f" of ${status.daily_limit:.2f} ([llm] max_cost_per_day)" if status.daily_limit > 0 else ""
    print(f"  spent today  ${status.spent_today:.2f}{limit_text}")
    if status.confinement:
        print(f"  sandbox      {status.confinement}")
    for n, line in enumerate(status.browser):  # the first says which Chromium (or why none), then each project's
        print(f"  {'browser' if n == 0 else '':<12} {line.removeprefix('browser: ')}")
    if status.config:
        print(f"  config       {status.config}")
    for warning in status.config_warnings:
        print(f"    ! {warning}")
    return exit_codes.OK


def daemon_install_unit(force: bool = False, print_only: bool = False) -> int:
    text = render_unit(yagentd_command(), os.environ)
    if print_only:
        print(text, end="")
        return exit_codes.OK
    target_dir = unit_dir()
    target = target_dir / UNIT_NAME
    if target.exists() and not force and target.read_text() != text:
        _err(f"{target} exists and differs; rerun with --force to replace it")
        return exit_codes.FAILED
    target_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(target, text.encode())
    print(f"wrote {target}")
    carried = [name for name in CARRIED_VARIABLES if os.environ.get(name)]
    if carried:
        print(f"the service gets this shell's {' and '.join(carried)}; rerun install-unit if you change them")
    if running_paths() is not None:
        print("yagentd is running now: if you started it yourself rather than through systemd, stop it first "
              "with `yagent daemon stop`, or the service cannot start")
    print("enable it with: systemctl --user daemon-reload && systemctl --user enable --now yagentd")
    return exit_codes.OK
