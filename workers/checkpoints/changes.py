"""What differs between two checkpoints: per file, how (added, modified, deleted, type), lines added and removed,
and, when asked, the unified diff — by git's own `diff-tree`, without external diff programs or textconv filters
(`--no-ext-diff --no-textconv`: both are commands a configuration could name). Renames are shown as a deletion and
an addition, which is also how a rollback treats them.

Patches share one budget (`PATCH_BUDGET`); past it a file keeps its counts and loses its patch, and the change set
says so, so a reply always fits one frame.
"""

from __future__ import annotations

from dataclasses import dataclass

from yagent.ipc.messages import ChangeSet, FileChange
from yagent.ipc.vocabulary import ChangeKind

from .git_runner import GitRunner

__all__ = ["PATCH_BUDGET", "RawChange", "change_set", "raw_changes"]

PATCH_BUDGET = 2 * 1024 * 1024  # characters of patches in one reply
GITLINK = "160000"
_KIND = {"A": ChangeKind.ADDED, "M": ChangeKind.MODIFIED, "D": ChangeKind.DELETED, "T": ChangeKind.TYPE}


@dataclass(frozen=True, slots=True)
class RawChange:
    path: str
    kind: ChangeKind
    old_mode: str
    new_mode: str
    new_blob: str

    @property
    def submodule(self) -> bool:
        return GITLINK in (self.old_mode, self.new_mode)


def raw_changes(git: GitRunner, a: str, b: str, pathspec: str) -> list[RawChange]:
    """Every file that differs between commits (or trees) `a` and `b` within `pathspec`."""
    out = git.run(["diff-tree", "-r", "-z", "--no-renames", "--raw", "--no-abbrev", a, b, "--", pathspec])
    parts = out.split(b"\0")
    found: list[RawChange] = []
    i = 0
    while i + 1 < len(parts):
        meta, path = parts[i].decode("ascii", "replace"), parts[i + 1].decode("utf-8", "surrogateescape")
        i += 2
        if not meta.startswith(":"):
            continue
        fields = meta[1:].split()
        if len(fields) < 5:
            continue
        kind = _KIND.get(fields[4][:1])
        if kind is not None:
            found.append(RawChange(path, kind, fields[0], fields[1], fields[3]))
    return found


def _numstat(git: GitRunner, a: str, b: str, pathspec: str) -> dict[str, tuple[bool, int, int]]:
    out = git.run(["diff-tree", "-r", "-z", "--no-renames", "--numstat", "--no-ext-diff", "--no-textconv", a, b,
                   "--", pathspec])
    counts: dict[str, tuple[bool, int, int]] = {}
    for entry in out.split(b"\0"):
        fields = entry.split(b"\t", 2)
        if len(fields) != 3:
            continue
        added, removed, path = fields
        binary = added == b"-"
        counts[path.decode("utf-8", "surrogateescape")] = (
            binary, 0 if binary else int(added or 0), 0 if binary else int(removed or 0))
    return counts


def _patches(git: GitRunner, a: str, b: str, pathspec: str) -> dict[str, str]:
    """Each file's unified diff, split out of one `diff-tree -p`."""
    out = git.run(["diff-tree", "-r", "-p", "--no-renames", "--no-ext-diff", "--no-textconv", "--no-color",
                   "--src-prefix=a/", "--dst-prefix=b/", a, b, "--", pathspec]).decode("utf-8", "replace")
    found: dict[str, str] = {}
    for chunk in out.split("\ndiff --git ")[0:]:
        text = chunk if chunk.startswith("diff --git ") else "diff --git " + chunk
        header = text.split("\n", 1)[0]
        path = _path_of(header)
        if path:
            found[path] = text.rstrip("\n") + "\n"
    return found


def _path_of(header: str) -> str:
    """The file a `diff --git a/X b/X` header names (the b side; quoted names unquoted by git's C rules)."""
    rest = header.removeprefix("diff --git ")
    if rest.startswith('"'):
        end = rest.find('" ', 1)
        left = rest[1:end] if end > 0 else rest
        return _unquote(left).removeprefix("a/")
    half = len(rest) // 2
    left = rest[:half]
    return left.removeprefix("a/")


def _unquote(text: str) -> str:
    try:
        return text.encode("latin-1", "backslashreplace").decode("unicode_escape").encode("latin-1").decode(
            "utf-8", "replace")
    except (UnicodeDecodeError, UnicodeEncodeError):
        return text


def change_set(git: GitRunner, a: str, b: str, pathspec: str, *, patches: bool, budget: list[int] | None = None
               ) -> ChangeSet:
    """The files that differ between `a` and `b`; with `patches`, each one's diff while `budget[0]` lasts."""
    raw = raw_changes(git, a, b, pathspec)
    counts = _numstat(git, a, b, pathspec) if raw else {}
    texts = _patches(git, a, b, pathspec) if raw and patches else {}
    left = budget if budget is not None else [PATCH_BUDGET]
    cut = 0
    files: list[FileChange] = []
    for change in raw:
        binary, added, removed = counts.get(change.path, (False, 0, 0))
        patch = ""
        text = texts.get(change.path, "")
        if text and len(text) <= left[0]:
            patch, left[0] = text, left[0] - len(text)
        elif text:
            cut += 1
        files.append(FileChange(path=change.path, change=change.kind, binary=binary or change.submodule,
                                added=added, removed=removed, patch=patch))
    note = f"{cut} file{'s' if cut != 1 else ''} shown without patch: the reply's budget for patches is spent" \
        if cut else ""
    return ChangeSet(files=files, note=note)
