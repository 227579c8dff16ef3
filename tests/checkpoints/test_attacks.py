"""The checkpoint process against the project as an attacker: git killed mid-checkpoint, a link swapped in while git
reads the project by a process racing it, and what the process's own confinement lets it read and write."""

from __future__ import annotations

import multiprocessing
import os
import select
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.forked_child import in_forked_child
from yagent.ipc.confinement import ConfinementSpec, landlock_abi
from yagent.ipc.messages import CheckpointJob, CheckpointJobResult
from yagent.ipc.vocabulary import CheckpointJobKind
from yagent.workers.checkpoints.git_runner import GitRunner, scrubbed_environment
from yagent.workers.checkpoints.jobs import run_job
from yagent.workers.checkpoints.process import confined_job
from yagent.workers.sandbox._landlock import restrict_self
from yagent.workers.sandbox.policy import checkpoint_rules

from .repos import create, git, make_repo

needs_landlock = pytest.mark.skipif(landlock_abi() < 1, reason="the kernel has no Landlock")
SECRET = b"the-users-private-key-material"


def _read_pid(fifo: Path, deadline: float = 30.0) -> int:
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        got = b""
        end = time.monotonic() + deadline
        while not got.endswith(b"\n"):
            ready, _w, _x = select.select([fd], [], [], max(0.0, end - time.monotonic()))
            assert ready, "git never reached update-ref"
            got += os.read(fd, 64)
        return int(got)
    finally:
        os.close(fd)


def test_git_killed_mid_checkpoint_leaves_no_ref_the_users_index_intact_and_the_next_checkpoint_works(
        tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    (repo / "a.txt").write_text("dirty\n")
    git(repo, "add", "a.txt")
    index = (repo / ".git" / "index").read_bytes()
    fifo = tmp_path / "pid"
    os.mkfifo(fifo)
    wrapper = tmp_path / "git"
    real = subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True, check=True).stdout.strip()
    wrapper.write_text(f'#!/bin/sh\nif [ "$1" = update-ref ]; then echo $$ > "$STOP_FIFO"; kill -STOP $$; fi\n'
                       f'exec {real} "$@"\n')
    wrapper.chmod(0o755)
    runner = GitRunner(binary=str(wrapper), environ={**scrubbed_environment(), "STOP_FIFO": str(fifo)})
    results: list[CheckpointJobResult] = []
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    job = CheckpointJob(kind=CheckpointJobKind.CREATE, project_root=str(repo), scratch_dir=str(scratch),
                        home=str(tmp_path), ref="refs/yagent/checkpoints/t1/1", message="m")
    worker = threading.Thread(target=lambda: results.append(run_job(job, git=runner)))
    worker.start()
    os.kill(_read_pid(fifo), signal.SIGKILL)  # git, stopped at the moment it would write the ref
    worker.join(30)
    assert results and not results[0].ok and "update-ref" in results[0].problem
    assert git(repo, "for-each-ref", "refs/yagent") == ""
    assert (repo / ".git" / "index").read_bytes() == index and not (repo / ".git" / "index.lock").exists()
    # A lock a killed update-ref left on the very ref is not the end of that checkpoint number.
    lock = repo / ".git" / "refs" / "yagent" / "checkpoints" / "t1" / "1.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")
    made = create(repo, 1)
    assert git(repo, "rev-parse", "refs/yagent/checkpoints/t1/1").strip() == made.commit
    assert (repo / ".git" / "index").read_bytes() == index


def _world(tmp_path: Path) -> tuple[Path, ConfinementSpec]:
    home, runtime, denied = tmp_path / "home", tmp_path / "run", tmp_path / "denied"
    for d in (home, runtime, denied):
        d.mkdir()
    (home / "secret").write_bytes(SECRET)
    (denied / "key").write_bytes(SECRET)
    repo = make_repo(tmp_path / "r")
    scratch = home / "data" / "checkpoints" / "scratch" / "job"
    scratch.mkdir(parents=True)
    spec = ConfinementSpec(abi=landlock_abi(), agent="checkpoint", project_root=str(repo), home=str(home),
                           runtime_dir=str(runtime), task_dir="", scratch_dir=str(scratch), deny_read=[str(denied)])
    return repo, spec


