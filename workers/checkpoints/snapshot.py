"""Making a checkpoint: the project's files as they are now, as a commit on a ref of our own.

The user's index is copied to a private file and git works on the copy (`GIT_INDEX_FILE`): its stat data means
only files that changed since the user's last `git add` are read and hashed again, and the user's index, branch,
stash and worktree stay exactly as they were. Into the copy go
- tracked files that changed (`diff-files`), deleted ones removed;
- untracked files (`ls-files --others --exclude-standard`);
- ignored files that stand alone (`.env`, `debug.log`: `--ignored --directory` lists a wholly ignored directory
  such as `node_modules/` or `build/` as one entry, which is left out: what is in it is not checkpointed), at most
  `MAX_IGNORED` of them;
- the files agents' file tools wrote inside wholly ignored directories (`extra`: the task's noted paths, see
  `amend_with_prior`), read whether git ignores them or not.
A file larger than `MAX_FILE_BYTES`, or of another type than file and link, is not read: it is listed in
`skipped`, and a rollback never touches it. Conflicted entries of a merge or rebase in progress are resolved in the
copy from the file on disk. The tree is written, committed with HEAD (if any) as parent — never another checkpoint,
so removing a checkpoint's ref frees what only it holds — and the ref is created, failing if it exists.

A `kill -9` at any point leaves no ref half-written (`update-ref` locks and renames) and the user's index as it was;
a stale lock of the one ref being created is removed first, since the daemon runs one job per repository at a time.
"""

from __future__ import annotations

import os
import shutil
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from .git_runner import AUTHOR, GitFailed, GitRunner
from .repository import Repository

__all__ = ["MAX_FILE_BYTES", "MAX_IGNORED", "MadeCheckpoint", "amend_with_prior", "capture_tree", "make_checkpoint"]

MAX_FILE_BYTES = 50 * 1024 * 1024
MAX_IGNORED = 1000
ZERO = "0" * 40


@dataclass
class MadeCheckpoint:
    tree: str
    commit: str
    skipped: dict[str, str] = field(default_factory=dict)  # path -> why it was not read into the checkpoint


def _nul_list(raw: bytes) -> list[str]:
    return [p.decode("utf-8", "surrogateescape") for p in raw.split(b"\0") if p]


def _nul_join(paths: list[str]) -> bytes:
    return b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths)


def _fits(work_tree: Path, rel: str, skipped: dict[str, str], *, missing_ok: bool, submodule_ok: bool = False
          ) -> bool:
    """Whether the file `rel` may be read into a checkpoint; else it is noted in `skipped` (a missing one is
    fine where it means a deletion, a submodule's checkout where git records its HEAD)."""
    try:
        info = os.lstat(work_tree / rel)
    except FileNotFoundError:
        return missing_ok
    except OSError as exc:
        skipped[rel] = f"cannot be looked at: {exc.strerror}"
        return False
    if stat.S_ISLNK(info.st_mode):
        return True
    if not stat.S_ISREG(info.st_mode):
        if stat.S_ISDIR(info.st_mode):
            return submodule_ok and os.path.lexists(work_tree / rel / ".git")
        skipped[rel] = "not a file"
        return False
    if info.st_size > MAX_FILE_BYTES:
        skipped[rel] = f"{info.st_size} bytes, over {MAX_FILE_BYTES // (1024 * 1024)} MiB"
        return False
    return True


def capture_tree(repo: Repository, git: GitRunner, scratch: Path, extra: list[str] | tuple[str, ...] = ()
                 ) -> tuple[str, dict[str, str]]:
    """The tree of the project's files now (with the `extra` files that exist), and what was skipped; the user's
    index is only read."""
    index = scratch / "index"
    user_index = repo.git_dir / "index"
    if user_index.exists():
        shutil.copyfile(user_index, index)
    skipped: dict[str, str] = {}
    spec = [repo.pathspec]
    changed = _nul_list(git.run(["diff-files", "--name-only", "-z", "--", *spec], index=index))
    untracked = _nul_list(git.run(["ls-files", "-z", "--others", "--exclude-standard", "--", *spec], index=index))
    # A tracked file whose directory became a link is gone from the project: git will not look through the link.
    behind = [p for p in changed if _behind_link(repo.work_tree, p)]
    if behind:
        git.run(["update-index", "-z", "--force-remove", "--stdin"], stdin=_nul_join(behind), index=index)
        changed = [p for p in changed if p not in set(behind)]
    wanted = [p for p in changed if _fits(repo.work_tree, p, skipped, missing_ok=True, submodule_ok=True)]
    wanted += [p for p in untracked if _fits(repo.work_tree, p, skipped, missing_ok=False)]
    _add(repo, git, index, ["-A"], wanted)
    ignored = [p for p in _nul_list(git.run(["ls-files", "-z", "--others", "--ignored", "--exclude-standard",
                                             "--directory", "--no-empty-directory", "--", *spec], index=index))
               if not p.endswith("/")]
    if len(ignored) > MAX_IGNORED:
        for rel in sorted(ignored)[MAX_IGNORED:]:
            skipped[rel] = f"ignored, and past the {MAX_IGNORED} ignored files a checkpoint keeps"
        ignored = sorted(ignored)[:MAX_IGNORED]
    forced = [p for p in ignored if _inside(repo, p) and _fits(repo.work_tree, p, skipped, missing_ok=False)]
    _add(repo, git, index, ["-f"], forced)
    noted = [p for p in _expanded(repo, extra, skipped) if _inside(repo, p) and not _behind_link(repo.work_tree, p)
             and _fits(repo.work_tree, p, skipped, missing_ok=False)]
    _add(repo, git, index, ["-f"], noted)
    _resolve_conflicts(repo, git, index, skipped)
    tree = git.run(["write-tree"], index=index).decode().strip()
    return tree, skipped


