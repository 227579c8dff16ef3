"""Removing boards and artifacts idle past their retention: the daemon's prune pass, on files only.

The formats belong to the workers; this module looks at nothing but names, types and modification times,
so the daemon may import it. It never follows a symbolic link (every look is an `lstat`; a link is
unlinked as itself, never the tree it points to) and never touches a task `keep` protects (live, or one
the daemon still lists as resumable).
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .board_switches import blackboard_enabled
from .state_layout import ARTIFACTS_DIR, NOTES_DIR, tasks_dir

__all__ = ["Pruned", "prune_boards"]

log = logging.getLogger(__name__)


@dataclass
class Pruned:
    boards: list[str] = field(default_factory=list)  # tasks whose board was removed
    artifacts: int = 0  # artifact files removed


def _newest_mtime(root: Path) -> float:
    """The newest modification time in the tree, links included as themselves (never followed)."""
    newest = os.lstat(root).st_mtime
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in (*dirnames, *filenames):
            try:
                newest = max(newest, os.lstat(os.path.join(dirpath, name)).st_mtime)
            except OSError:
                continue
    return newest


def _written(board: Path) -> float:
    """When the board was last written; -inf without one (a link where it belongs counts as itself)."""
    try:
        return _newest_mtime(board) if stat.S_ISDIR(os.lstat(board).st_mode) else os.lstat(board).st_mtime
    except OSError:
        return float("-inf")


def _remove(path: Path) -> None:
    mode = os.lstat(path).st_mode
    if stat.S_ISDIR(mode):
        shutil.rmtree(path)  # rmtree unlinks links inside as links and refuses a link as its root
    else:
        path.unlink()


def prune_boards(home: Path, *, ttl: float, artifact_retention: float, keep: Callable[[str], bool],
                 now: float | None = None) -> Pruned:
    """Remove the boards idle for `ttl` seconds, and the artifacts older than `artifact_retention` of a task
    whose board is idle that long too (0 = never), of every task `keep` does not protect. Nothing happens
    while the blackboard is switched off."""
    pruned = Pruned()
    if not blackboard_enabled():
        return pruned
    at = time.time() if now is None else now  # file times are wall-clock times
    try:
        tasks = list(os.scandir(tasks_dir(home)))
    except OSError:
        return pruned
    for entry in tasks:
        if not entry.is_dir(follow_symlinks=False) or keep(entry.name):
            continue
        task = Path(entry.path)
        board_written = _written(task / NOTES_DIR)  # read before the board itself may go
        for name, retention in ((NOTES_DIR, ttl), (ARTIFACTS_DIR, artifact_retention)):
            path = task / name
            if retention <= 0:
                continue
            try:
                if not stat.S_ISDIR(os.lstat(path).st_mode):
                    if os.lstat(path).st_mtime < at - retention:
                        path.unlink()  # a link or file where the directory belongs: removed as itself
                    continue
                if name == NOTES_DIR:
                    if _newest_mtime(path) < at - retention:
                        _remove(path)
                        pruned.boards.append(entry.name)
                    continue
                if board_written >= at - retention:
                    continue  # a board written lately may still point at its older artifacts
                for item in os.scandir(path):
                    if os.lstat(item.path).st_mtime < at - retention:
                        _remove(Path(item.path))
                        pruned.artifacts += 1
            except FileNotFoundError:
                continue
            except OSError as exc:
                log.warning("cannot prune %s: %s", path, exc)
    return pruned
