"""The git work of checkpoints on real repositories built here: what a checkpoint holds, that the user's branch,
index, stash and worktree are left exactly as they were, undo and rollback with the user's own edits, merges and
rebases in progress, detached heads, worktrees, submodules, projects that are no repository — and the repository as an
attacker (filters, hooks, ref names, `.git` files pointing elsewhere, huge and special files)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from yagent.ipc.vocabulary import ChangeKind, CheckpointJobKind
from yagent.workers.checkpoints.repository import Repository, Unsupported, find_repository
from yagent.workers.checkpoints.snapshot import MAX_FILE_BYTES

from .repos import create, files_of, git, job, make_repo, state


def _dirty(repo: Path) -> None:
    """Staged and unstaged changes to one file, a deleted tracked file, an untracked file, a lone ignored file
    and an ignored directory."""
    (repo / "a.txt").write_text("one\nstaged\n")
    git(repo, "add", "a.txt")
    (repo / "a.txt").write_text("one\nstaged\ndirty\n")
    (repo / "src" / "m.py").unlink()
    (repo / "u.txt").write_text("untracked\n")
    (repo / ".env").write_text("SECRET=user\n")
    (repo / "build").mkdir()
    (repo / "build" / "x.o").write_bytes(b"\x00object")


def test_a_checkpoint_holds_staged_dirty_untracked_and_lone_ignored_files_and_touches_nothing_of_the_user(
        tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    git(repo, "stash", "list")
    _dirty(repo)
    before = state(repo)
    made = create(repo, 1)
    assert state(repo) == before  # index bytes, HEAD, branches, tags, stash, status: all as they were
    assert git(repo, "rev-parse", "refs/yagent/checkpoints/t1/1").strip() == made.commit
    assert git(repo, "for-each-ref", "refs/tags") == ""  # a ref of our own, never a tag `push --tags` carries
    assert git(repo, "rev-parse", f"{made.commit}^").strip() == git(repo, "rev-parse", "HEAD").strip()
    held = set(git(repo, "ls-tree", "-r", "--name-only", made.commit).split())
    assert held == {".gitignore", "a.txt", "u.txt", ".env"}  # not src/m.py (deleted), not build/ (an ignored dir)
    assert git(repo, "show", f"{made.commit}:a.txt") == "one\nstaged\ndirty\n"  # the worktree, not the index
    assert git(repo, "show", f"{made.commit}:.env") == "SECRET=user\n"
    assert made.head == "on main" and made.skipped == {}


def test_undo_of_a_sub_task_puts_back_the_dirty_state_and_refuses_over_the_users_later_edit(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    _dirty(repo)
    start = files_of(repo)
    user_index = (repo / ".git" / "index").read_bytes()
    before = create(repo, 1)
    # The sub-task: edits, deletes, creates, rewrites the ignored .env.
    (repo / "a.txt").write_text("agent\n")
    (repo / "u.txt").unlink()
    (repo / "new").mkdir()
    (repo / "new" / "n.py").write_text("agent made\n")
    (repo / ".env").write_text("SECRET=agent\n")
    after = create(repo, 2)
    diff = job(repo, CheckpointJobKind.DIFF, pairs=[[before.commit, after.commit]], patches=True).changes[0]
    assert {(f.path, f.change) for f in diff.files} == {
        ("a.txt", ChangeKind.MODIFIED), ("u.txt", ChangeKind.DELETED), ("new/n.py", ChangeKind.ADDED),
        (".env", ChangeKind.MODIFIED)}
    a_txt = next(f for f in diff.files if f.path == "a.txt")
    assert a_txt.removed == 3 and a_txt.added == 1 and "+agent" in a_txt.patch and "-dirty" in a_txt.patch

    (repo / "new" / "n.py").write_text("the user's own edit\n")  # after the sub-task, the user works on
    edited = files_of(repo)
    undo = dict(target=before.commit, scope_from=after.commit, expected=after.commit, apply=True,
                safety_ref="refs/yagent/checkpoints/t1/3", ref="refs/yagent/checkpoints/t1/4", message="undo")
    refused = job(repo, CheckpointJobKind.RESTORE, **undo)
    assert refused.ok and not refused.applied and refused.changed_since == ["new/n.py"]
    assert files_of(repo) == edited  # nothing written
    assert git(repo, "for-each-ref", "refs/yagent/checkpoints/t1/3") == ""

    forced = job(repo, CheckpointJobKind.RESTORE, force=True, **undo)
    assert forced.applied and files_of(repo) == start  # exactly the state before the sub-task, .env included
    assert not (repo / "new").exists()  # the directory it made is gone with its file
    assert (repo / ".git" / "index").read_bytes() == user_index
    assert git(repo, "show", f"{forced.safety_commit}:new/n.py") == "the user's own edit\n"  # kept, undoable
    assert git(repo, "rev-parse", "refs/yagent/checkpoints/t1/4").strip() == forced.commit  # how it left things
    assert git(repo, "status", "--porcelain").splitlines() == ["MM a.txt", " D src/m.py", "?? u.txt"]


def test_a_rollback_over_the_users_edit_of_the_same_file_keeps_that_edit_in_its_safety_checkpoint(
        tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    mark = create(repo, 1)
    (repo / "a.txt").write_text("agent step\n")
    (repo / "a.txt").write_text("agent step\nand the user's line\n")
    rolled = job(repo, CheckpointJobKind.RESTORE, target=mark.commit, apply=True, force=True,
                 safety_ref="refs/yagent/checkpoints/t1/2", ref="refs/yagent/checkpoints/t1/3", message="rollback")
    assert rolled.applied and [f.path for f in rolled.files] == ["a.txt"]
    assert (repo / "a.txt").read_text() == "one\n"
    assert git(repo, "show", f"{rolled.safety_commit}:a.txt") == "agent step\nand the user's line\n"
    back = job(repo, CheckpointJobKind.RESTORE, target=rolled.safety_commit, apply=True, force=True,
               safety_ref="refs/yagent/checkpoints/t1/4", message="rollback of the rollback")
    assert back.applied and (repo / "a.txt").read_text() == "agent step\nand the user's line\n"


def test_a_merge_in_progress_keeps_its_conflicts_in_the_users_index_and_a_detached_head_is_the_parent(
        tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    git(repo, "checkout", "-q", "-b", "other")
    (repo / "a.txt").write_text("theirs\n")
    git(repo, "commit", "-qam", "theirs")
    git(repo, "checkout", "-q", "main")
    (repo / "a.txt").write_text("ours\n")
    git(repo, "commit", "-qam", "ours")
    assert git(repo, "merge", "other", check=False) is not None
    conflicted = git(repo, "ls-files", "-u")
    assert conflicted and (repo / ".git" / "MERGE_HEAD").exists()
    before = state(repo)
    made = create(repo, 1)
    assert made.head == "on main, merge in progress"
    assert state(repo) == before and git(repo, "ls-files", "-u") == conflicted
    assert "<<<<<<<" in git(repo, "show", f"{made.commit}:a.txt")  # what is on disk, markers and all
    (repo / "a.txt").write_text("resolved by the agent\n")
    undone = job(repo, CheckpointJobKind.RESTORE, target=made.commit, apply=True, force=True,
                 safety_ref="refs/yagent/checkpoints/t1/2", message="undo")
    assert undone.applied and "<<<<<<<" in (repo / "a.txt").read_text()
    assert (repo / ".git" / "MERGE_HEAD").exists() and git(repo, "ls-files", "-u") == conflicted

    git(repo, "merge", "--abort")
    git(repo, "checkout", "-q", "--detach", "HEAD~1")
    detached = create(repo, 3)
    head = git(repo, "rev-parse", "HEAD").strip()
    assert detached.head == f"detached at {head[:12]}"
    assert git(repo, "rev-parse", f"{detached.commit}^").strip() == head


def _git_state(repo: Path) -> dict[str, bytes]:
    """Every file of the repository's git dir but its objects and our own refs: HEAD, ORIG_HEAD, REBASE_HEAD, the
    index, the rebase's own directory (`rebase-merge/` or `rebase-apply/`: todo, done, onto, head-name, …), logs."""
    top = repo / ".git"
    found: dict[str, bytes] = {}
    for dirpath, dirs, names in os.walk(top):
        here = Path(dirpath).relative_to(top).as_posix()
        dirs[:] = [d for d in dirs if (d if here == "." else f"{here}/{d}") not in ("objects", "refs/yagent")]
        for name in names:
            found[(Path(dirpath) / name).relative_to(top).as_posix()] = (Path(dirpath) / name).read_bytes()
    return found


