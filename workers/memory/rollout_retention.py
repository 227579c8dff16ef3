"""Rollout retention (`[resume] rollout_retention`): old rollouts of a task go, what a resume needs stays.

Run by the task's Director worker as its turn starts, on its own task's directory only (the one a worker may
write), before its own rollout is opened. Kept whatever their age: the newest root run's rollout and the
rollouts of every run delegated under it (the turn a resume would pick up). Everything else unwritten for
longer than the retention is removed; only regular files, never through a symlink, nor in a directory that is
one (a run may write its task's directory: a link there would aim the removal elsewhere). A removed rollout's run
takes its thinklink log (`thinklink/{run}.jsonl`) along: nothing resumes that run any more.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import time
from pathlib import Path

from yagent.ipc.state_files import is_own_dir
from yagent.ipc.state_layout import ROLLOUT_DIR, THINKLINK_DIR

from .replay import first_record
from .rollout_records import RolloutRecord

__all__ = ["prune_rollouts"]

log = logging.getLogger(__name__)


def _run_and_parent(path: Path) -> tuple[str, str] | None:
    rec = first_record(path)
    if rec is None or rec.get("type") != RolloutRecord.SESSION_META:
        return None
    payload = rec["payload"]
    return str(payload.get("run") or ""), str(payload.get("parent_session_id") or "")


def prune_rollouts(task_dir: Path, retention: float, *, now: float | None = None) -> list[Path]:
    """Remove the task's expired rollouts (retention 0 = keep forever); the paths removed. Never raises."""
    if retention <= 0:
        return []
    directory = task_dir / ROLLOUT_DIR
    now = time.time() if now is None else now
    if not _own_dir(directory):
        return []
    try:
        entries = sorted(p for p in directory.iterdir() if p.name.endswith(".jsonl"))
    except OSError:
        return []
    files: dict[Path, os.stat_result] = {}
    for path in entries:
        with contextlib.suppress(OSError):
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode):
                files[path] = st
    identity = {path: _run_and_parent(path) for path in files}
    roots = [p for p, ident in identity.items() if ident is not None and not ident[1]]
    keep: set[Path] = set()
    if roots:
        newest = roots[-1]  # names start with the time stamp
        runs = {identity[newest][0]}  # type: ignore[index]
        keep.add(newest)
        grew = True
        while grew:  # children, their children...
            grew = False
            for path, ident in identity.items():
                if path not in keep and ident is not None and ident[1] in runs:
                    keep.add(path)
                    runs.add(ident[0])
                    grew = True
    removed = []
    logs: bool | None = None  # whether thinklink/ may be removed in: looked at once, when a log is to go
    for path, st in files.items():
        if path in keep or now - st.st_mtime < retention:
            continue
        with contextlib.suppress(OSError):
            path.unlink()
            removed.append(path)
            ident = identity[path]
            if ident is not None and ident[0] and "/" not in ident[0] and not ident[0].startswith("."):
                if logs is None:
                    logs = _own_dir(task_dir / THINKLINK_DIR)
                if logs:
                    _remove_regular(task_dir / THINKLINK_DIR / f"{ident[0]}.jsonl")
    return removed


def _own_dir(directory: Path) -> bool:
    """Whether `directory` is a directory itself (not a link to one): nothing is listed or removed in it otherwise."""
    if is_own_dir(directory):
        return True
    if not os.path.lexists(directory):
        return False
    found = "a symbolic link" if os.path.islink(directory) else "not a directory"
    log.warning("%s is %s, not yagent's directory: nothing is pruned through it; something other than yagent put "
                "it there (a run may write its task's directory): remove it (it is made again)", directory, found)
    return False


def _remove_regular(path: Path) -> None:
    with contextlib.suppress(OSError):
        if stat.S_ISREG(os.lstat(path).st_mode):
            path.unlink()
