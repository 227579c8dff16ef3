"""Where a project's instruction files are: the rule the worker reads them by and the daemon grants reads by.

From the project's root — the nearest directory at or above the working directory that holds `.git`, else
the working directory itself — down to the working directory (the project path a turn was sent for), each
directory contributes `AGENTS.md`, `CLAUDE.md` and `YAGENT.md`, every one present, in that order; an
`AGENTS.override.md` there replaces all three in that directory. Root first.

The rule lives here because two processes need it: the Director's worker reads the files, and the daemon,
which confines that worker, grants it read access to those above the project directory (a confined worker
reads only the project's own tree). Only names are looked at here (lstat), never contents.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["INSTRUCTION_FILES", "MAX_LEVELS", "OVERRIDE_FILE", "instruction_candidates", "instructions_root"]

INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md", "YAGENT.md")
OVERRIDE_FILE = "AGENTS.override.md"
MAX_LEVELS = 64  # directories walked up looking for the root: far deeper than any real tree


def instructions_root(workdir: Path) -> Path:
    """The nearest directory at or above `workdir` holding `.git` (a directory, or a worktree's file); else
    `workdir` itself."""
    here = workdir
    for _ in range(MAX_LEVELS):
        if os.path.lexists(here / ".git"):
            return here
        if here.parent == here:
            break
        here = here.parent
    return workdir


def instruction_candidates(workdir: Path) -> list[Path]:
    """The instruction files that exist (by name; links included), in reading order, root first."""
    root = instructions_root(workdir)
    chain = [workdir]
    while chain[-1] != root and chain[-1].parent != chain[-1]:
        chain.append(chain[-1].parent)
    found: list[Path] = []
    for directory in reversed(chain):
        override = directory / OVERRIDE_FILE
        if os.path.lexists(override):
            found.append(override)
            continue
        found.extend(directory / name for name in INSTRUCTION_FILES if os.path.lexists(directory / name))
    return found