def _expanded(repo: Repository, paths: list[str] | tuple[str, ...], skipped: dict[str, str]) -> list[str]:
    """`paths`, a directory among them (a noted file an agent moved a directory onto) as the files beneath it,
    links not followed, at most `MAX_IGNORED` of those in all."""
    found: list[str] = []
    room = MAX_IGNORED
    for rel in paths:
        top = repo.work_tree / rel
        try:
            is_dir = stat.S_ISDIR(os.lstat(top).st_mode)
        except OSError:
            is_dir = False
        if not is_dir or not _inside(repo, rel) or _behind_link(repo.work_tree, rel):
            found.append(rel)
            continue
        for here, dirs, files in os.walk(top):
            dirs.sort()
            for name in sorted(files):
                inner = Path(here, name).relative_to(repo.work_tree).as_posix()
                if room <= 0:
                    skipped[inner] = f"in a noted directory, past the {MAX_IGNORED} files a checkpoint reads there"
                    continue
                room -= 1
                found.append(inner)
    return found


def _behind_link(work_tree: Path, rel: str) -> bool:
    """Whether a directory on the way to `rel` is a symbolic link (or no directory at all)."""
    parts = rel.split("/")[:-1]
    here = work_tree
    for part in parts:
        here = here / part
        try:
            if not stat.S_ISDIR(os.lstat(here).st_mode):
                return True
        except FileNotFoundError:
            return False
        except OSError:
            return True
    return False


def _add(repo: Repository, git: GitRunner, index: Path, flags: list[str], paths: list[str]) -> None:
    """`git add` of `paths` into the private index; a path that vanished meanwhile (git then fails on its
    pathspec) is dropped and the rest added again."""
    for _attempt in range(3):
        if not paths:
            return
        try:
            git.run(["add", *flags, "--ignore-errors", "--pathspec-from-file=-", "--pathspec-file-nul"],
                    stdin=_nul_join(paths), index=index)
            return
        except GitFailed as exc:
            if "did not match any files" not in exc.stderr:
                raise
            paths = [p for p in paths if os.path.lexists(repo.work_tree / p)]
    raise GitFailed(["add"], 1, "files kept vanishing while the checkpoint was made; try again")


def _inside(repo: Repository, rel: str) -> bool:
    parts = rel.split("/")
    if not rel or rel.startswith("/") or ".." in parts or ".git" in parts:
        return False
    return not repo.prefix or rel == repo.prefix or rel.startswith(repo.prefix + "/")


def _resolve_conflicts(repo: Repository, git: GitRunner, index: Path, skipped: dict[str, str]) -> None:
    """Entries a merge in progress left unmerged (outside the project, or a file too big): taken from disk where
    the file is there and readable, else dropped from the copy (the user's index keeps them)."""
    unmerged = sorted({line.split("\t", 1)[1] for line in
                       git.run(["ls-files", "-u", "-z"], index=index).decode("utf-8", "surrogateescape").split("\0")
                       if "\t" in line})
    if not unmerged:
        return
    present = [p for p in unmerged if _fits(repo.work_tree, p, {}, missing_ok=False)]
    if present:
        git.run(["add", "-f", "--pathspec-from-file=-", "--pathspec-file-nul"], stdin=_nul_join(present), index=index)
    gone = [p for p in unmerged if p not in present]
    if gone:
        git.run(["update-index", "-z", "--force-remove", "--stdin"], stdin=_nul_join(gone), index=index)
        skipped.update({p: "unmerged, and not readable on disk" for p in gone if _inside(repo, p)})


