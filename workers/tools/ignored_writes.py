"""The files a write lands on inside directories git ignores, named to the daemon before the write.

A checkpoint reads tracked, untracked and stand-alone ignored files, but not what lies in a wholly ignored directory
(`build/`, `node_modules/`: reading those would cost every checkpoint the whole directory). So before a file tool
writes there, the run names the files to the daemon, which adds their content as it is then to the run's
checkpoints and reads them in every later capture (`daemon/checkpoints.py`): an undo then puts such a file back,
or removes it when the agent made it. The project's ignore files (and `.git/info/exclude`) decide, read as the
search tools read them; a directory ignored only by the user's global excludes file is not seen. Commands
(`run_bash`) are not covered: what a command will write is not known before it runs.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from yagent.ipc.noted_paths import MAX_NOTED_PATHS, plain_project_path

from .ignore import MAX_IGNORE_FILE_BYTES, IgnoreRules

__all__ = ["IgnoredWrites"]

log = logging.getLogger(__name__)


def _exclude_patterns(root: Path) -> list[str]:
    """The repository's own excludes (`.git/info/exclude`), when the project is its top and it can be read."""
    try:
        fd = os.open(root / ".git" / "info" / "exclude", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return []
        raw = os.read(fd, MAX_IGNORE_FILE_BYTES)
    except OSError:
        return []
    finally:
        os.close(fd)
    return raw.decode("utf-8", "replace").splitlines()


class IgnoredWrites:
    """One run's view: which of the paths a write names lie in ignored directories and are not named yet."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._rules: IgnoreRules | None = None
        self._named: set[str] = set()

    def _ignored(self, parts: tuple[str, ...]) -> bool:
        if self._rules is None:
            self._rules = IgnoreRules(self.root, _exclude_patterns(self.root))
        rules = self._rules
        return rules.ignored_parts(parts, False) or any(rules.ignored_parts(parts[:i], True)
                                                        for i in range(1, len(parts)))

    def _files(self, path: Path) -> Iterable[str]:
        """`path`'s project-relative name, or the files beneath it when it is a directory (links not followed)."""
        if path == self.root or not path.is_relative_to(self.root):
            return
        rel = path.relative_to(self.root).as_posix()
        try:
            is_dir = stat.S_ISDIR(os.lstat(path).st_mode)
        except OSError:
            is_dir = False
        if not is_dir:
            yield rel
            return
        seen = 0
        for top, dirs, files in os.walk(path):
            dirs.sort()
            for name in sorted(files):
                seen += 1
                if seen > MAX_NOTED_PATHS:
                    return
                yield Path(top, name).relative_to(self.root).as_posix()

    def to_name(self, paths: Iterable[Path]) -> list[str]:
        """The files of `paths` inside ignored directories this run has not named yet."""
        found: list[str] = []
        for path in paths:
            for rel in self._files(path):
                if rel not in self._named and rel not in found and plain_project_path(rel) and \
                        self._ignored(tuple(rel.split("/"))):
                    found.append(rel)
        return found[:MAX_NOTED_PATHS]

    def named(self, rels: Iterable[str]) -> None:
        self._named.update(rels)
