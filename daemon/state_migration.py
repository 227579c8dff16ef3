"""Moving an earlier install's per-task files into the per-task directories confinement needs.

Before runs were confined, a task's state was files beside each other (`tasks/{task}.jsonl`, `.agents.json`,
`.grants.json`) and project approvals were `settings.json` at the top of the home. A Landlock rule grants a
whole tree, so each task's state is now a directory of its own (`ipc.state_layout`). This is a layout move
only: the daemon renames the files and never reads them (their formats belong to the workers).
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from yagent.ipc.state_layout import AGENTS_FILE, GRANTS_FILE, MEMORY_FILE, approvals_file, task_dir, tasks_dir

__all__ = ["migrate_state_layout"]

log = logging.getLogger(__name__)

_OLD_SUFFIXES = ((".agents.json", AGENTS_FILE), (".grants.json", GRANTS_FILE), (".jsonl", MEMORY_FILE))


def migrate_state_layout(home: Path) -> int:
    """Move what the old layout left into the new one; returns how many files moved. A file whose new place
    is taken already is left where it is (logged): nothing is overwritten."""
    moved = 0
    old_approvals = home / "settings.json"
    if old_approvals.is_file() and not old_approvals.is_symlink():
        moved += _move(old_approvals, approvals_file(home))
    try:
        entries = list(os.scandir(tasks_dir(home)))
    except OSError:
        entries = []
    for entry in entries:
        if not entry.is_file(follow_symlinks=False):
            continue
        for suffix, new_name in _OLD_SUFFIXES:
            if entry.name.endswith(suffix) and len(entry.name) > len(suffix):
                moved += _move(Path(entry.path), task_dir(home, entry.name[: -len(suffix)]) / new_name)
                break
        else:
            if entry.name.endswith(".grants.json.lock"):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)  # an empty lock file: the new layout makes its own
    if moved:
        log.info("moved %d task state files under %s into one directory per task (the layout confined runs "
                 "need); nothing was rewritten", moved, tasks_dir(home))
    return moved


def _move(old: Path, new: Path) -> int:
    try:
        new.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if new.exists():
            log.warning("left %s where it is: %s exists already (move one of them aside by hand)", old, new)
            return 0
        os.rename(old, new)
    except OSError as exc:
        log.warning("could not move %s to %s: %s; the task's runs will not see it", old, new, exc.strerror)
        return 0
    return 1