def _probe(spec: ConfinementSpec, repo: Path, outside: Path) -> dict[str, str]:
    restrict_self(spec.abi, checkpoint_rules(spec, [str(repo), str(repo / ".git")]))
    seen: dict[str, str] = {}
    for what, path, mode in (("secret", Path(spec.home) / "secret", "rb"), ("denied", Path(spec.deny_read[0]) / "key",
                             "rb"), ("project", repo / "a.txt", "rb"), ("outside", outside / "x", "wb"),
                             ("git", repo / ".git" / "probe", "wb"), ("scratch", Path(spec.scratch_dir) / "i", "wb")):
        try:
            with open(path, mode):
                seen[what] = "ok"
        except OSError as exc:
            seen[what] = type(exc).__name__
    return seen


@needs_landlock
def test_the_confined_checkpoint_process_reads_no_state_home_or_deny_read_and_writes_only_its_repository(
        tmp_path: Path) -> None:
    repo, spec = _world(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    seen = in_forked_child(_probe, spec, repo, outside)
    assert seen == {"secret": "PermissionError", "denied": "PermissionError", "project": "ok",
                    "outside": "PermissionError", "git": "ok", "scratch": "ok"}, seen


def _swap(target: Path, secret: Path, stop: multiprocessing.synchronize.Event) -> None:  # type: ignore[name-defined]
    while not stop.is_set():
        tmp = target.with_name(".swap")
        with open(tmp, "wb") as fh:
            fh.write(b"harmless\n")
        os.replace(tmp, target)
        link = target.with_name(".link")
        if link.is_symlink():
            link.unlink()
        os.symlink(secret, link)
        os.replace(link, target)


def _checkpoints(spec: ConfinementSpec, repo: Path, count: int) -> list[str]:
    made = []
    for number in range(1, count + 1):
        job = CheckpointJob(kind=CheckpointJobKind.CREATE, project_root=str(repo), scratch_dir=spec.scratch_dir,
                            home=spec.home, ref=f"refs/yagent/checkpoints/t1/{number}", message="m")
        result = confined_job(spec, job) if number == 1 else run_job(job)  # confined once: it holds for the rest
        made.append(result.commit if result.ok else result.problem)
        for leftover in Path(spec.scratch_dir).iterdir():
            leftover.unlink()
    return made


@needs_landlock
def test_a_link_to_a_secret_swapped_in_while_git_reads_the_project_never_lands_in_the_repository(
        tmp_path: Path) -> None:
    repo, spec = _world(tmp_path)
    ctx = multiprocessing.get_context("fork")
    stop = ctx.Event()
    swapper = ctx.Process(target=_swap, args=(repo / "u.txt", Path(spec.home) / "secret", stop))
    swapper.start()
    try:
        made = in_forked_child(_checkpoints, spec, repo, 10)
    finally:
        stop.set()
        swapper.join(10)
    assert isinstance(made, list) and len(made) == 10
    blobs = subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch"], cwd=repo, capture_output=True,
                           check=True).stdout
    assert SECRET not in blobs
    assert git(repo, "for-each-ref", "refs/yagent").count("refs/yagent/checkpoints/t1/") >= 1


def test_a_directory_swapped_for_a_link_out_of_the_project_is_never_written_through(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    outside = tmp_path / "outside"
    outside.mkdir()
    before = create(repo, 1)
    subprocess.run(["rm", "-rf", str(repo / "src")], check=True)
    os.symlink(outside, repo / "src")  # the agent's doing: src/ now leads out of the project
    after = create(repo, 2)
    assert git(repo, "ls-tree", after.commit, "src").startswith("120000")  # recorded as the link it is
    undone = run_job(CheckpointJob(kind=CheckpointJobKind.RESTORE, project_root=str(repo), home=str(tmp_path),
                                   scratch_dir=str(tmp_path), target=before.commit, scope_from=after.commit,
                                   apply=True, force=True, safety_ref="refs/yagent/checkpoints/t1/3", message="u"))
    assert undone.applied and list(outside.iterdir()) == []
    assert not (repo / "src").is_symlink() and (repo / "src" / "m.py").read_text() == "code\n"