@pytest.mark.parametrize("backend, directory", [("--merge", "rebase-merge"), ("--apply", "rebase-apply")])
def test_a_rebase_stopped_on_a_conflict_is_left_as_it_was_by_a_checkpoint_and_by_a_rollback_to_it(
        tmp_path: Path, backend: str, directory: str) -> None:
    repo = make_repo(tmp_path / "r")
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "a.txt").write_text("feature\n")
    git(repo, "commit", "-qam", "feature")
    feature = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "main")
    (repo / "a.txt").write_text("main\n")
    git(repo, "commit", "-qam", "main")
    main = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "feature")
    assert "CONFLICT" in git(repo, "rebase", backend, "main", check=False)  # stops on a.txt
    (repo / "u.txt").write_text("the user's untracked file\n")
    conflicted = git(repo, "ls-files", "-u")
    head = git(repo, "rev-parse", "HEAD").strip()
    assert conflicted and head == main and (repo / ".git" / directory).is_dir()
    quiet = {"GIT_OPTIONAL_LOCKS": "0"}  # `git status` here must not refresh the index it is compared by
    assert "rebase in progress" in git(repo, "status", env=quiet)
    before, in_git, on_disk = state(repo), _git_state(repo), files_of(repo)

    made = create(repo, 1)
    assert made.head == f"detached at {head[:12]}, rebase of feature in progress"
    assert state(repo) == before and _git_state(repo) == in_git and files_of(repo) == on_disk
    assert git(repo, "ls-files", "-u") == conflicted and "rebase in progress" in git(repo, "status", env=quiet)
    assert git(repo, "rev-parse", f"{made.commit}^").strip() == head  # the commit the rebase stands on
    assert "<<<<<<<" in git(repo, "show", f"{made.commit}:a.txt")  # what is on disk, markers and all
    assert git(repo, "show", f"{made.commit}:u.txt") == "the user's untracked file\n"

    (repo / "a.txt").write_text("resolved by the agent\n")  # the agent's sub-task: resolves, adds a file
    (repo / "agent.txt").write_text("made by the agent\n")
    undone = job(repo, CheckpointJobKind.RESTORE, target=made.commit, apply=True, force=True,
                 safety_ref="refs/yagent/checkpoints/t1/2", message="undo")
    assert undone.applied and {f.path for f in undone.files} == {"a.txt", "agent.txt"}
    assert files_of(repo) == on_disk  # the conflict markers back, the agent's file gone, the user's file kept
    assert state(repo) == before and _git_state(repo) == in_git  # the index (its conflict stages), HEAD, the rebase
    assert git(repo, "ls-files", "-u") == conflicted and "rebase in progress" in git(repo, "status", env=quiet)
    assert git(repo, "show", f"{undone.safety_commit}:a.txt") == "resolved by the agent\n"  # undoable in turn

    (repo / "a.txt").write_text("resolved by the user\n")  # and the user's rebase goes on to its end
    git(repo, "add", "a.txt")
    git(repo, "rebase", "--continue", env={"GIT_EDITOR": "true"})
    assert git(repo, "symbolic-ref", "HEAD").strip() == "refs/heads/feature"
    assert git(repo, "rev-parse", "feature^").strip() == main and git(repo, "rev-parse", "feature").strip() != feature
    assert git(repo, "show", "feature:a.txt") == "resolved by the user\n" and not (repo / ".git" / directory).exists()


