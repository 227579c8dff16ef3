"""Which files of a project the index reads, and reading one without trusting it.

The walk opens every directory by descriptor beneath its parent with O_NOFOLLOW (a directory swapped for a link
while the walk runs leads nowhere), skips hidden entries, links, FIFOs, sockets and devices, honours `.gitignore`,
`.ignore`, `.rgignore` (`workers/tools/ignore.py`, the walk `search_by_regex` shares) and `[codeseek] exclude`, and
counts what it skips and why. A file is read beneath the root with no link followed, non-blocking (a FIFO put in
its place answers at once), only when it is a regular file not larger than the cap, and never past the size the
walk saw plus one byte: a file that grows while read (or a 1 GB sparse file) costs one bounded read.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from yagent.workers.tools.beneath import PathEscape, default_resolution, open_beneath
from yagent.workers.tools.ignore import IgnoreRules

from .languages import TEXT_EXTENSIONS, language_of

__all__ = ["FileStat", "SkipReason", "Unreadable", "WalkResult", "read_source", "walk_project"]

BINARY_PROBE = 8192  # a NUL byte in the first this many bytes makes a file binary (as ripgrep and git decide)
LONG_LINE = 20_000  # a line this long marks a generated (minified, bundled) file
MAX_DEPTH = 64  # directories deeper than this are not walked (a link farm, a pathological tree)


class SkipReason:
    BINARY = "binary"
    TOO_LARGE = "larger than [codeseek] max_file_bytes"
    GENERATED = "generated (minified or one very long line)"
    LINK = "a symbolic link (not followed)"
    SPECIAL = "not a regular file (FIFO, socket, device)"
    UNREADABLE = "unreadable"
    OVER_LIMIT = "past [codeseek] max_files"
    TOO_DEEP = f"nested more than {MAX_DEPTH} directories deep"


@dataclass(frozen=True, slots=True)
class FileStat:
    path: str  # relative to the root, "/"-separated
    size: int
    mtime_ns: int
    inode: int


@dataclass(slots=True)
class WalkResult:
    files: list[FileStat] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)  # reason → count
    examples: dict[str, str] = field(default_factory=dict)  # reason → the first path skipped for it


class Unreadable(Exception):
    """A file the index does not take: `reason` is a `SkipReason`."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(detail or reason)
        self.reason = reason


def indexable(name: str) -> bool:
    return language_of(name) is not None or name.lower().endswith(TEXT_EXTENSIONS)


def walk_project(root: Path, *, max_file_bytes: int, max_files: int, exclude: Iterable[str] = ()) -> WalkResult:
    """Every file the index may read, in path order, with what was skipped."""
    result = WalkResult()
    rules = IgnoreRules(root, exclude)
    try:
        top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        result.skipped[SkipReason.UNREADABLE] += 1
        result.examples.setdefault(SkipReason.UNREADABLE, f". ({exc.strerror})")
        return result
    stack: list[tuple[int, str, int]] = [(os.dup(top), "", 0)]  # each entry's descriptor is closed once walked
    try:
        while stack:
            fd, rel_dir, depth = stack.pop()
            try:
                subdirs = _walk_dir(fd, rel_dir, depth, root, rules, result, max_file_bytes, max_files)
            finally:
                os.close(fd)
            for name in reversed(subdirs):  # depth first, in name order
                rel = f"{rel_dir}/{name}" if rel_dir else name
                try:
                    child = os.open(rel, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=top)
                except OSError as exc:
                    reason = SkipReason.LINK if exc.errno in (errno.ELOOP, errno.ENOTDIR) else SkipReason.UNREADABLE
                    _skip(result, reason, rel)
                    continue
                stack.append((child, rel, depth + 1))
    finally:
        for fd, _rel, _depth in stack:
            os.close(fd)
        os.close(top)
    return result


def _walk_dir(fd: int, rel_dir: str, depth: int, root: Path, rules: IgnoreRules, result: WalkResult,
              max_file_bytes: int, max_files: int) -> list[str]:
    try:
        with os.scandir(fd) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        _skip(result, SkipReason.UNREADABLE, rel_dir or ".")
        return []
    subdirs: list[str] = []
    for entry in entries:
        name = entry.name
        if name.startswith("."):
            continue
        rel = f"{rel_dir}/{name}" if rel_dir else name
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            _skip(result, SkipReason.UNREADABLE, rel)
            continue
        mode = info.st_mode
        if stat.S_ISDIR(mode):
            if rules.ignored_parts(tuple(rel.split("/")), True):
                continue
            if depth + 1 > MAX_DEPTH:
                _skip(result, SkipReason.TOO_DEEP, rel)
                continue
            subdirs.append(name)
            continue
        if stat.S_ISLNK(mode):  # to a file or a directory, in the project or out of it: never followed
            if not rules.ignored_parts(tuple(rel.split("/")), False):
                _skip(result, SkipReason.LINK, rel)
            continue
        if not indexable(name) or rules.ignored_parts(tuple(rel.split("/")), False):
            continue
        if not stat.S_ISREG(mode):
            _skip(result, SkipReason.SPECIAL, rel)
        elif info.st_size > max_file_bytes:
            _skip(result, SkipReason.TOO_LARGE, rel)
        elif len(result.files) >= max_files:
            _skip(result, SkipReason.OVER_LIMIT, rel)
        else:
            result.files.append(FileStat(rel, info.st_size, info.st_mtime_ns, info.st_ino))
    return subdirs


def _skip(result: WalkResult, reason: str, rel: str) -> None:
    result.skipped[reason] += 1
    result.examples.setdefault(reason, rel)


def read_source(root_fd: int, rel: str, max_file_bytes: int) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file `rel` beneath the directory `root_fd`; `Unreadable` saying why not."""
    try:
        fd = open_beneath(root_fd, rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY,
                          follow_links=False, resolution=default_resolution())
    except PathEscape as exc:
        raise Unreadable(SkipReason.LINK, str(exc)) from None
    except OSError as exc:
        reason = SkipReason.LINK if exc.errno == errno.ELOOP else SkipReason.UNREADABLE
        raise Unreadable(reason, exc.strerror or str(exc)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Unreadable(SkipReason.SPECIAL)
        if info.st_size > max_file_bytes:
            raise Unreadable(SkipReason.TOO_LARGE)
        chunks: list[bytes] = []
        left = max_file_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
    except OSError as exc:
        raise Unreadable(SkipReason.UNREADABLE, exc.strerror or str(exc)) from None
    finally:
        os.close(fd)
    if len(data) > max_file_bytes:
        raise Unreadable(SkipReason.TOO_LARGE)
    if b"\x00" in data[:BINARY_PROBE]:
        raise Unreadable(SkipReason.BINARY)
    if _generated(data):
        raise Unreadable(SkipReason.GENERATED)
    return data, info


def _generated(data: bytes) -> bool:
    if len(data) < LONG_LINE:
        return False
    start = 0
    while start < len(data):  # any line of LONG_LINE bytes: find() runs in C, no split of the whole file
        end = data.find(b"\n", start)
        if end < 0:
            end = len(data)
        if end - start >= LONG_LINE:
            return True
        start = end + 1
    return False