def commit_tree(git: GitRunner, tree: str, parent: str, message: str, when: float | None = None, also: str = ""
                ) -> str:
    """A commit of `tree` (parent `parent` if any, then `also`) by yagent, signed by nothing."""
    stamp = f"{int(when if when is not None else time.time())} +0000"
    name, email = AUTHOR
    env = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": stamp,
           "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email, "GIT_COMMITTER_DATE": stamp}
    args = ["commit-tree", "--no-gpg-sign", tree, *(["-p", parent] if parent else []),
            *(["-p", also] if also else []), "-F", "-"]
    return git.run(args, stdin=message.encode("utf-8", "replace"), extra_env=env).decode().strip()


def create_ref(repo: Repository, git: GitRunner, ref: str, commit: str) -> None:
    """Create `ref` at `commit`, failing if it exists; a lock a killed job left on that very ref goes first."""
    lock = repo.common_dir / f"{ref}.lock"
    try:
        if stat.S_ISREG(os.lstat(lock).st_mode):
            lock.unlink()
    except OSError:
        pass
    git.run(["update-ref", "--no-deref", "-m", "yagent checkpoint", ref, commit, ZERO])


def make_checkpoint(repo: Repository, git: GitRunner, scratch: Path, ref: str, message: str,
                    extra: list[str] | tuple[str, ...] = ()) -> MadeCheckpoint:
    """Capture the project (and the `extra` files), commit it, create `ref` for it."""
    tree, skipped = capture_tree(repo, git, scratch, extra)
    commit = commit_tree(git, tree, repo.head, message)
    try:
        create_ref(repo, git, ref, commit)
    except GitFailed as exc:
        raise GitFailed(["update-ref", ref], exc.code, f"could not create {ref}: {exc.stderr}") from None
    return MadeCheckpoint(tree=tree, commit=commit, skipped=skipped)


AMEND_CHAIN = 16  # amendments of one checkpoint followed back to the commit the daemon's record names


def _amended_from(git: GitRunner, ref: str, commit: str) -> str:
    """What `ref` names now, if that is `commit` or an amendment of it (its second parents lead back to it, as
    when a daemon killed after moving the ref never recorded the move); "" when the ref moved elsewhere."""
    current = git.run(["rev-parse", "-q", "--verify", f"{ref}^{{commit}}"], check=False).decode().strip()
    here = current
    for _step in range(AMEND_CHAIN):
        if not here:
            return ""
        if here == commit:
            return current
        parents = git.run(["rev-list", "--parents", "-n", "1", here]).decode().split()[1:]
        here = parents[-1] if parents else ""  # an amendment's last parent is what it amends
    return ""


def amend_with_prior(repo: Repository, git: GitRunner, scratch: Path, ref: str, commit: str, paths: list[str]
                     ) -> tuple[str, list[str], dict[str, str]]:
    """The checkpoint at `ref` (recorded as `commit`) with the files of `paths` it lacks added as they are now, as
    a new commit on `ref`; (that commit — the ref's own when nothing was added, the paths added, the paths that
    exist but could not be read: too big, not a file).

    An agent is about to write these files (inside a wholly ignored directory, which no capture reads): their
    content now is their content before the agent, which an undo must put back. A path the checkpoint holds
    already keeps what it holds; one that does not exist is left out, so an undo removes what the agent makes
    there. The new commit has the same first parent and message, and the commit it amends as its second parent:
    that one stays reachable, so a record that still names it (the daemon killed before it recorded the new one)
    names a commit git keeps. `ref` moves only from what it names, and only if that is `commit` or an amendment.
    """
    base = _amended_from(git, ref, commit)
    if not base:
        raise GitFailed(["update-ref", ref], 1, f"{ref} no longer names checkpoint {commit[:12]} or an amendment of it")
    index = scratch / "amend-index"
    index.unlink(missing_ok=True)
    git.run(["read-tree", base], index=index)
    # The whole listing, not the paths as arguments: a thousand long names would pass the kernel's argv limit.
    held = set(_nul_list(git.run(["ls-files", "-z"], index=index))) & set(paths)
    skipped: dict[str, str] = {}
    wanted = [p for p in paths if p not in held and _inside(repo, p) and not _behind_link(repo.work_tree, p)
              and _fits(repo.work_tree, p, skipped, missing_ok=False)]
    if not wanted:
        return base, [], skipped
    _add(repo, git, index, ["-f"], wanted)
    tree = git.run(["write-tree"], index=index).decode().strip()
    parents = git.run(["rev-list", "--parents", "-n", "1", base]).decode().split()[1:]
    message = git.run(["log", "-1", "--format=%B", base]).decode("utf-8", "replace").rstrip("\n")
    when = float(git.run(["log", "-1", "--format=%ct", base]).decode().strip() or time.time())
    amended = commit_tree(git, tree, parents[0] if parents else "", message, when, also=base)
    git.run(["update-ref", "--no-deref", "-m", "yagent checkpoint: prior content of files agents write", ref,
             amended, base])
    return amended, wanted, skipped
