"""Which git repository a project is, checked before anything is written to it.

`find_repository(project)` asks git (`rev-parse`, run in the project with no `GIT_*` variable) and then checks what
it found, because an agent may write a `.git` file into a project that has none, pointing at another repository
of the user's: a `.git` *file* is accepted only where its target points back — a linked worktree's git dir names
this `.git` file in its `gitdir`, a submodule's git dir names this directory as its `core.worktree`. Anything
else makes checkpoints unsupported here, with why (`Unsupported`): not a repository, bare, a `.git` that points
elsewhere.

What was found is pinned for the rest of the job (`GitRunner` gets `git_dir` and `work_tree` as environment), and
the daemon passes the common git dir it saw first back with every later job of the task (`expected_common_dir`),
so a repository swapped in mid-task is refused rather than written to.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from .git_runner import GitFailed, GitRunner

__all__ = ["Repository", "Unsupported", "find_repository"]


@dataclass(frozen=True, slots=True)
class Unsupported:
    """Checkpoints cannot be made here: `reason` says why, for the user (said once per task)."""

    reason: str


@dataclass(frozen=True)
class Repository:
    """A repository checkpoints may be made in, and the project's place in it."""

    work_tree: Path  # the top of the worktree the project lies in
    git_dir: Path  # this worktree's git dir (its index, HEAD)
    common_dir: Path  # objects and refs (the main repository's .git for a linked worktree)
    prefix: str  # the project relative to `work_tree`, "" when it is the top; "/"-separated
    head: str  # the commit HEAD names, "" on a branch with no commit yet
    branch: str  # the branch HEAD is on, "" when detached
    state: str  # "" or what is in progress: merge, rebase, cherry-pick, revert, bisect
    kind: str = "main"  # main, linked worktree, submodule
    rebasing: str = ""  # during a rebase: the branch being rebased (HEAD is detached meanwhile)

    def runner(self, base: GitRunner | None = None) -> GitRunner:
        """A runner pinned to this repository (sharing `base`'s binary and environment)."""
        runner = GitRunner(git_dir=self.git_dir, work_tree=self.work_tree)
        if base is not None:
            runner.binary, runner.environ = base.binary, base.environ
        return runner

    @property
    def pathspec(self) -> str:
        """What commands limit themselves to: the project's directory in the worktree."""
        return self.prefix or "."

    def describe(self) -> str:
        """One line for a checkpoint's record: where HEAD was and what was in progress."""
        at = f"on {self.branch}" if self.branch else ("detached at " + self.head[:12] if self.head else "unborn")
        extra = f" ({self.kind})" if self.kind != "main" else ""
        what = f"rebase of {self.rebasing}" if self.state == "rebase" and self.rebasing else self.state
        return f"{at}{extra}{', ' + what + ' in progress' if what else ''}"


_STATES = (("MERGE_HEAD", "merge"), ("rebase-merge", "rebase"), ("rebase-apply", "rebase"),
           ("CHERRY_PICK_HEAD", "cherry-pick"), ("REVERT_HEAD", "revert"), ("BISECT_LOG", "bisect"))