def test_a_project_that_is_no_repository_or_whose_git_file_points_elsewhere_gets_no_checkpoint(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "f.txt").write_text("x\n")
    got = job(plain, CheckpointJobKind.CREATE, ref="refs/yagent/checkpoints/t1/1", message="m")
    assert not got.ok and "not a git repository" in got.unsupported

    victim = make_repo(tmp_path / "victim")
    victim_refs = git(victim, "for-each-ref")
    (plain / ".git").write_text(f"gitdir: {victim / '.git'}\n")  # an agent's .git file into the user's other repo
    got = job(plain, CheckpointJobKind.CREATE, ref="refs/yagent/checkpoints/t1/1", message="m")
    assert not got.ok and "does not point back" in got.unsupported
    assert git(victim, "for-each-ref") == victim_refs

    linked = tmp_path / "linked"
    git(victim, "worktree", "add", "-q", str(linked))
    (linked / "a.txt").write_text("in the worktree\n")
    made = create(linked, 1, task="t2")
    assert "linked worktree" in made.head
    assert git(victim, "show", "refs/yagent/checkpoints/t2/1:a.txt") == "in the worktree\n"

    mid = job(victim, CheckpointJobKind.CREATE, ref="refs/yagent/checkpoints/t1/9", message="m",
              expected_common_dir=str(tmp_path / "elsewhere" / ".git"))  # pinned by the task's first job
    assert not mid.ok and "changed during the task" in mid.unsupported

    bare = tmp_path / "bare.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    assert isinstance(find_repository(bare), Unsupported)


