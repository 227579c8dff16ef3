"""`[git_checkpoint] squash_on_exit`: a turn's sub-task changes as one commit on an agent branch, never on yours.

The commit's parent is the agent branch's tip if the branch exists, else HEAD now; its tree is the parent's tree
with the changes between the turn's first before-checkpoint and its last after-checkpoint applied — minus files
ignore rules hide (an agent-made `.env` is undoable from a checkpoint but never committed) and files with a
`filter` attribute (an LFS file would be committed as its bytes, not its pointer: left for you to commit).

`auto_merge_on_exit` then moves your branch to that commit only when nothing can be lost: HEAD is on a branch, is
the commit's parent, no merge or rebase is in progress, and your index holds exactly HEAD (nothing staged); the
move is a compare-and-swap of the branch ref, and your index is set to the new commit (what `git reset` would do).
`cleanup_agent_branch` deletes the agent branch once your branch has its commit. Anything else is said, not done.
"""

from __future__ import annotations

from pathlib import Path

from .changes import raw_changes
from .git_runner import GitFailed, GitRunner
from .repository import Repository
from .snapshot import ZERO, commit_tree

__all__ = ["squash_to_branch"]


def _nul(paths: list[str]) -> bytes:
    return b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths)


def _flagged(git: GitRunner, index: Path, paths: list[str], args: list[str]) -> set[str]:
    """The paths a `git check-*` question (NUL-separated answers) names."""
    if not paths:
        return set()
    # check-ignore takes no pathspec magic, and the literal setting every other command gets is that magic.
    out = git.run(args, stdin=_nul(paths), index=index, check=False, extra_env={"GIT_LITERAL_PATHSPECS": "0"})
    return {p.decode("utf-8", "surrogateescape") for p in out.split(b"\0") if p}


def _filtered(git: GitRunner, index: Path, paths: list[str]) -> set[str]:
    if not paths:
        return set()
    out = git.run(["check-attr", "-z", "--stdin", "filter"], stdin=_nul(paths), index=index)
    parts = out.split(b"\0")
    found: set[str] = set()
    for i in range(0, len(parts) - 2, 3):
        value = parts[i + 2].decode("utf-8", "replace")
        if value not in ("unspecified", "unset", ""):
            found.add(parts[i].decode("utf-8", "surrogateescape"))
    return found


def squash_to_branch(repo: Repository, git: GitRunner, scratch: Path, *, branch_ref: str, base: str, last: str,
                     message: str, merge: bool, delete_branch: bool) -> tuple[str, str]:
    """(the squash commit or "", what was done, for the turn's log)."""
    tip = git.run(["rev-parse", "-q", "--verify", f"{branch_ref}^{{commit}}"], check=False).decode().strip()
    parent = tip or repo.head
    index = scratch / "squash-index"
    if parent:
        git.run(["read-tree", parent], index=index)
    else:
        git.run(["read-tree", "--empty"], index=index)
    changes = [c for c in raw_changes(git, base, last, repo.pathspec) if not c.submodule]
    paths = [c.path for c in changes]
    ignored = _flagged(git, index, paths, ["check-ignore", "-z", "--stdin"])
    filtered = _filtered(git, index, paths)
    lines = []
    for change in changes:
        if change.path in ignored or change.path in filtered:
            continue
        entry = "0 " + ZERO if change.new_mode == "000000" else f"{change.new_mode} {change.new_blob}"
        lines.append(f"{entry}\t{change.path}".encode("utf-8", "surrogateescape") + b"\0")
    left = sorted(filtered - ignored)
    note = f"; left out (a filter attribute, e.g. LFS: commit them yourself): {', '.join(left[:5])}" if left else ""
    if not lines:
        return "", f"nothing to squash: the turn changed no file a commit takes{note}"
    git.run(["update-index", "-z", "--index-info"], stdin=b"".join(lines), index=index)
    tree = git.run(["write-tree"], index=index).decode().strip()
    if parent and tree == git.run(["rev-parse", f"{parent}^{{tree}}"]).decode().strip():
        return "", f"nothing to squash: {branch_ref.removeprefix('refs/heads/')} already holds these changes{note}"
    commit = commit_tree(git, tree, parent, message)
    git.run(["update-ref", "-m", "yagent: squash of a turn's sub-tasks", branch_ref, commit, tip or ZERO])
    name = branch_ref.removeprefix("refs/heads/")
    done = f"the turn's changes are commit {commit[:12]} on branch {name}{note}"
    if not merge:
        return commit, done
    why_not = _merge_refusal(repo, git, parent)
    if why_not:
        return commit, f"{done}; not merged into your branch: {why_not}"
    user_ref = f"refs/heads/{repo.branch}"
    try:
        git.run(["update-ref", "-m", f"yagent: fast-forward to {name}", user_ref, commit, repo.head])
    except GitFailed as exc:
        return commit, f"{done}; not merged: your branch moved meanwhile ({exc.stderr[-200:]})"
    git.run(["read-tree", commit])  # your index: the new HEAD, as `git reset` leaves it
    git.run(["update-index", "-q", "--refresh"], check=False)
    done += f"; {repo.branch} fast-forwarded to it"
    if delete_branch:
        git.run(["update-ref", "-d", branch_ref, commit], check=False)
        done += f"; branch {name} deleted"
    return commit, done


def _merge_refusal(repo: Repository, git: GitRunner, parent: str) -> str:
    if not repo.branch:
        return "HEAD is detached"
    if repo.state:
        return f"a {repo.state} is in progress"
    if not repo.head or parent != repo.head:
        return f"your branch {repo.branch} is not where the agent branch starts (it moved, or the agent branch has " \
               "commits it does not): merge it yourself"
    if not git.ok(["diff-index", "--cached", "--quiet", repo.head, "--"]):
        return "you have staged changes"
    return ""
