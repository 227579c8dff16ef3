"""Real git repositories for the checkpoint tests, built with the `git` command line as a user would."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from yagent.ipc.messages import CheckpointJob, CheckpointJobResult
from yagent.ipc.vocabulary import CheckpointJobKind
from yagent.workers.checkpoints.git_runner import scrubbed_environment
from yagent.workers.checkpoints.jobs import run_job

GIT_ENV = {**scrubbed_environment(), "GIT_AUTHOR_NAME": "u", "GIT_AUTHOR_EMAIL": "u@example.com",
           "GIT_COMMITTER_NAME": "u", "GIT_COMMITTER_EMAIL": "u@example.com", "GIT_LITERAL_PATHSPECS": "0"}


def git(repo: Path, *args: str, check: bool = True, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, env={**GIT_ENV, **(env or {})},
                          check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {done.stderr}")
    return done.stdout


def make_repo(root: Path, files: dict[str, str] | None = None) -> Path:
    """A repository with one commit of `files` (default: a.txt and src/m.py) and a .gitignore."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main", ".")
    for rel, text in (files or {"a.txt": "one\n", "src/m.py": "code\n", ".gitignore": ".env\nbuild/\n"}).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    return root


def job(project: Path, kind: CheckpointJobKind, **fields: object) -> CheckpointJobResult:
    """A checkpoint job run in this process, as the checkpoint process runs it (without its confinement)."""
    with tempfile.TemporaryDirectory() as scratch:
        return run_job(CheckpointJob(kind=kind, project_root=str(project), scratch_dir=scratch, home=scratch,
                                     **fields))  # type: ignore[arg-type]


def create(project: Path, number: int, task: str = "t1", **fields: object) -> CheckpointJobResult:
    made = job(project, CheckpointJobKind.CREATE, ref=f"refs/yagent/checkpoints/{task}/{number}",
               message=f"checkpoint {number}", **fields)
    assert made.ok, made.problem or made.unsupported
    return made


def state(repo: Path) -> dict[str, object]:
    """What a checkpoint must leave alone: the index's bytes, HEAD, branches, stash, status, other refs."""
    index = repo / ".git" / "index"
    return {"index": index.read_bytes() if index.exists() else b"",
            "head": git(repo, "rev-parse", "-q", "--verify", "HEAD", check=False),
            "symbolic": git(repo, "symbolic-ref", "-q", "HEAD", check=False),
            "refs": git(repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads", "refs/tags",
                        "refs/stash"),
            "stash": git(repo, "stash", "list"),
            "status": git(repo, "status", "--porcelain=v1", "--untracked-files=all", env={"GIT_OPTIONAL_LOCKS": "0"})}


def files_of(repo: Path) -> dict[str, bytes]:
    """Every file of the worktree (not .git) with its bytes (a link as `-> target`)."""
    found: dict[str, bytes] = {}
    for dirpath, dirs, names in os.walk(repo):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in names:
            path = Path(dirpath) / name
            rel = path.relative_to(repo).as_posix()
            found[rel] = b"-> " + os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
    return found
