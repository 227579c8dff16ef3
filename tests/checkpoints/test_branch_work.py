"""What checkpoints do to branches and refs: `squash_on_exit` commits a turn's changes on an agent branch (never
on the user's), `auto_merge_on_exit` moves the user's branch only when nothing can be lost, and the retention prune
removes refs so that git can collect what only they held."""

from __future__ import annotations

import subprocess
from pathlib import Path

from yagent.ipc.vocabulary import CheckpointJobKind

from .repos import create, git, job, make_repo


def _turn(repo: Path) -> tuple[str, str]:
    before = create(repo, 1)
    (repo / "a.txt").write_text("agent\n")
    (repo / "src" / "new.py").write_text("made\n")
    (repo / ".env").write_text("SECRET=agent\n")  # ignored: undoable from a checkpoint, never committed
    (repo / ".gitattributes").write_text("*.bin filter=lfs\n")
    (repo / "big.bin").write_bytes(b"\x00lfs content")
    after = create(repo, 2)
    return before.commit, after.commit


def _squash(repo: Path, base: str, last: str, *, merge: bool, delete: bool = False) -> tuple[str, str]:
    got = job(repo, CheckpointJobKind.SQUASH, ref="refs/heads/yagent/t1", base=base, target=last,
              message="yagent: the turn", merge=merge, delete_branch=delete)
    assert got.ok, got.problem
    return got.commit, got.detail


def test_a_turns_changes_become_one_commit_on_the_agent_branch_without_ignored_or_filtered_files(
        tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    head = git(repo, "rev-parse", "HEAD").strip()
    index = (repo / ".git" / "index").read_bytes()
    base, last = _turn(repo)
    commit, detail = _squash(repo, base, last, merge=False)
    assert git(repo, "rev-parse", "refs/heads/yagent/t1").strip() == commit
    assert git(repo, "rev-parse", f"{commit}^").strip() == head
    assert sorted(git(repo, "diff-tree", "-r", "--name-only", "--no-commit-id", commit).split()) == [
        ".gitattributes", "a.txt", "src/new.py"]  # not .env (ignored), not big.bin (a filter: LFS)
    assert "big.bin" in detail and "yagent/t1" in detail
    assert git(repo, "rev-parse", "HEAD").strip() == head and git(repo, "symbolic-ref", "HEAD").strip() == \
        "refs/heads/main"
    assert (repo / ".git" / "index").read_bytes() == index  # without auto_merge_on_exit nothing of the user's moves
    again, detail = _squash(repo, base, last, merge=False)
    assert again == "" and "already holds" in detail


def test_auto_merge_fast_forwards_the_users_branch_only_when_nothing_can_be_lost(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    base, last = _turn(repo)
    (repo / "src" / "m.py").write_text("staged by the user\n")
    git(repo, "add", "src/m.py")
    head = git(repo, "rev-parse", "HEAD").strip()
    _commit, detail = _squash(repo, base, last, merge=True)
    assert "not merged into your branch: you have staged changes" in detail
    assert git(repo, "rev-parse", "HEAD").strip() == head

    git(repo, "reset", "-q", "src/m.py")
    git(repo, "checkout", "-q", "src/m.py")
    git(repo, "update-ref", "-d", "refs/heads/yagent/t1")
    commit, detail = _squash(repo, base, last, merge=True, delete=True)
    assert "main fast-forwarded" in detail and "deleted" in detail
    assert git(repo, "rev-parse", "HEAD").strip() == commit
    assert git(repo, "for-each-ref", "refs/heads/yagent") == ""
    status = git(repo, "status", "--porcelain").splitlines()
    assert "?? big.bin" in status and not any(line.endswith(("a.txt", "new.py")) for line in status)


def test_the_prune_removes_checkpoint_refs_so_their_objects_can_be_collected(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    (repo / "only-in-a-checkpoint.txt").write_text("unique content 8c1f\n")
    made = create(repo, 1)
    (repo / "only-in-a-checkpoint.txt").unlink()
    blob = git(repo, "rev-parse", f"{made.commit}:only-in-a-checkpoint.txt").strip()
    pruned = job(repo, CheckpointJobKind.PRUNE, delete_refs=["refs/yagent/checkpoints/t1/1",
                                                            "refs/yagent/checkpoints/t1/7"])  # 7: gone already
    assert pruned.ok and pruned.detail == "1 checkpoint refs removed"
    assert git(repo, "for-each-ref", "refs/yagent") == ""
    assert subprocess.run(["git", "cat-file", "-e", blob], cwd=repo, check=False).returncode == 0
    git(repo, "gc", "-q", "--prune=now")
    assert subprocess.run(["git", "cat-file", "-e", blob], cwd=repo, check=False,
                          capture_output=True).returncode != 0  # collected: nothing held it any more
