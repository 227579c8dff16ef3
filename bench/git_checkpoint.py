"""Git checkpoints on a repository of 10 000 files: a checkpoint made, and a sub-task's changes rolled back, each by a
confined process from the forkserver as yagentd runs them, against `git stash push -u` + `git stash pop` of the
same dirty worktree (what a checkpoint that borrows the user's stash would cost) in the same run.

The worktree is dirty as a user's is (20 files changed, 5 untracked); the sub-task changes 20 more. A checkpoint
seeds its private index from a copy of the user's, so it hashes what changed, not 10 000 files. Figures are the
best of N runs (default 3). Usage: python bench/git_checkpoint.py [N]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import wait
from pathlib import Path

from yagent.daemon.launcher import MultiprocessingLauncher
from yagent.daemon.main import PRELOAD
from yagent.ipc.confinement import ConfinementSpec, landlock_abi
from yagent.ipc.messages import CheckpointJob, CheckpointJobResult
from yagent.ipc.records import decode
from yagent.ipc.vocabulary import CheckpointJobKind

FILES = 10_000
ENV = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.com", "GIT_COMMITTER_NAME": "b",
       "GIT_COMMITTER_EMAIL": "b@example.com", "PATH": "/usr/bin:/bin"}


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, env=ENV, check=True, capture_output=True)


def _repository(root: Path) -> Path:
    repo = root / "repo"
    for d in range(FILES // 100):
        folder = repo / f"pkg{d:03d}"
        folder.mkdir(parents=True)
        for f in range(100):
            (folder / f"mod{f:03d}.py").write_text(f"# module {d}/{f}\n" + "x = 1\n" * 40)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "10 000 files")
    for i in range(20):  # the user's work in progress
        (repo / f"pkg{i:03d}" / "mod000.py").write_text(f"# edited by the user {i}\n")
    for i in range(5):
        (repo / f"new{i}.py").write_text("untracked\n")
    return repo


def _job(launcher: MultiprocessingLauncher, spec: ConfinementSpec, job: CheckpointJob) -> tuple[float,
                                                                                             CheckpointJobResult]:
    scratch = Path(tempfile.mkdtemp(dir=spec.scratch_dir))
    job.scratch_dir = str(scratch)
    started = time.perf_counter()
    handle, reader = launcher.launch_checkpoint("bench", job, confinement=spec)
    result = decode(reader.recv_bytes(1 << 24))
    wait([handle.sentinel], timeout=30)
    elapsed = time.perf_counter() - started
    reader.close()
    handle.close()
    assert isinstance(result, CheckpointJobResult) and result.ok, result
    return elapsed, result


def main(runs: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="yagent-bench-checkpoint-"))
    repo = _repository(root)
    home = root / "home"
    (home / "scratch").mkdir(parents=True)
    spec = ConfinementSpec(abi=landlock_abi(), agent="checkpoint", project_root=str(repo), home=str(home),
                           runtime_dir=str(root / "run"), task_dir="", scratch_dir=str(home / "scratch"))
    launcher = MultiprocessingLauncher(preload=PRELOAD)
    launcher.start()
    _job(launcher, spec, CheckpointJob(kind=CheckpointJobKind.CREATE, project_root=str(repo), scratch_dir="",
                                       home=str(home), ref="refs/yagent/checkpoints/warm/1", message="warm"))
    create = stash = undo = float("inf")
    number = 1
    for run in range(runs):
        number += 1
        took, before = _job(launcher, spec, CheckpointJob(
            kind=CheckpointJobKind.CREATE, project_root=str(repo), scratch_dir="", home=str(home),
            ref=f"refs/yagent/checkpoints/b/{number}", message="before"))
        create = min(create, took)
        for i in range(20, 40):  # the sub-task
            (repo / f"pkg{i:03d}" / "mod001.py").write_text(f"# the agent, run {run}\n")
        number += 1
        _took, after = _job(launcher, spec, CheckpointJob(
            kind=CheckpointJobKind.CREATE, project_root=str(repo), scratch_dir="", home=str(home),
            ref=f"refs/yagent/checkpoints/b/{number}", message="after"))
        number += 2
        took, undone = _job(launcher, spec, CheckpointJob(
            kind=CheckpointJobKind.RESTORE, project_root=str(repo), scratch_dir="", home=str(home),
            target=before.commit, scope_from=after.commit, expected=after.commit, apply=True,
            safety_ref=f"refs/yagent/checkpoints/b/{number - 1}", ref=f"refs/yagent/checkpoints/b/{number}",
            message="undo"))
        assert undone.applied and len(undone.files) == 20, undone
        undo = min(undo, took)
        started = time.perf_counter()
        _git(repo, "stash", "push", "-q", "-u")
        _git(repo, "stash", "pop", "-q")
        stash = min(stash, time.perf_counter() - started)
    launcher.stop()
    print(f"repository: {FILES} files, 20 changed and 5 untracked by the user; a sub-task changes 20 more")
    print(f"checkpoint (confined process, fork to exit):  {create * 1000:8.1f} ms")
    print(f"undo of the sub-task (safety + restore + after): {undo * 1000:6.1f} ms")
    print(f"git stash push -u + git stash pop (baseline):  {stash * 1000:8.1f} ms")
    print(f"checkpoint / stash round trip:                 {create / stash:8.2f}x")
    print(f"undo / stash round trip:                       {undo / stash:8.2f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
