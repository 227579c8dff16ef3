"""The systemd user unit: rendering it for this installation and writing it into place."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

__all__ = ["CARRIED_VARIABLES", "documentation_uri", "render_unit", "unit_dir", "yagentd_command"]

UNIT_NAME = "yagentd.service"


def yagentd_command() -> str:
    """Absolute command line that starts this installation's daemon."""
    exe = Path(sys.executable).parent / "yagentd"
    if exe.exists():
        return shlex.quote(str(exe))
    found = shutil.which("yagentd")
    if found:
        return shlex.quote(str(Path(found).absolute()))
    return f"{shlex.quote(sys.executable)} -m yagent.daemon.main"


def _template() -> str:
    # The repository's systemd/ folder installs as the data package yagent.systemd.
    return resources.files("yagent.systemd").joinpath(UNIT_NAME).read_text()


def documentation_uri() -> str:
    """`Documentation=`: the service's README as installed with this copy of yagent (a file: URI, which
    `systemctl --user help yagentd` opens); the project has no web site to point at."""
    return Path(str(resources.files("yagent.systemd").joinpath("README.md"))).absolute().as_uri()


# Variables that decide which daemon a client talks to, and which configuration it reads: the service must see
# the same values as the shell that installs it, or `yagent` would look for a daemon in one place while systemd
# runs it in another (or refuse a daemon that reads another configuration than the one it names).
CARRIED_VARIABLES = ("YAGENT_HOME", "YAGENT_RUNTIME_DIR", "YAGENT_CONFIG")


def render_unit(command: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    carried = [f'Environment="{name}={os.path.abspath(os.path.expanduser(environ[name]))}"\n'
               for name in CARRIED_VARIABLES if environ and environ.get(name)]
    return (_template().replace("@YAGENTD@", command or yagentd_command())
            .replace("@DOCUMENTATION@", documentation_uri())
            .replace("@ENVIRONMENT@\n", "".join(carried)))


def unit_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "systemd" / "user"
