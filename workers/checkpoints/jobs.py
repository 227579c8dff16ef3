"""One checkpoint job, from its request (`CheckpointJob`) to its reply (`CheckpointJobResult`).

What each kind reads of the request:
- create: `ref`, `message`, `extra_paths` — capture the project (and the noted files agents wrote inside ignored
  directories) and create `ref` for it (`snapshot.py`);
- note: `amend` ([[ref, commit], ...]), `extra_paths` — add to each of those checkpoints the noted files it lacks,
  as they are now, before an agent writes them (`snapshot.amend_with_prior`);
- diff: `pairs`, `patches` — a change set per [from, to] pair of commits (`changes.py`);
- restore: `target`, `scope_from`, `expected`, `untouchable`, `apply`, `force`, `safety_ref`, `ref`, `message`,
  `extra_paths`, `noted_later` (noted files the target predates, left as they are) —
  capture the project, plan putting `target` back, refuse over the user's changes unless `force`; with `apply`
  keep the capture as a checkpoint (`safety_ref`) before writing, and the project as it is afterwards as another
  (`ref`: what a later undo compares with) (`restore.py`);
- squash: `ref` (the agent branch), `base`, `target`, `message`, `merge`, `delete_branch` (`squash.py`);
- prune: `delete_refs` — remove checkpoint refs past their retention, in one transaction.
Every kind first finds the repository (`repository.py`), refusing one other than `expected_common_dir`. Commits and
refs arrive from the daemon, which takes them from its own record, never from a worker; they are still checked
here to be what they claim (a 40/64-digit id, a ref under `refs/yagent/` or `refs/heads/`).
"""

from __future__ import annotations

import re
from pathlib import Path

from yagent.ipc.messages import CheckpointJob, CheckpointJobResult, FileChange
from yagent.ipc.noted_paths import plain_project_path
from yagent.ipc.vocabulary import ChangeKind, CheckpointJobKind

from .changes import PATCH_BUDGET, change_set
from .git_runner import GitFailed, GitRunner
from .repository import Repository, Unsupported, find_repository
from .restore import apply_plan, plan_restore
from .snapshot import amend_with_prior, capture_tree, commit_tree, create_ref, make_checkpoint
from .squash import squash_to_branch

__all__ = ["CHECKPOINT_REFS", "run_job"]

CHECKPOINT_REFS = "refs/yagent/checkpoints/"
_OBJECT = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
_OUR_REF = re.compile(r"^refs/yagent/checkpoints/[A-Za-z0-9_-]{1,64}/[0-9]{1,9}$")
_BRANCH_REF = re.compile(r"^refs/heads/[^\x00-\x20~^:?*\[\\]{1,200}$")


def _bad_request(job: CheckpointJob) -> str:
    """Why the job's ids are not what they must be ("" when they are)."""
    commits = [job.target, job.scope_from, job.expected, job.base] + [c for pair in job.pairs if isinstance(pair, list)
                                                                       for c in pair]
    if any(c and not _OBJECT.match(c) for c in commits if isinstance(c, str)):
        return "a commit id that is not one"
    if any(not (isinstance(p, list) and len(p) == 2 and all(isinstance(c, str) for c in p)) for p in job.pairs):
        return "a diff pair that is not two commit ids"
    amends = [pair for pair in job.amend if isinstance(pair, list) and len(pair) == 2
              and all(isinstance(part, str) for part in pair)]
    if len(amends) != len(job.amend) or any(not _OBJECT.match(commit) for _ref, commit in amends):
        return "a checkpoint to amend that is not [ref, commit id]"
    if any(not plain_project_path(p) for p in [*job.extra_paths, *job.noted_later]):
        return "a noted path that is not a plain path inside the project"
    refs = [job.safety_ref, *job.delete_refs, *(ref for ref, _commit in amends)] + \
        ([job.ref] if job.kind != CheckpointJobKind.SQUASH else [])
    if any(r and not _OUR_REF.match(r) for r in refs):
        return "a ref outside refs/yagent/checkpoints/"
    if job.kind == CheckpointJobKind.SQUASH and (not _BRANCH_REF.match(job.ref) or ".." in job.ref):
        return "an agent branch that is not a branch name"
    return ""


def _in_worktree(repo: Repository, paths: list[str]) -> list[str]:
    """The project-relative `paths` as git names them: relative to the top of the worktree."""
    return [f"{repo.prefix}/{p}" if repo.prefix else p for p in paths]


def _in_project(repo: Repository, path: str) -> str:
    """A worktree-relative path of git's as the daemon names it: relative to the project."""
    return path[len(repo.prefix) + 1:] if repo.prefix and path.startswith(repo.prefix + "/") else path


