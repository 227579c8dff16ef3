"""What happens before a client talks to the daemon: the configuration gates and the daemon offer.

A configuration file that cannot be loaded stops the client with three lines on stderr (what is
wrong, which file, what to do) and exit code 2, before any screen is drawn. The setup wizard repairs
what the file says, so it passes a gate of its own: only a file it cannot read stops it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TextIO

from yagent.ipc.config import ConfigError, load_settings, read_config_bytes

from . import exit_codes

__all__ = ["config_gate", "file_gate", "offer_daemon_start"]


def config_gate(path: Path, environ: Mapping[str, str], err: TextIO | None = None) -> int | None:
    """None when the file loads (or is absent); otherwise print the three lines and return 2."""
    try:
        load_settings(path, environ)
    except ConfigError as exc:
        return _refuse(exc, err)
    return None


def file_gate(path: Path, err: TextIO | None = None) -> int | None:
    """The wizard's gate: None when the file can be read (or is absent), whatever it says; otherwise (a
    pipe, a device, a dangling link, a huge file) print the three lines and return 2."""
    try:
        read_config_bytes(path)
    except ConfigError as exc:
        return _refuse(exc, err)
    return None


def _refuse(exc: ConfigError, err: TextIO | None) -> int:
    for line in exc.lines():
        print(line, file=err or sys.stderr)
    return exit_codes.USAGE


def offer_daemon_start(ask: Callable[[str], str], start: Callable[[], tuple[bool, str]],
                       out: TextIO | None = None) -> bool:
    """Ask whether to start yagentd; start it on yes. True when it is running afterwards."""
    out = out or sys.stderr
    try:
        answer = ask("yagentd (the yagent daemon) is not running. Start it now? [Y/n] ").strip().lower()
    except EOFError:
        answer = "n"
    if answer not in ("", "y", "yes"):
        print("not started; `yagent daemon start` starts it (or `yagent daemon install-unit` for systemd)", file=out)
        return False
    ok, message = start()
    print(message, file=out)
    return ok
