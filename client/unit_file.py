"""The systemd user unit: rendering it for this installation and writing it into place."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from importlib import resources
from pathlib import Path

__all__ = ["render_unit", "unit_dir", "yagentd_command"]

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


def render_unit(command: str | None = None) -> str:
    return _template().replace("@YAGENTD@", command or yagentd_command())


def unit_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "systemd" / "user"
