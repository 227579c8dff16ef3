"""Putting files back to a checkpoint's content: the plan, the check against the user's own changes, the writes.

A restore works on three commits: `now` (a capture of the project taken by the job itself), `target` (whose
content files get) and, for an undo, `expected` (what the agents left: a file that differs between it and `now`
was changed by someone since — the user — and is not overwritten without `force`). Its scope is every file that
differs between `target` and `now`, or, with `scope_from`, only those that also differ between `target` and
`scope_from` (one sub-task's changes).

Files are written by git itself (`checkout-index` from a private index read from `target`), with the filters
neutral (`git_runner`): the bytes written are those the checkpoint holds, a link is made a link, a path whose
leading directory is a link is not written through it. Files absent from `target` are removed here, one name in a
directory opened without following links. Submodules (gitlinks) and files a checkpoint did not read (`skipped`:
too big, not a file) are never touched: they are reported in `left`.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from yagent.ipc.messages import FileChange
from yagent.ipc.vocabulary import ChangeKind

from .changes import RawChange, raw_changes
from .git_runner import GitRunner
from .repository import Repository

__all__ = ["RestorePlan", "apply_plan", "plan_restore"]


@dataclass
class RestorePlan:
    steps: list[RawChange] = field(default_factory=list)  # from `now` to `target`
    changed_since: list[str] = field(default_factory=list)  # files in scope the user changed after `expected`
    left: list[str] = field(default_factory=list)  # "path (why)": in scope, never touched

    def files(self) -> list[FileChange]:
        return [FileChange(path=s.path, change=s.kind, binary=s.submodule) for s in self.steps]


def plan_restore(git: GitRunner, repo: Repository, now: str, target: str, *, scope_from: str = "",
                 expected: str = "", untouchable: set[str] | None = None, unknown: set[str] | None = None
                 ) -> RestorePlan:
    """What putting `target` back changes, in scope, and which of those files the user changed after `expected`."""
    spec = repo.pathspec
    steps = raw_changes(git, now, target, spec)
    if scope_from:
        scope = {c.path for c in raw_changes(git, scope_from, target, spec)}
        steps = [s for s in steps if s.path in scope]
    plan = RestorePlan()
    never = untouchable or set()
    later = unknown or set()
    for step in steps:
        if step.submodule:
            plan.left.append(f"{step.path} (a submodule: yagent does not move submodules; see git -C {step.path} log)")
        elif step.path in later and step.kind is ChangeKind.DELETED:  # absent from the target: not known there
            plan.left.append(f"{step.path} (an agent wrote it inside an ignored directory after that checkpoint was "
                             "made, so the checkpoint does not know how it was)")
        elif step.path in never:
            plan.left.append(f"{step.path} (a checkpoint did not read it: too big or not a file)")
        else:
            plan.steps.append(step)
    if expected:
        touched = {s.path for s in plan.steps}
        plan.changed_since = sorted(c.path for c in raw_changes(git, expected, now, spec) if c.path in touched)
    return plan


def apply_plan(git: GitRunner, repo: Repository, scratch: Path, target: str, plan: RestorePlan) -> None:
    """Write and remove the plan's files; the user's index is never touched."""
    writes = [s.path for s in plan.steps if s.kind is not ChangeKind.DELETED]
    removals = [s.path for s in plan.steps if s.kind is ChangeKind.DELETED]
    for rel in removals:  # first: a file a directory of the target's takes the place of goes before it is made
        _remove(repo.work_tree, rel)
        _prune_empty_parents(repo.work_tree, rel, repo.prefix)
    if writes:
        index = scratch / "restore-index"
        git.run(["read-tree", target], index=index)
        git.run(["checkout-index", "-f", "-z", "--stdin"], index=index,
                stdin=b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in writes))


def _open_parent(root: Path, rel: str) -> tuple[int, str] | None:
    """(a descriptor of the directory holding `rel`, reached without following any link, its last name)."""
    parts = [p for p in rel.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts):
        return None
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(root, flags)
    try:
        for part in parts[:-1]:
            nxt = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except OSError:
        os.close(fd)
        return None
    return fd, parts[-1]


def _remove(root: Path, rel: str) -> None:
    """Remove the file (or link) `rel`; a directory standing there is left (it is not the checkpoint's)."""
    opened = _open_parent(root, rel)
    if opened is None:
        return
    fd, name = opened
    try:
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if not stat.S_ISDIR(info.st_mode):
            os.unlink(name, dir_fd=fd)
    except FileNotFoundError:
        pass
    finally:
        os.close(fd)


def _prune_empty_parents(root: Path, rel: str, prefix: str) -> None:
    """Directories a removal left empty go too, up to the project's own directory (as a checkout does)."""
    parts = rel.split("/")[:-1]
    stop = len([p for p in prefix.split("/") if p])
    while len(parts) > stop:
        opened = _open_parent(root, "/".join(parts))
        if opened is None:
            return
        fd, name = opened
        try:
            os.rmdir(name, dir_fd=fd)
        except OSError:
            return  # not empty (or not a directory): nothing above it is empty either
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)
        parts.pop()
