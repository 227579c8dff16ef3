"""`[skills]`: where agents find the user's skills besides the usual places, read by the daemon's one config parser.

    [skills]
    dirs = ["~/team/skills"]   # more skill directories, read after the user's and the project's (later wins)
    enabled = true             # false: agents see no skills (use_skill says they are turned off)

The usual places need no configuration: `$YAGENT_HOME/skills`, `~/.agents/skills`, `~/.claude/skills` and, in the
project, `.yagent/skills`, `.agents/skills`, `.claude/skills` (`ipc/skill_account.py`). The values reach workers
resolved, in `RunSettings.skills`, with `[sandbox] deny_read`: no skill is ever read from there.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from typing import Any

from .provider_config import shown_value
from .records import Record, record
from .sandbox_settings import DEFAULT_DENY_READ

__all__ = ["MAX_SKILL_DIRS", "SKILLS_KEYS", "SkillsSettings", "expand_home", "parse_skills"]

SKILLS_KEYS = ("dirs", "enabled")
MAX_SKILL_DIRS = 64
_MAX_PATH_CHARS = 4096  # PATH_MAX: a longer "directory" cannot be opened anyway


@record
class SkillsSettings(Record):
    """The resolved `[skills]` table; paths as written (`~` is the user's home, expanded where they are read)."""

    enabled: bool = True
    dirs: list[str] = field(default_factory=list)
    deny_read: list[str] = field(default_factory=lambda: list(DEFAULT_DENY_READ))  # never a skill from beneath


def expand_home(path: str, user_home: str) -> str:
    """`path` absolute and normalised, a leading `~` being `user_home`."""
    if path == "~" or path.startswith("~/"):
        path = user_home + path[1:]
    return os.path.normpath(path)


def parse_skills(table: Mapping[str, Any],
                 deny_read: tuple[str, ...] | list[str] = DEFAULT_DENY_READ) -> SkillsSettings:
    """The `[skills]` table; ValueError saying what is wrong and how to write it."""
    section = table.get("skills", {})
    if not isinstance(section, Mapping):
        raise ValueError("[skills] must be a table")
    enabled = section.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ValueError(f"[skills] enabled must be true or false, got {shown_value(enabled)}")
    dirs = section.get("dirs", [])
    if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
        raise ValueError('[skills] dirs must be a list of directories, e.g. ["~/team/skills"]')
    if len(dirs) > MAX_SKILL_DIRS:
        raise ValueError(f"[skills] dirs lists {len(dirs)} directories; at most {MAX_SKILL_DIRS} are taken")
    for d in dirs:
        if "\x00" in d or len(d) > _MAX_PATH_CHARS or not (d == "~" or d.startswith("~/") or Path(d).is_absolute()):
            raise ValueError(f"[skills] dirs: {shown_value(d)} must be an absolute path or start with ~/ "
                             f"(at most {_MAX_PATH_CHARS} characters)")
    return SkillsSettings(enabled=enabled, dirs=list(dirs), deny_read=list(deny_read))
