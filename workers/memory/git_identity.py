"""The project's git identity (head sha, branch, dirty), read from `.git` itself without running git.

A confined worker may read the project but not execute anything its sandbox would refuse, and a checkpoint
is written on the way out (a cancel, a lost daemon), where starting a process is the last thing to do. So
HEAD, refs and packed-refs are read as files, and "dirty" is git's own first look: a tracked file whose
size or modification time differs from what the index recorded, or that is gone. Untracked files do not
count; an index format this reader does not know gives `dirty=None` (unknown), never a guess.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

__all__ = ["GitIdentity", "read_git_identity"]

_MAX_INDEX_BYTES = 256 * 1024 * 1024  # a bigger index is not read: dirty stays unknown


@dataclass(frozen=True, slots=True)
class GitIdentity:
    sha: str = ""  # "" outside a git repository (or with no commit yet)
    branch: str = ""  # "" on a detached head
    dirty: bool | None = None  # None: not known (no repository, an index this reader cannot parse)

    def to_dict(self) -> dict[str, object]:
        return {"sha": self.sha, "branch": self.branch, "dirty": self.dirty}

    @classmethod
    def from_dict(cls, data: object) -> GitIdentity:
        if not isinstance(data, dict):
            return cls()
        dirty = data.get("dirty")
        return cls(sha=str(data.get("sha") or ""), branch=str(data.get("branch") or ""),
                   dirty=dirty if isinstance(dirty, bool) else None)


def _git_dir(root: Path) -> Path | None:
    dot = root / ".git"
    if dot.is_dir():
        return dot
    try:  # a worktree or submodule: `.git` is a file naming the real directory
        text = dot.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    if text.startswith("gitdir:"):
        target = Path(text.removeprefix("gitdir:").strip())
        return target if target.is_absolute() else (root / target)
    return None


def _common_dir(git_dir: Path) -> Path:
    try:
        text = (git_dir / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        return git_dir
    path = Path(text)
    return path if path.is_absolute() else git_dir / path


def _resolve_ref(git_dir: Path, ref: str) -> str:
    common = _common_dir(git_dir)
    for base in (git_dir, common):
        try:
            return (base / ref).read_text(encoding="utf-8").strip()
        except OSError:
            continue
    try:
        packed = (common / "packed-refs").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    for line in packed.splitlines():
        parts = line.split(" ", 1)
        if len(parts) == 2 and parts[1].strip() == ref:
            return parts[0].strip()
    return ""


def _index_dirty(root: Path, index: Path) -> bool | None:
    try:
        if index.stat().st_size > _MAX_INDEX_BYTES:
            return None
        data = index.read_bytes()
    except FileNotFoundError:
        return False  # no index: nothing is tracked yet
    except OSError:
        return None
    if len(data) < 12 or data[:4] != b"DIRC":
        return None
    version, count = struct.unpack(">II", data[4:12])
    if version not in (2, 3):
        return None  # v4 compresses paths; unknown rather than wrong
    pos = 12
    for _ in range(count):
        if pos + 62 > len(data):
            return None
        (_cs, _cn, mtime_s, _mn, _dev, _ino, mode, _uid, _gid, size) = struct.unpack(">10I", data[pos:pos + 40])
        flags = struct.unpack(">H", data[pos + 60:pos + 62])[0]
        name_start = pos + 62
        if version == 3 and flags & 0x4000:
            name_start += 2
        end = data.find(b"\0", name_start)
        if end < 0:
            return None
        name = data[name_start:end]
        pos += ((end - pos) // 8 + 1) * 8  # entries are padded with NULs to a multiple of 8 bytes
        if mode & 0o170000 == 0o160000:
            continue  # a submodule: its own repository
        try:
            st = os.lstat(root / os.fsdecode(name))
        except OSError:
            return True  # a tracked file is gone
        if st.st_size & 0xFFFFFFFF != size or int(st.st_mtime) & 0xFFFFFFFF != mtime_s:
            return True
    return False


def read_git_identity(root: Path) -> GitIdentity:
    """The identity of the repository at `root`; an empty one outside a repository. Never raises."""
    try:
        git_dir = _git_dir(root)
        if git_dir is None:
            return GitIdentity()
        head = (git_dir / "HEAD").read_text(encoding="utf-8").strip()
        if head.startswith("ref:"):
            ref = head.removeprefix("ref:").strip()
            return GitIdentity(sha=_resolve_ref(git_dir, ref), branch=ref.removeprefix("refs/heads/"),
                               dirty=_index_dirty(root, git_dir / "index"))
        return GitIdentity(sha=head, branch="", dirty=_index_dirty(root, git_dir / "index"))
    except (OSError, ValueError, struct.error):
        return GitIdentity()
