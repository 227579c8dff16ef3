"""Reading skill files that anyone may have put there: a cloned project's `.claude/skills` is not the user's.

One file is read only if it is a regular file of at most `MAX_SKILL_BYTES`, resolved beneath the directory it
was found in, and opened without following a link (a link swapped in after the check fails the open instead
of being followed); it is opened without blocking, so a named pipe never holds the reader. What lies beside a
skill's `SKILL.md` is listed by name, never read and never followed through a link.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import itertools
import os
import stat
from dataclasses import dataclass

__all__ = ["MAX_LISTED_FILES", "MAX_SKILL_BYTES", "SkillFileError", "SkillFiles", "beneath", "list_skill_files",
           "read_skill_text", "shown_path"]

MAX_SKILL_BYTES = 512 * 1024  # a skill is a page or two of instructions; past this it is data, not a skill
MAX_LISTED_FILES = 200
_MAX_LISTED_DEPTH = 4
_MAX_SCANNED = 1000  # entries read of one directory before they are sorted


class SkillFileError(Exception):
    """A skill file that is not read: `path` (as found) and the reason, which says what it is and what to do."""

    def __init__(self, reason: str, path: str = "") -> None:
        super().__init__(reason)
        self.path = path


def shown_path(path: str) -> str:
    """`path` as a message may print it: undecodable bytes and control characters escaped."""
    text = path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def beneath(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return kind
    return "not a regular file"


def _size(n: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f}".rstrip("0").rstrip(".") + f" {unit}"
    return f"{n} bytes"


def read_skill_text(path: str, *, within: str, head: int | None = None) -> tuple[str, str]:
    """(the text, a digest of its bytes) of the skill file `path`, which must resolve beneath `within` (a resolved
    directory); `SkillFileError` saying why it is not read. With `head`, only that many bytes are read (what a
    catalogue needs: the front matter and the first line), and the digest is of those."""
    want = MAX_SKILL_BYTES + 1 if head is None else min(head, MAX_SKILL_BYTES + 1)
    real = os.path.realpath(path)
    if not beneath(real, within):
        raise SkillFileError(f"leads to {shown_path(real)}, outside {shown_path(within)}; a skill is read only from "
                             "inside its skills directory", path)
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SkillFileError("is a link that leads nowhere, or became a link while it was read; not followed",
                                 path) from None
        with contextlib.suppress(OSError):
            mode = os.stat(real).st_mode
            if not stat.S_ISREG(mode):  # a socket cannot even be opened
                raise SkillFileError(f"is {_kind(mode)}, not a regular file", path) from None
        raise SkillFileError(f"cannot be read: {exc.strerror}", path) from None
    try:
        opened = _opened_path(fd)
        if opened is not None and not beneath(opened, within):  # a directory on the way was swapped for a link
            raise SkillFileError(f"was moved outside {shown_path(within)} while it was read; not read", path)
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SkillFileError(f"is {_kind(info.st_mode)}, not a regular file", path)
        if info.st_size > MAX_SKILL_BYTES:
            raise SkillFileError(f"is {_size(info.st_size)}; a skill file is read up to {_size(MAX_SKILL_BYTES)} — "
                                 "keep long material in files beside SKILL.md", path)
        chunks: list[bytes] = []
        size = 0
        while size < want and (chunk := os.read(fd, want - size)):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise SkillFileError(f"cannot be read: {exc.strerror}", path) from None
    finally:
        os.close(fd)
    if size > MAX_SKILL_BYTES:  # it grew after the stat
        raise SkillFileError(f"is larger than {_size(MAX_SKILL_BYTES)}, the most a skill file is read up to",
                             path)
    raw = b"".join(chunks)
    try:
        # A head may end inside a character: at most its last three bytes are left out.
        text = raw.decode("utf-8") if size < want or head is None else _decode_head(raw)
    except UnicodeDecodeError as exc:
        raise SkillFileError(f"is not UTF-8 text (byte {exc.start}); save it as UTF-8", path) from None
    return text, hashlib.sha256(raw).hexdigest()[:16]


def _decode_head(raw: bytes) -> str:
    for cut in range(4):
        try:
            return raw[:len(raw) - cut].decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.start < len(raw) - 4 or cut == 3:
                raise
    raise AssertionError("unreachable")


def _opened_path(fd: int) -> str | None:
    """Where the kernel says `fd` lies (None where /proc cannot tell)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


@dataclass(frozen=True, slots=True)
class SkillFiles:
    names: tuple[str, ...]  # relative to the skill's directory; a directory ends with `/`, a link says so
    more: bool = False  # there were more than MAX_LISTED_FILES


def list_skill_files(folder: str, *, leave_out: str = "SKILL.md") -> SkillFiles:
    """What lies beside a skill's `SKILL.md` in `folder` (a resolved directory), by name, breadth-first, at most
    `MAX_LISTED_FILES` entries and four levels down; links are named, never followed; hidden entries left out."""
    names: list[str] = []
    queue: list[tuple[str, int]] = [("", 0)]
    while queue:
        rel, depth = queue.pop(0)
        try:
            with os.scandir(os.path.join(folder, rel) if rel else folder) as it:
                # A folder of a million files costs no more than its first few hundred.
                entries = sorted(itertools.islice(it, _MAX_SCANNED), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith(".") or (not rel and entry.name == leave_out):
                continue
            if len(names) >= MAX_LISTED_FILES:
                return SkillFiles(tuple(names), more=True)
            name = shown_path(os.path.join(rel, entry.name))
            if entry.is_symlink():
                names.append(f"{name} (a link, not followed)")
            elif entry.is_dir(follow_symlinks=False):
                names.append(name + "/")
                if depth + 1 < _MAX_LISTED_DEPTH:
                    queue.append((os.path.join(rel, entry.name), depth + 1))
            else:
                names.append(name)
    return SkillFiles(tuple(names))
