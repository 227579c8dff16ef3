"""Which configuration file a `yagent` command works with: the running daemon's, which it must agree with.

The configuration belongs to the daemon. A command that names a file (`--config PATH`, or `$YAGENT_CONFIG`) while
yagentd runs with another is refused with both names and what to do — exit 2, as for any configuration the
command cannot use. Without a daemon, the named file (or the default one) is used, and a daemon the command starts
is started with it. The daemon's file is learned from its hello.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from yagent.ipc import DaemonClient, DaemonNotRunning
from yagent.ipc.caller_keys import collect, variables_to_send
from yagent.ipc.config import ConfigError, read_config_table
from yagent.ipc.config_location import ConfigLocation, config_location, same_file
from yagent.ipc.home import yagent_home
from yagent.ipc.messages import HelloReply

from .daemon_control import running_paths

__all__ = ["ConfigChoice", "ConfigMismatch", "choose_config", "keys_to_send", "running_daemon_hello"]


class ConfigMismatch(Exception):
    """The command names another configuration file than the one the running daemon reads."""

    def __init__(self, named: ConfigLocation, hello: HelloReply) -> None:
        self.named = named
        self.daemon = hello
        super().__init__(
            f"yagentd (pid {hello.daemon_pid}) reads the configuration {hello.config}, but {named.named_by} names "
            f"{named.path}: the configuration belongs to the daemon, so stop it (`yagent daemon stop`) and start it "
            f"with `yagent daemon start --config {shlex.quote(str(named.path))}`, or drop {named.named_by} to work "
            "with the daemon's file")


@dataclass(frozen=True, slots=True)
class ConfigChoice:
    location: ConfigLocation
    daemon: HelloReply | None  # the running daemon's hello, None when none runs


def running_daemon_hello(timeout: float = 5.0) -> HelloReply | None:
    """The running daemon's hello, None when none is running."""
    if running_paths() is None:
        return None

    async def hello() -> HelloReply | None:
        async with DaemonClient(connect_timeout=timeout) as client:
            return client.hello

    try:
        return asyncio.run(hello())
    except DaemonNotRunning:
        return None


def choose_config(flag: str | None, environ: Mapping[str, str]) -> ConfigChoice:
    """The file to work with; raises `ConfigMismatch`, or an `IpcError` when a daemon runs but cannot be asked."""
    location = config_location(flag, environ, yagent_home(environ))
    hello = running_daemon_hello()
    if hello is None or not hello.config:
        return ConfigChoice(location, hello)
    if location.named and not same_file(location.path, hello.config):
        raise ConfigMismatch(location, hello)
    return ConfigChoice(ConfigLocation(Path(hello.config), location.named_by, reported_by_daemon=True), hello)


def keys_to_send(config: Path | None, environ: Mapping[str, str]) -> dict[str, str]:
    """What a submit carries of this shell's environment (`ipc.caller_keys`): the values of the variables the
    configuration names, read anew for every turn (the file may have changed), and of the zero-config ones."""
    table = {}
    if config is not None:
        try:
            table = read_config_table(config) or {}
        except ConfigError:
            table = {}  # the daemon refuses the turn and says why; the zero-config variables still go
    return collect(variables_to_send(table), environ)
