"""`[sandbox]`: how the kernel confines agent runs (Landlock), read by the daemon's one config parser.

    [sandbox]
    mode = "on"                # "off": no run is confined (as if every turn were sent with --full-yolo)
    required = false           # true: where Landlock is missing, refuse runs instead of running them unconfined
    writable_roots = [...]     # directories commands may write besides the project and their scratch dir
    deny_read = [...]          # home entries no agent may read

`writable_roots` and `deny_read` replace their defaults when set (list the defaults you want to keep);
`~` stands for the home directory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .provider_config import shown_value

__all__ = ["DEFAULT_DENY_READ", "DEFAULT_WRITABLE_ROOTS", "SANDBOX_KEYS", "SandboxSettings", "parse_sandbox"]

# The toolchains' download caches: pip, npm, cargo, go. Only those that exist are writable (a rule needs a path).
DEFAULT_WRITABLE_ROOTS = ("~/.cache/pip", "~/.npm", "~/.cargo/registry", "~/.cargo/git", "~/go/pkg/mod",
                          "~/.cache/go-build")
DEFAULT_DENY_READ = ("~/.ssh", "~/.gnupg", "~/.aws")
SANDBOX_KEYS = ("mode", "required", "writable_roots", "deny_read")
_MODES = ("on", "off")
_MAX_PATHS = 256


@dataclass(frozen=True, slots=True)
class SandboxSettings:
    mode: str = "on"
    required: bool = False
    writable_roots: tuple[str, ...] = DEFAULT_WRITABLE_ROOTS
    deny_read: tuple[str, ...] = DEFAULT_DENY_READ

    @property
    def enabled(self) -> bool:
        return self.mode == "on"

    def expanded(self, home: str) -> tuple[list[str], list[str]]:
        """(writable roots, deny-read paths) as absolute paths, `~` being `home`."""
        return _expand(self.writable_roots, home), _expand(self.deny_read, home)


def _expand(paths: tuple[str, ...], home: str) -> list[str]:
    out = []
    for p in paths:
        if p == "~" or p.startswith("~/"):
            p = home + p[1:]
        out.append(os.path.normpath(p))
    return out


def parse_sandbox(table: Mapping[str, Any]) -> SandboxSettings:
    """The `[sandbox]` table; ValueError saying what is wrong."""
    section = table.get("sandbox", {})
    if not isinstance(section, Mapping):
        raise ValueError("[sandbox] must be a table")
    mode = section.get("mode", "on")
    if mode not in _MODES:
        raise ValueError(f'[sandbox] mode must be "on" or "off", got {shown_value(mode)}')
    required = section.get("required", False)
    if not isinstance(required, bool):
        raise ValueError(f"[sandbox] required must be true or false, got {shown_value(required)}")
    return SandboxSettings(mode=mode, required=required,
                           writable_roots=_paths(section, "writable_roots", DEFAULT_WRITABLE_ROOTS),
                           deny_read=_paths(section, "deny_read", DEFAULT_DENY_READ))


def _paths(section: Mapping[str, Any], key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    if key not in section:
        return default
    value = section[key]
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise ValueError(f'[sandbox] {key} must be a list of directories, e.g. ["~/.cache/pip"]')
    if len(value) > _MAX_PATHS:
        raise ValueError(f"[sandbox] {key} lists {len(value)} paths; at most {_MAX_PATHS} are taken")
    for p in value:
        if "\x00" in p or not (p == "~" or p.startswith("~/") or Path(p).is_absolute()):
            raise ValueError(f"[sandbox] {key}: {shown_value(p)} must be an absolute path or start with ~/")
    return tuple(value)
