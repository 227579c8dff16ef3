"""The files a write lands on inside directories git ignores, named to the daemon before the write.

A checkpoint reads tracked, untracked and stand-alone ignored files, but not what lies in a wholly ignored directory
(`build/`, `node_modules/`: reading those would cost every checkpoint the whole directory). So before a file tool
writes there, the run names the files to the daemon, which adds their content as it is then to the run's
checkpoints and reads them in every later capture (`daemon/checkpoints.py`): an undo then puts such a file back,
or removes it when the agent made it. What decides is what git reads: the `.gitignore` files from the top of the
worktree the project lies in down, and its `.git/info/exclude`; a directory ignored only by the user's global
excludes file is not seen. Commands (`run_bash`) are not covered: what a command will write is not known before it
runs.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from yagent.ipc.noted_paths import MAX_NOTED_PATHS, plain_project_path

from .ignore import IgnoreRules, read_ignore_lines

__all__ = ["IgnoredWrites"]

GIT_IGNORE_FILES = (".gitignore",)


def _worktree_top(root: Path) -> Path:
    """The top of the git worktree the project lies in: the nearest directory from the root up holding `.git`."""
    for here in (root, *root.parents):
        if os.path.lexists(here / ".git"):
            return here
    return root


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


class IgnoredWrites:
    """One run's view: which files a write names lie inside ignored directories and are not named yet."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.top = _worktree_top(root)
        self._rules: IgnoreRules | None = None
        self._named: set[str] = set()
        self.cut = 0  # files a directory walk left unnamed past the cap, in the last `to_name`

    def _in_ignored_directory(self, path: Path) -> bool:
        """Whether a directory on the way from the worktree's top to `path` is one git ignores as a whole (a file
        ignored on its own is read by every capture already)."""
        if self._rules is None:
            excludes = read_ignore_lines(self.top / ".git" / "info" / "exclude")  # the repository's own
            self._rules = IgnoreRules(self.top, excludes, kinds=GIT_IGNORE_FILES)
        parts = path.relative_to(self.top).parts
        return any(self._rules.ignored_parts(parts[:i], True) for i in range(1, len(parts)))

    def _beneath(self, directory: Path) -> Iterator[Path]:
        """The files under `directory` (a directory being moved), links not followed, at most the cap."""
        seen = 0
        for here, dirs, files in os.walk(directory):
            dirs.sort()
            for name in sorted(files):
                seen += 1
                if seen > MAX_NOTED_PATHS:
                    self.cut += 1
                    continue
                yield Path(here, name)

    def to_name(self, named: Iterable[Path], resolved: Iterable[Path] = ()) -> list[str]:
        """The project-relative files not named yet that lie in ignored directories: of the paths as the call names
        them (a directory among them as the files beneath it), and of where they lead (as files: a link's target
        directory is not what a delete or move of the link touches)."""
        self.cut = 0
        named = list(named)
        walked = [path for path in named if path != self.root and _is_dir(path)]
        # The files named and where they lead first: past the cap, what is cut is a moved directory's content.
        candidates = [path for path in named if path not in walked]
        candidates += [path for path in resolved if not _is_dir(path)]
        for directory in walked:
            candidates.extend(self._beneath(directory))
        found: dict[str, None] = {}  # in order, once each
        for path in candidates:
            if path == self.root or not path.is_relative_to(self.root):
                continue
            rel = path.relative_to(self.root).as_posix()
            if rel in self._named or rel in found or not plain_project_path(rel):
                continue
            if self._in_ignored_directory(path):
                found[rel] = None
        if len(found) > MAX_NOTED_PATHS:
            self.cut += len(found) - MAX_NOTED_PATHS
        return list(found)[:MAX_NOTED_PATHS]

    def named(self, rels: Iterable[str]) -> None:
        self._named.update(rels)
