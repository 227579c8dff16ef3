"""The state home: `$YAGENT_HOME`, else `~/.yagent`. Everything durable lives below it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["config_path", "yagent_home"]


def yagent_home(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    explicit = env.get("YAGENT_HOME")
    if explicit:
        return Path(explicit).expanduser().absolute()
    return Path.home() / ".yagent"


def config_path(home: Path) -> Path:
    return home / "config" / "config.toml"