def find_repository(project: Path, base: GitRunner | None = None, expected_common_dir: str = ""
                    ) -> Repository | Unsupported:
    """The repository `project` lies in, checked; or why checkpoints cannot be made there."""
    project = Path(os.path.realpath(project))
    probe = GitRunner() if base is None else GitRunner(binary=base.binary, environ=base.environ)
    if not project.is_dir():
        return Unsupported(f"{project} is not a directory")
    try:
        out = probe.run(["rev-parse", "--is-bare-repository", "--absolute-git-dir", "--git-common-dir",
                         "--show-toplevel"], cwd=project).decode("utf-8", "surrogateescape").splitlines()
    except GitFailed as exc:
        if "not a git repository" in exc.stderr.lower():
            return Unsupported("the project is not a git repository (git init makes it one)")
        return Unsupported(f"git cannot read the repository here: {exc.stderr[-300:]}")
    if len(out) < 4 or out[0] == "true":
        return Unsupported("the project is in a bare repository, which has no worktree to checkpoint")
    git_dir = Path(os.path.realpath(out[1]))
    common = Path(out[2])
    common_dir = Path(os.path.realpath(common if common.is_absolute() else project / common))
    work_tree = Path(os.path.realpath(out[3]))
    if not (project == work_tree or work_tree in project.parents):
        return Unsupported(f"git places the project's worktree at {work_tree}, which does not hold the project")
    kind = _checked_kind(work_tree, git_dir)
    if isinstance(kind, Unsupported):
        return kind
    if expected_common_dir and os.path.realpath(expected_common_dir) != str(common_dir):
        return Unsupported(f"the project's repository changed during the task: it was {expected_common_dir}, git "
                           f"now finds {common_dir}; checkpoints stop for this task (start a new one)")
    runner = GitRunner(git_dir=git_dir, work_tree=work_tree, binary=probe.binary, environ=probe.environ)
    head = runner.run(["rev-parse", "-q", "--verify", "HEAD^{commit}"], check=False).decode().strip()
    branch = runner.run(["symbolic-ref", "-q", "HEAD"], check=False).decode("utf-8", "surrogateescape").strip()
    state = next((what for name, what in _STATES if os.path.lexists(git_dir / name)), "")
    prefix = project.relative_to(work_tree).as_posix() if project != work_tree else ""
    rebasing = _rebased_branch(git_dir) if state == "rebase" else ""
    return Repository(work_tree=work_tree, git_dir=git_dir, common_dir=common_dir, prefix=prefix,
                      head=head if len(head) in (40, 64) else "", branch=branch.removeprefix("refs/heads/"),
                      state=state, kind=kind, rebasing=rebasing)


def _rebased_branch(git_dir: Path) -> str:
    """The branch a rebase in progress works on (its `head-name`), "" when it names none or cannot be read."""
    for directory in ("rebase-merge", "rebase-apply"):
        try:
            fd = os.open(git_dir / directory / "head-name", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            raw = os.read(fd, 1024) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
        except OSError:
            raw = b""
        finally:
            os.close(fd)
        name = raw.decode("utf-8", "replace").strip()
        if name.startswith("refs/heads/") and name.isprintable():
            return name.removeprefix("refs/heads/")
    return ""


def _checked_kind(work_tree: Path, git_dir: Path) -> str | Unsupported:
    """main, linked worktree or submodule; Unsupported when a `.git` file points where nothing points back."""
    dot_git = work_tree / ".git"
    try:
        is_file = not dot_git.is_symlink() and dot_git.is_file()
    except OSError:
        is_file = False
    if dot_git.is_symlink():
        return Unsupported(f"{dot_git} is a symbolic link (to {os.readlink(dot_git)}); yagent makes no checkpoints "
                           "through a linked .git")
    if not is_file:
        if git_dir != Path(os.path.realpath(dot_git)):
            return Unsupported(f"git finds the repository at {git_dir}, not at {dot_git}; yagent makes checkpoints "
                               "only in a repository whose .git is in the worktree (or points back to it)")
        return "main"
    back = git_dir / "gitdir"  # a linked worktree's git dir names the .git file of its worktree
    try:
        named = back.read_text(encoding="utf-8", errors="replace").strip() if back.is_file() else ""
    except OSError:
        named = ""
    if named and os.path.realpath(named) == os.path.realpath(dot_git):
        return "linked worktree"
    worktree = GitRunner(git_dir=git_dir).run(["config", "--file", str(git_dir / "config"), "--get", "core.worktree"],
                                              check=False).decode("utf-8", "surrogateescape").strip()
    if worktree:
        target = worktree if os.path.isabs(worktree) else os.path.join(git_dir, worktree)
        if os.path.realpath(target) == str(work_tree):
            return "submodule"
    return Unsupported(f"{dot_git} is a file pointing to {git_dir}, which does not point back to this worktree (not "
                       "a linked worktree's or a submodule's); yagent writes no checkpoint there")
