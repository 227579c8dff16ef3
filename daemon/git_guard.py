"""`.git/hooks` and `.git/config` of a project a confined run may write, put back as they were after the run.

Landlock grants a whole tree, so a run allowed to write the project can write its `.git` too; a hook it plants
(or a `core.hooksPath`, `core.fsmonitor`, alias it sets) runs unconfined the next time the user runs git.
The daemon takes a copy of both when such a run is launched and, once the run's processes are all gone,
reverts whatever changed and says so on the task. Bounded: a hooks directory too large to copy is reported
as unguarded rather than read.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["WRITES_PROJECT", "GitSnapshot", "git_protection", "revert_changes", "snapshot", "writes_project"]

# The agent kinds whose workers may write the project (workers/tools/profiles.py decides; this mirrors it,
# pinned by tests/sandbox/test_git_guard.py): only their runs are checked. A `family:instance` kind (a
# workflow's `node:fiction:writer`) is known by its family, as `workers.sandbox.writes_project` knows it.
WRITES_PROJECT = frozenset({"coding", "node", "workflow"})


def writes_project(agent: str) -> bool:
    return agent in WRITES_PROJECT or agent.split(":", 1)[0] in WRITES_PROJECT
MAX_FILES = 512
MAX_BYTES = 8 << 20


def git_protection(namespace: bool) -> str:
    """What protects a writing run's .git, for the daemon's log."""
    if namespace:
        return (".git/hooks and .git/config are read-only inside the run (a private mount namespace; a worker "
                "that cannot make one says so in this log), and checked and put back after it")
    return (".git/hooks and .git/config are checked and put back after the run only (no unprivileged user "
            "namespaces here: the run can change them while it lasts)")


@dataclass
class GitSnapshot:
    git_dir: Path
    config: bytes | None  # None: there was no config file
    config_mode: int = 0o644
    hooks: dict[str, tuple[str, bytes, int]] = field(default_factory=dict)  # name -> (kind, content, mode)
    hooks_existed: bool = True
    # `commondir` makes git take config and hooks from the directory it names: a run that writes one
    # redirects both past any protection of the two.
    commondir: bytes | None = None
    commondir_mode: int = 0o644


def snapshot(project: Path) -> GitSnapshot | None:
    """A copy of the project's `.git/config` and `.git/hooks` (None: no `.git` directory, or too large)."""
    git_dir = project / ".git"
    try:
        if not stat.S_ISDIR(os.lstat(git_dir).st_mode):
            return None  # a worktree's or submodule's gitlink: its git dir lies elsewhere
    except OSError:
        return None
    config, mode = _read(git_dir / "config")
    snap = GitSnapshot(git_dir, config, mode)
    snap.commondir, snap.commondir_mode = _read(git_dir / "commondir")
    hooks = git_dir / "hooks"
    snap.hooks_existed = hooks.is_dir() and not hooks.is_symlink()
    total = 0
    if snap.hooks_existed:
        for dirpath, _dirs, files in os.walk(hooks):
            for name in files:
                path = Path(dirpath) / name
                entry = _entry(path)
                if entry is None:
                    continue
                total += len(entry[1])
                if len(snap.hooks) >= MAX_FILES or total > MAX_BYTES:
                    return None
                snap.hooks[str(path.relative_to(hooks))] = entry
    return snap


def revert_changes(snap: GitSnapshot) -> list[str]:
    """Put config and hooks back as `snap` has them; returns what was changed (empty: nothing was)."""
    changed: list[str] = []
    for name, content, mode in (("config", snap.config, snap.config_mode),
                                ("commondir", snap.commondir, snap.commondir_mode)):
        if _revert_file(snap.git_dir / name, content, mode):
            changed.append(f".git/{name}")
    hooks = snap.git_dir / "hooks"
    if not snap.hooks_existed:
        if os.path.lexists(hooks):
            changed.append(".git/hooks (created)")
            _remove(hooks)
        return changed
    if hooks.is_symlink() or not hooks.is_dir():
        changed.append(".git/hooks (replaced)")
        _remove(hooks)
        hooks.mkdir()
    present: set[str] = set()
    for dirpath, _dirs, files in os.walk(hooks):
        for name in files:
            path = Path(dirpath) / name
            rel = str(path.relative_to(hooks))
            present.add(rel)
            if rel not in snap.hooks:
                changed.append(f".git/hooks/{rel} (added)")
                _remove(path)
            elif _entry(path) != snap.hooks[rel]:
                changed.append(f".git/hooks/{rel} (changed)")
                _restore(path, snap.hooks[rel])
    for rel, entry in snap.hooks.items():
        if rel not in present:
            changed.append(f".git/hooks/{rel} (removed)")
            _restore(hooks / rel, entry)
    return changed


def _revert_file(path: Path, content: bytes | None, mode: int) -> bool:
    """Put one file back (None: there was none); whether it had changed."""
    if _read(path) == (content, mode) and not path.is_symlink():
        return False
    _remove(path)
    if content is not None:
        _write(path, content, mode)
    return True


def _read(path: Path) -> tuple[bytes | None, int]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None, 0o644
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_BYTES:
            return b"<not a regular file or too large>", 0
        with os.fdopen(os.dup(fd), "rb") as fh:
            return fh.read(MAX_BYTES + 1), stat.S_IMODE(info.st_mode)
    finally:
        os.close(fd)


def _entry(path: Path) -> tuple[str, bytes, int] | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return ("link", os.readlink(path).encode(), 0)
    content, mode = _read(path)
    return ("file", content or b"", mode)


def _restore(path: Path, entry: tuple[str, bytes, int]) -> None:
    kind, content, mode = entry
    _remove(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "link":
        os.symlink(content.decode(), path)
    else:
        _write(path, content, mode)


def _write(path: Path, content: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(content)
    os.chmod(path, mode)


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