def test_a_hostile_filter_fsmonitor_and_hooks_never_run_and_content_is_stored_as_it_is(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    marker = tmp_path / "ran"
    evil = f"sh -c 'echo ran >> {marker}; cat'"
    for key in ("clean", "smudge", "process"):
        git(repo, "config", f"filter.evil.{key}", evil)
    git(repo, "config", "filter.evil.required", "true")
    git(repo, "config", "filter.Odd=Name.clean", evil)  # a driver name -c could not carry
    hook = f"#!/bin/sh\necho ran >> {marker}\n"
    for name in ("reference-transaction", "post-index-change", "pre-commit", "post-checkout"):
        (repo / ".git" / "hooks" / name).write_text(hook)
        (repo / ".git" / "hooks" / name).chmod(0o755)
    (tmp_path / "fsmonitor").write_text(hook)
    (tmp_path / "fsmonitor").chmod(0o755)
    git(repo, "config", "core.fsmonitor", str(tmp_path / "fsmonitor"))
    (repo / ".gitattributes").write_text("* filter=evil\n*.dat filter=Odd=Name\n")  # what an agent writes
    (repo / "a.txt").write_text("raw bytes\n")
    (repo / "b.dat").write_bytes(b"\x00\x01binary\xff")
    before = create(repo, 1)
    (repo / "a.txt").write_text("changed\n")
    after = create(repo, 2)
    job(repo, CheckpointJobKind.DIFF, pairs=[[before.commit, after.commit]], patches=True)
    job(repo, CheckpointJobKind.RESTORE, target=before.commit, apply=True, force=True,
        safety_ref="refs/yagent/checkpoints/t1/3", ref="refs/yagent/checkpoints/t1/4", message="undo")
    assert not marker.exists(), marker.read_text()
    assert (repo / "a.txt").read_text() == "raw bytes\n"
    raw = subprocess.run(["git", "cat-file", "blob", f"{before.commit}:b.dat"], cwd=repo, capture_output=True,
                         check=True).stdout
    assert raw == b"\x00\x01binary\xff"


def test_huge_and_special_files_are_named_and_never_read_or_touched_and_binaries_are_kept(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    with open(repo / "huge.bin", "wb") as fh:  # sparse: no disk, but over the limit
        fh.truncate(MAX_FILE_BYTES + 1)
    os.mkfifo(repo / "pipe")
    (repo / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    before = create(repo, 1)
    assert set(before.skipped) == {"huge.bin"} and "MiB" in before.skipped["huge.bin"]
    held = git(repo, "ls-tree", "-r", "--name-only", before.commit).split()
    assert "huge.bin" not in held and "pipe" not in held and "img.png" in held  # a FIFO: git lists none
    (repo / "img.png").write_bytes(b"\x89PNG changed\x00")
    after = create(repo, 2)
    changes = job(repo, CheckpointJobKind.DIFF, pairs=[[before.commit, after.commit]], patches=True).changes[0]
    assert [(f.path, f.binary) for f in changes.files] == [("img.png", True)]
    # A checkpoint made before the huge file existed still never removes it: it was never read.
    (repo / "huge.bin").unlink()
    empty = create(repo, 3)
    with open(repo / "huge.bin", "wb") as fh:
        fh.truncate(MAX_FILE_BYTES + 1)
    back = job(repo, CheckpointJobKind.RESTORE, target=empty.commit, apply=True, force=True, untouchable=["huge.bin"],
               safety_ref="refs/yagent/checkpoints/t1/4", message="undo")
    assert back.applied and (repo / "huge.bin").stat().st_size == MAX_FILE_BYTES + 1
    assert stat.S_ISFIFO(os.lstat(repo / "pipe").st_mode)


def test_names_with_shell_metacharacters_are_data_and_forged_refs_or_commits_are_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    git(repo, "checkout", "-q", "-b", "feat/$(touch${IFS}pwned);x`id`")
    odd = repo / "$(touch pwned) ; rm -rf x.txt"
    odd.write_text("data\n")
    before = create(repo, 1)
    assert "feat/$(touch${IFS}pwned);x`id`" in before.head
    odd.write_text("changed\n")
    after = create(repo, 2)
    undone = job(repo, CheckpointJobKind.RESTORE, target=before.commit, scope_from=after.commit,
                 expected=after.commit, apply=True, safety_ref="refs/yagent/checkpoints/t1/3", message="undo")
    assert undone.applied and odd.read_text() == "data\n"
    assert not (repo / "pwned").exists() and not (tmp_path / "pwned").exists()
    for forged in (dict(kind=CheckpointJobKind.CREATE, ref="refs/yagent/checkpoints/../../heads/main"),
                   dict(kind=CheckpointJobKind.CREATE, ref="refs/heads/main"),
                   dict(kind=CheckpointJobKind.RESTORE, target="HEAD~1; rm -rf /"),
                   dict(kind=CheckpointJobKind.DIFF, pairs=[["--output=/tmp/x", before.commit]]),
                   dict(kind=CheckpointJobKind.SQUASH, ref="refs/heads/x..y", base=before.commit,
                        target=after.commit),
                   dict(kind=CheckpointJobKind.PRUNE, delete_refs=["refs/heads/main"])):
        kind = forged.pop("kind")
        got = job(repo, kind, **forged)  # type: ignore[arg-type]
        assert not got.ok and got.problem.startswith("refused:"), (kind, got)
    assert git(repo, "rev-parse", "--verify", "-q", "refs/heads/main").strip()


def test_a_submodule_is_recorded_as_it_is_and_never_moved(tmp_path: Path) -> None:
    sub = make_repo(tmp_path / "sub", {"s.txt": "sub\n"})
    repo = make_repo(tmp_path / "r")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "sub")
    git(repo, "commit", "-qm", "submodule")
    before = create(repo, 1)
    inner = repo / "sub"
    (inner / "s.txt").write_text("moved on\n")
    git(inner, "commit", "-qam", "inside")
    (repo / "a.txt").write_text("agent\n")
    after = create(repo, 2)
    undone = job(repo, CheckpointJobKind.RESTORE, target=before.commit, scope_from=after.commit, apply=True,
                 force=True, safety_ref="refs/yagent/checkpoints/t1/3", message="undo")
    assert undone.applied and (repo / "a.txt").read_text() == "one\n"
    assert [line.split(" (")[0] for line in undone.left] == ["sub"] and "submodule" in undone.left[0]
    assert (inner / "s.txt").read_text() == "moved on\n"


def test_a_project_below_the_top_of_its_repository_is_checkpointed_and_restored_alone(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"top.txt": "top\n", "app/a.txt": "a\n"})
    found = find_repository(repo / "app")
    assert isinstance(found, Repository) and found.prefix == "app"
    before = create(repo / "app", 1)
    (repo / "top.txt").write_text("outside the project\n")
    (repo / "app" / "a.txt").write_text("agent\n")
    (repo / "app" / "b.txt").write_text("agent new\n")
    after = create(repo / "app", 2)
    files = job(repo / "app", CheckpointJobKind.DIFF, pairs=[[before.commit, after.commit]]).changes[0].files
    assert sorted(f.path for f in files) == ["app/a.txt", "app/b.txt"]
    job(repo / "app", CheckpointJobKind.RESTORE, target=before.commit, apply=True, force=True,
        safety_ref="refs/yagent/checkpoints/t1/3", message="undo")
    assert (repo / "app" / "a.txt").read_text() == "a\n" and not (repo / "app" / "b.txt").exists()
    assert (repo / "top.txt").read_text() == "outside the project\n"
