"""Which files a directory walk visits: the ripgrep defaults, reimplemented for the Python fallback.

Hidden entries are skipped, `.gitignore`, `.ignore` and `.rgignore` files are honoured (a practical subset
of their syntax: `!` negation, trailing `/`, anchored patterns, `*`, `?`, `**`, character classes), symlinks
are not followed, and siblings are visited in name order, depth first — the order `rg --sort path` prints.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class _Pattern:
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool
    anchored: bool


# ripgrep's ignore files, strongest first: a match in `.rgignore` (at any level) decides before `.ignore`,
# and `.ignore` before `.gitignore`; within one kind the deepest, last matching pattern wins.
IGNORE_FILES = (".rgignore", ".ignore", ".gitignore")
# An ignore file larger than this is read only this far (it is the project's file: a FIFO, a device or a huge file
# named .gitignore must cost a walk nothing).
MAX_IGNORE_FILE_BYTES = 1024 * 1024


class IgnoreRules:
    """Evaluates `.rgignore`, `.ignore` and `.gitignore` files from the walk root down, as ripgrep does."""

    def __init__(self, root: Path, extra: Iterable[str] = (), kinds: tuple[str, ...] = IGNORE_FILES):
        self.root = root
        self._kinds = kinds  # which of IGNORE_FILES count (git reads `.gitignore` alone)
        # By the directory's path relative to the root ("" for the root) and the file's name: strings, not Paths,
        # since a walk asks this for every entry.
        self._cache: dict[tuple[str, str], list[_Pattern]] = {}
        # By a directory's parts: per ignore-file kind, the (depth, patterns) of it and its ancestors that have any —
        # its entries then skip the many directories without ignore files instead of looking each one up again.
        self._layers: dict[tuple[str, ...], tuple[tuple[tuple[int, list[_Pattern]], ...], ...]] = {}
        # Patterns the configuration adds (`[codeseek] exclude`): read as if from the root, deciding first.
        self._extra = parse_patterns(extra)

    def ignored(self, path: Path, is_dir: bool) -> bool:
        """True when the ignore files between the root and `path` (and the extra patterns) exclude it."""
        return self.ignored_parts(path.relative_to(self.root).parts, is_dir)

    def ignored_parts(self, parts: tuple[str, ...], is_dir: bool) -> bool:
        """`ignored` for the path of `parts` (its names from the root down)."""
        if not parts:  # the root itself: what its ignore files say is about what lies beneath it
            return False
        if self._extra:
            verdict = _match(self._extra, parts, is_dir)
            if verdict is not None:
                return verdict
        for layers in self._layers_of(parts[:-1]):
            verdict = _verdict(layers, parts, is_dir)
            if verdict is not None:
                return verdict
        return False

    def _layers_of(self, directory: tuple[str, ...]) -> tuple[tuple[tuple[int, list[_Pattern]], ...], ...]:
        found = self._layers.get(directory)
        if found is None:
            found = self._layers[directory] = tuple(
                tuple((depth, patterns) for depth in range(len(directory) + 1)
                      if (patterns := self._patterns("/".join(directory[:depth]), kind)))
                for kind in self._kinds)
        return found

    def _patterns(self, directory: str, kind: str) -> list[_Pattern]:
        key = (directory, kind)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = _load(self.root / directory / kind)
        return found


def walk_files(start: Path, ignore_root: Path, *, max_file_bytes: int | None = None) -> Iterator[Path]:
    """Files under `start` (or `start` itself) in ripgrep's sorted order, skipping hidden and ignored ones.

    `.gitignore` files are read from `ignore_root` (the project root) down, when `start` lies inside it.
    """
    if start.is_file():
        yield start
        return
    rules = IgnoreRules(ignore_root if start.is_relative_to(ignore_root) else start)
    yield from _walk(start, rules, max_file_bytes)


def visible_entries(directory: Path, rules: IgnoreRules) -> list[os.DirEntry[str]]:
    """Entries of `directory` a walk would visit, sorted by name."""
    try:
        with os.scandir(directory) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return []
    out = []
    for entry in entries:
        if entry.name.startswith(".") or entry.is_symlink():
            continue
        if rules.ignored(Path(entry.path), entry.is_dir(follow_symlinks=False)):
            continue
        out.append(entry)
    return out


def _walk(directory: Path, rules: IgnoreRules, max_file_bytes: int | None) -> Iterator[Path]:
    for entry in visible_entries(directory, rules):
        if entry.is_dir(follow_symlinks=False):
            yield from _walk(Path(entry.path), rules, max_file_bytes)
        elif entry.is_file(follow_symlinks=False) and (
            max_file_bytes is None or entry.stat(follow_symlinks=False).st_size <= max_file_bytes
        ):
            yield Path(entry.path)


def _verdict(layers: tuple[tuple[int, list[_Pattern]], ...], parts: tuple[str, ...], is_dir: bool) -> bool | None:
    """One kind of ignore file's say on `parts`: the deepest, last matching pattern wins."""
    verdict = None
    for depth, patterns in layers:
        rel = "/".join(parts[depth:])
        for pat in patterns:
            if pat.dir_only and not is_dir:
                continue
            if pat.regex.fullmatch(rel if pat.anchored else parts[-1]):
                verdict = not pat.negate
    return verdict


def _match(patterns: list[_Pattern], parts: tuple[str, ...], is_dir: bool) -> bool | None:
    verdict = None
    rel = "/".join(parts)
    for pat in patterns:
        if pat.dir_only and not is_dir:
            continue
        if pat.regex.fullmatch(rel if pat.anchored else parts[-1]):
            verdict = not pat.negate
    return verdict


def read_ignore_lines(path: Path) -> list[str]:
    """The lines of an ignore file: a regular file only, never waiting on a FIFO, and only its first
    MAX_IGNORE_FILE_BYTES; none when it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return []
        data = os.read(fd, MAX_IGNORE_FILE_BYTES)
    except OSError:
        return []
    finally:
        os.close(fd)
    return data.decode("utf-8", "replace").splitlines()


def _load(path: Path) -> list[_Pattern]:
    return parse_patterns(read_ignore_lines(path))


def parse_patterns(lines: Iterable[str]) -> list[_Pattern]:
    """Patterns in .gitignore syntax, one a line (comments and blank lines skipped)."""
    patterns = []
    for raw in lines:
        line = raw.rstrip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        line = line[1:] if negate else line
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        anchored = "/" in line
        line = line.lstrip("/")
        if line:
            patterns.append(_Pattern(re.compile(_glob_to_regex(line)), negate, dir_only, anchored))
    return patterns


def _glob_to_regex(glob: str) -> str:
    out, i = [], 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        elif glob[i] == "[" and "]" in glob[i + 1 :]:
            end = glob.index("]", i + 1)
            body = glob[i + 1 : end].replace("\\", "\\\\")
            out.append(f"[{'^' + body[1:] if body.startswith('!') else body}]")
            i = end + 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return "".join(out)


def glob_matches(glob: str, rel_path: str) -> bool:
    """ripgrep `--glob` semantics for one path relative to the search root (`!` negates)."""
    negate = glob.startswith("!")
    glob = glob[1:] if negate else glob
    subject = rel_path if "/" in glob else rel_path.rsplit("/", 1)[-1]
    hit = re.fullmatch(_glob_to_regex(glob.lstrip("/")), subject) is not None
    return hit != negate
