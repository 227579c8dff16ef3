"""What happens before a client talks to the daemon: the configuration gate and the daemon offer.

A configuration file that cannot be loaded stops the client with three lines on stderr (what is
wrong, which file, `run yagent setup`) and exit code 2, before any screen is drawn.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TextIO

from yagent.ipc.config import ConfigError, load_settings

from . import exit_codes

__all__ = ["config_gate", "offer_daemon_start"]


def config_gate(path: Path, environ: Mapping[str, str], err: TextIO | None = None) -> int | None:
    """None when the file loads (or is absent); otherwise print the three lines and return 2."""
    try:
        load_settings(path, environ)
    except ConfigError as exc:
        for line in exc.lines():
            print(line, file=err or sys.stderr)
        return exit_codes.USAGE
    return None


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
