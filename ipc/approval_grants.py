"""What an allowing answer to an authorisation prompt grants, and the file that keeps project approvals.

A grant is a key: `inside:<tool>` approves that tool's dangerous operations inside the project, `outside:<path>`
approves touching that path (and anything beneath it) with any tool. Project approvals persist in one JSON file
(`state_layout.approvals_file`) under `authorized_projects`:

    {"authorized_projects": {"/abs/project/root": ["inside:delete_file", "outside:/etc/hosts"]}}

Only the daemon writes it, from the answers it relayed (`daemon/answered_approvals.py`); workers read it, and a
confined worker cannot write its directory, so a run can never approve anything for a later one. What sits at the
file's name is still read with care (`state_files`): an unconfined run (`--full-yolo`, no Landlock) may have put
anything there.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any

from .atomic_file import write_atomic
from .state_files import open_state_dir, read_state_bytes

__all__ = ["DAMAGED_SUFFIX", "SETTINGS_KEY", "SETTINGS_LIMIT", "ApprovalsDamaged", "add_project_grants", "covered",
           "grant_keys", "project_grants", "read_approvals"]

SETTINGS_KEY = "authorized_projects"

# The most of the approvals file read: a few keys per project, so even thousands of projects stay far below it,
# while a file an unconfined run blew up cannot cost every authorisation check that much memory and time.
SETTINGS_LIMIT = 4 << 20
# Where the daemon keeps a file that does not parse (a hand edit gone wrong) before it writes a new one.
DAMAGED_SUFFIX = ".damaged"


class ApprovalsDamaged(ValueError):
    """The approvals file is there but is not a JSON object; the message names it and says what to do."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path} {why}; fix it, or remove it to start again")
        self.why = why


def grant_keys(tool: str, dangerous_inside: bool, outside_paths: Iterable[str]) -> list[str]:
    """The keys an `allow session` / `allow project` answer to a prompt about `tool` records."""
    keys = [f"inside:{tool}"] if dangerous_inside else []
    return keys + [f"outside:{p}" for p in outside_paths]


def covered(key: str, granted: set[str] | frozenset[str]) -> bool:
    """Whether `granted` holds `key`: an approved directory approves what lies beneath it."""
    if key in granted:
        return True
    if not key.startswith("outside:"):
        return False
    path = PurePosixPath(key[len("outside:"):])
    return any(f"outside:{parent}" in granted for parent in path.parents)


def read_approvals(path: Path, *, dir_fd: int | None = None) -> dict[str, Any]:
    """The approvals file (empty when missing); `ApprovalsDamaged` when it does not parse as a JSON object, an
    OSError (`StateFileError` for something planted in its place: a link, a pipe, a file over `SETTINGS_LIMIT`)
    when unreadable. With `dir_fd`, the file of that name in the directory the descriptor holds."""
    try:
        raw = read_state_bytes(path.name, SETTINGS_LIMIT, dir_fd=dir_fd, shown=path) if dir_fd is not None \
            else read_state_bytes(path, SETTINGS_LIMIT)
    except FileNotFoundError:
        return {}
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ApprovalsDamaged(path, f"is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ApprovalsDamaged(path, f"holds a JSON {type(data).__name__}, not an object")
    return data


def project_grants(path: Path, project_root: str) -> set[str]:
    """The keys approved for the project at `project_root` (an OSError or `ApprovalsDamaged` as `read_approvals`)."""
    projects = read_approvals(path).get(SETTINGS_KEY)
    entry = projects.get(project_root) if isinstance(projects, dict) else None
    return {g for g in entry if isinstance(g, str)} if isinstance(entry, list) else set()


def add_project_grants(path: Path, project_root: str, grants: Iterable[str]) -> str:
    """Add `grants` to the project's approvals (the daemon's alone: one writer, so no lock); "" or, when the file did
    not parse, what was done with it: kept aside beside it (`DAMAGED_SUFFIX`) and a new file begun. An OSError when
    the file cannot be read or written; the file is then as it was. Read and written through one descriptor of the
    directory: a link put in its place, or swapped in meanwhile, leads nowhere."""
    directory = open_state_dir(path.parent)
    kept_aside = ""
    try:
        try:
            data = read_approvals(path, dir_fd=directory)
        except ApprovalsDamaged as exc:  # a person's edit gone wrong: kept for them, never silently replaced
            aside = path.name + DAMAGED_SUFFIX
            os.replace(path.name, aside, src_dir_fd=directory, dst_dir_fd=directory)
            kept_aside = (f"{path} {exc.why}: it was kept as {aside} beside it (what it held is there, to mend and "
                          "merge back), and a new one begun with this approval")
            data = {}
        projects = data.get(SETTINGS_KEY)
        if not isinstance(projects, dict):
            projects = {}
        current = projects.get(project_root)
        merged = [g for g in current if isinstance(g, str)] if isinstance(current, list) else []
        added = [g for g in grants if g not in merged]
        if not added:
            return kept_aside
        projects[project_root] = merged + added
        data[SETTINGS_KEY] = projects
        write_atomic(path.name, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode(), mode=0o600,
                     dir_fd=directory)
    finally:
        os.close(directory)
    return kept_aside
