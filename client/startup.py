"""What happens before a client talks to the daemon: the configuration gates and the daemon offer.

A configuration file that cannot be loaded stops the client with three lines on stderr (what is
wrong, which file, what to do) and exit code 2, before any screen is drawn; so does naming another file than
the one the running daemon reads (`config_choice`). The setup wizard repairs
what the file says, so it passes a gate of its own: only a file it cannot read stops it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TextIO

from yagent.ipc.config import ConfigError, load_settings, read_config_bytes, read_config_table
from yagent.ipc.config_location import ConfigLocation
from yagent.ipc.messages import HelloReply
from yagent.ipc.provider_config import AGENT_NAMES, ProviderConfigError, parse_llm_config
from yagent.ipc.zero_config import NO_PROVIDER_ADVICE, offered_families

from . import exit_codes

__all__ = ["config_gate", "file_gate", "offer_daemon_start", "provider_gate"]


def config_gate(location: ConfigLocation, environ: Mapping[str, str], err: TextIO | None = None) -> int | None:
    """None when the file loads (the default one is written from the template first, if missing); otherwise
    print the three lines and return 2 — also for a file named with --config or $YAGENT_CONFIG that is missing."""
    try:
        location.prepare()
        load_settings(location.path, environ)
    except ConfigError as exc:
        return _refuse(exc, err)
    return None


def provider_gate(location: ConfigLocation, environ: Mapping[str, str], daemon: HelloReply | None, agent: str,
                  err: TextIO | None = None) -> int | None:
    """None when some provider can serve a turn of `agent`: one configured in the file, or a zero-config variable
    in this shell's environment, or — a daemon running — in yagentd's. Otherwise say so once, with what to do, and
    return 2: before a daemon is started or a task recorded. Only yagent's own agents are judged: an agent kind a
    module adds (`--agent KIND`) may need no model at all."""
    if agent not in AGENT_NAMES:
        return None
    try:
        table = read_config_table(location.path) or {}
        if parse_llm_config(table, environ).providers:
            return None
    except (ConfigError, ProviderConfigError):
        return None  # the configuration gate and the daemon say what is wrong with the file
    if offered_families(environ) or (daemon is not None and daemon.env_provider):
        return None
    print(f"yagent: no LLM provider is configured in {location.path}, and none is in your environment: "
          f"{NO_PROVIDER_ADVICE}", file=err or sys.stderr)
    return exit_codes.USAGE


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