def run_job(job: CheckpointJob, git: GitRunner | None = None, repo: Repository | None = None) -> CheckpointJobResult:
    """Carry out `job` (in `repo`, when the caller found it already); every failure becomes a reply saying what
    went wrong."""
    problem = _bad_request(job)
    if problem:
        return CheckpointJobResult(ok=False, problem=f"refused: {problem}")
    found = repo or find_repository(Path(job.project_root), git, job.expected_common_dir)
    if isinstance(found, Unsupported):
        return CheckpointJobResult(ok=False, unsupported=found.reason)
    repo = found
    runner = repo.runner(git)
    scratch = Path(job.scratch_dir)
    result = CheckpointJobResult(ok=True, common_dir=str(repo.common_dir), head=repo.describe())
    try:
        _carry_out(job, repo, runner, scratch, result)
    except GitFailed as exc:
        return CheckpointJobResult(ok=False, problem=str(exc), common_dir=str(repo.common_dir), head=repo.describe())
    except OSError as exc:
        return CheckpointJobResult(ok=False, problem=f"{type(exc).__name__}: {exc}", common_dir=str(repo.common_dir),
                                   head=repo.describe())
    return result


def _carry_out(job: CheckpointJob, repo: Repository, git: GitRunner, scratch: Path,
               result: CheckpointJobResult) -> None:
    kind = job.kind
    if kind == CheckpointJobKind.CREATE:
        made = make_checkpoint(repo, git, scratch, job.ref, job.message, _in_worktree(repo, job.extra_paths))
        result.commit, result.tree, result.skipped = made.commit, made.tree, made.skipped
    elif kind == CheckpointJobKind.DIFF:
        budget = [PATCH_BUDGET]
        result.changes = [change_set(git, a, b, repo.pathspec, patches=job.patches, budget=budget)
                          for a, b in job.pairs]
    elif kind == CheckpointJobKind.RESTORE:
        _restore(job, repo, git, scratch, result)
    elif kind == CheckpointJobKind.SQUASH:
        commit, detail = squash_to_branch(repo, git, scratch, branch_ref=job.ref, base=job.base, last=job.target,
                                          message=job.message, merge=job.merge, delete_branch=job.delete_branch)
        result.commit, result.detail = commit, detail
    elif kind == CheckpointJobKind.NOTE:
        paths = _in_worktree(repo, job.extra_paths)
        failed: list[str] = []
        kept: set[str] = set()
        for ref, commit in job.amend:
            try:  # each ref on its own: the daemon takes none of them unless all went through
                amended, added, unread = amend_with_prior(repo, git, scratch, ref, commit, paths)
            except GitFailed as exc:
                failed.append(f"{ref}: {exc}")
                continue
            result.amended.append([ref, amended])
            kept.update(added)
            result.skipped.update(unread)
        result.files = [FileChange(path=_in_project(repo, p), change=ChangeKind.ADDED) for p in sorted(kept)]
        result.skipped = {_in_project(repo, p): why for p, why in result.skipped.items()}
        result.detail = "; ".join(failed)
    elif kind == CheckpointJobKind.PRUNE:
        existing = set(git.run(["for-each-ref", "--format=%(refname)", CHECKPOINT_REFS]).decode().split())
        doomed = [r for r in job.delete_refs if r in existing]
        if doomed:
            git.run(["update-ref", "--stdin"], stdin="".join(f"delete {r}\n" for r in doomed).encode())
        result.detail = f"{len(doomed)} checkpoint refs removed"


def _restore(job: CheckpointJob, repo: Repository, git: GitRunner, scratch: Path,
             result: CheckpointJobResult) -> None:
    extra = _in_worktree(repo, job.extra_paths)
    now, skipped = capture_tree(repo, git, scratch, extra)
    result.tree, result.skipped = now, skipped
    plan = plan_restore(git, repo, now, job.target, scope_from=job.scope_from, expected=job.expected,
                        untouchable={*job.untouchable, *skipped},
                        unknown=set(_in_worktree(repo, job.noted_later)))
    result.files, result.changed_since, result.left = plan.files(), plan.changed_since, plan.left
    if not job.apply or (plan.changed_since and not job.force):
        return
    if job.safety_ref:  # how things were, kept before anything is written: the restore can itself be undone
        result.safety_commit = commit_tree(git, now, repo.head, job.message)
        create_ref(repo, git, job.safety_ref, result.safety_commit)
    apply_plan(git, repo, scratch, job.target, plan)
    result.applied = True
    if job.ref:
        (scratch / "index").unlink(missing_ok=True)  # a fresh copy of the user's index for the second capture
        after, _skipped = capture_tree(repo, git, scratch, extra)
        result.commit = commit_tree(git, after, repo.head, job.message + " (after)")
        create_ref(repo, git, job.ref, result.commit)
