"""Files agents write inside directories git ignores (`build/`): their prior content is added to the run's
checkpoints before the write (a `note` job), every later capture reads them, and an undo puts them back or removes
those the agent made — while the rest of the ignored directory, the user's, is never read or touched. Then the
same as an attacker: paths that leave the project or reach `.git`, a ref moved meanwhile, a noted file swapped for a
link or a FIFO, a directory on the way swapped for a link."""

from __future__ import annotations

import os
from pathlib import Path

from yagent.ipc.vocabulary import ChangeKind, CheckpointJobKind
from yagent.workers.checkpoints.snapshot import MAX_IGNORED

from .repos import create, files_of, git, job, make_repo, state

REF = "refs/yagent/checkpoints/t1/{}"


def _with_build(tmp_path: Path) -> Path:
    """A repository whose ignored build/ holds two files of the user's."""
    repo = make_repo(tmp_path / "r")
    (repo / "build").mkdir()
    (repo / "build" / "keep.txt").write_text("the user's build output\n")
    (repo / "build" / "other.txt").write_text("never the agent's\n")
    return repo


def _held(repo: Path, commit: str) -> set[str]:
    return set(git(repo, "ls-tree", "-r", "--name-only", commit).split())


def _note(repo: Path, amend: list[list[str]], paths: list[str]):
    return job(repo, CheckpointJobKind.NOTE, amend=amend, extra_paths=paths)


def test_noted_files_get_their_prior_content_into_the_checkpoint_and_undo_puts_them_back_or_removes_them(
        tmp_path: Path) -> None:
    repo = _with_build(tmp_path)
    start, user_state = files_of(repo), state(repo)
    before = create(repo, 1)
    assert not any(p.startswith("build/") for p in _held(repo, before.commit))  # a wholly ignored directory

    noted = ["build/keep.txt", "build/new/made.txt"]
    amended = _note(repo, [[REF.format(1), before.commit]], noted)
    assert amended.ok and amended.detail == "", amended.problem
    [[ref, commit]] = amended.amended
    assert ref == REF.format(1) and commit != before.commit
    assert git(repo, "rev-parse", REF.format(1)).strip() == commit  # the ref moved to the amended commit
    assert [f.path for f in amended.files] == ["build/keep.txt"]  # made.txt does not exist yet: it stays absent
    assert _held(repo, commit) == _held(repo, before.commit) | {"build/keep.txt"}
    assert git(repo, "show", f"{commit}:build/keep.txt") == "the user's build output\n"
    assert git(repo, "rev-parse", f"{commit}^1").strip() == git(repo, "rev-parse", f"{before.commit}^").strip()
    assert git(repo, "rev-parse", f"{commit}^2").strip() == before.commit  # what it amends stays reachable
    assert git(repo, "log", "-1", "--format=%B", commit) == git(repo, "log", "-1", "--format=%B", before.commit)
    again = _note(repo, [[REF.format(1), commit]], noted)  # noted twice: what the checkpoint holds is kept
    assert again.ok and again.amended == [[REF.format(1), commit]] and again.files == []

    # The agent's writes, then the after-checkpoint, which reads the noted files.
    (repo / "build" / "keep.txt").write_text("rewritten by the agent\n")
    (repo / "build" / "new").mkdir()
    (repo / "build" / "new" / "made.txt").write_text("made by the agent\n")
    after = create(repo, 2, extra_paths=noted)
    assert {"build/keep.txt", "build/new/made.txt"} <= _held(repo, after.commit)
    assert "build/other.txt" not in _held(repo, after.commit)
    diff = job(repo, CheckpointJobKind.DIFF, pairs=[[commit, after.commit]], patches=False).changes[0]
    assert {(f.path, f.change) for f in diff.files} == {("build/keep.txt", ChangeKind.MODIFIED),
                                                        ("build/new/made.txt", ChangeKind.ADDED)}

    (repo / "build" / "users-later.txt").write_text("the user builds on\n")  # after the sub-task, not noted
    undo = job(repo, CheckpointJobKind.RESTORE, target=commit, scope_from=after.commit, expected=after.commit,
               apply=True, safety_ref=REF.format(3), ref=REF.format(4), message="undo", extra_paths=noted)
    assert undo.ok and undo.applied, undo.problem
    assert {(f.path, f.change) for f in undo.files} == {("build/keep.txt", ChangeKind.MODIFIED),
                                                        ("build/new/made.txt", ChangeKind.DELETED)}
    assert files_of(repo) == {**start, "build/users-later.txt": b"the user builds on\n"}
    assert not (repo / "build" / "new").exists()  # the directory the agent made went with its file
    assert state(repo) == user_state
    # The safety checkpoint holds the agent's state, so the undo can be undone.
    assert git(repo, "show", f"{undo.safety_commit}:build/new/made.txt") == "made by the agent\n"


def test_a_restore_to_a_checkpoint_older_than_the_note_leaves_the_file_and_says_why(tmp_path: Path) -> None:
    repo = _with_build(tmp_path)
    older = create(repo, 1)  # made before anyone noted build/keep.txt: it does not know that file
    (repo / "a.txt").write_text("changed\n")
    before = create(repo, 2)
    amended = _note(repo, [[REF.format(2), before.commit]], ["build/keep.txt"])
    (repo / "build" / "keep.txt").write_text("agent\n")
    rolled = job(repo, CheckpointJobKind.RESTORE, target=older.commit, apply=True, safety_ref=REF.format(3),
                 message="rollback", extra_paths=["build/keep.txt"], noted_later=["build/keep.txt"])
    assert amended.ok and rolled.ok and rolled.applied
    assert (repo / "build" / "keep.txt").read_text() == "agent\n"  # not deleted for want of knowledge
    assert (repo / "a.txt").read_text() == "one\n"
    assert any(line.startswith("build/keep.txt (an agent wrote it inside an ignored directory after")
               for line in rolled.left)


def test_a_note_refuses_paths_that_leave_the_project_or_reach_git_and_refs_that_are_not_checkpoints(
        tmp_path: Path) -> None:
    repo = _with_build(tmp_path)
    before = create(repo, 1)
    for bad in ("../outside.txt", "/etc/passwd", ".git/config", "build/../../x", "build//x", "", "a\0b", "x" * 5000):
        refused = _note(repo, [[REF.format(1), before.commit]], [bad])
        assert not refused.ok and "refused: a noted path" in refused.problem, bad
    for amend in ([["refs/heads/main", before.commit]], [[REF.format(1), "HEAD"]], [[REF.format(1)]], ["x"]):
        refused = _note(repo, amend, ["build/keep.txt"])  # type: ignore[arg-type]
        assert not refused.ok and "refused:" in refused.problem, amend
    forged_later = job(repo, CheckpointJobKind.RESTORE, target=before.commit, noted_later=["../../etc/passwd"])
    assert not forged_later.ok and "refused: a noted path" in forged_later.problem
    assert git(repo, "rev-parse", REF.format(1)).strip() == before.commit  # nothing moved
    assert git(repo, "rev-parse", "refs/heads/main").strip() == git(repo, "rev-parse", "HEAD").strip()


def test_a_thousand_long_names_in_one_note_still_keep_the_real_file(tmp_path: Path) -> None:
    repo = _with_build(tmp_path)
    before = create(repo, 1)
    # ~3.6 MB of names: as arguments to git they would pass the kernel's limit and the whole note would fail.
    flood = [f"build/{'d' * 200}/{i:04d}" + "f" * 3400 for i in range(999)]
    noted = _note(repo, [[REF.format(1), before.commit]], [*flood, "build/keep.txt"])
    assert noted.ok and noted.detail == "", noted.detail
    assert [f.path for f in noted.files] == ["build/keep.txt"]


def test_a_ref_moved_meanwhile_is_reported_and_the_other_checkpoints_are_still_amended(tmp_path: Path) -> None:
    repo = _with_build(tmp_path)
    first, second = create(repo, 1), create(repo, 2)
    git(repo, "update-ref", REF.format(1), git(repo, "rev-parse", "HEAD").strip())  # someone moved it
    noted = _note(repo, [[REF.format(1), first.commit], [REF.format(2), second.commit]], ["build/keep.txt"])
    assert noted.ok and REF.format(1) in noted.detail
    [[ref, commit]] = noted.amended
    assert ref == REF.format(2) and "build/keep.txt" in _held(repo, commit)
    assert git(repo, "rev-parse", REF.format(1)).strip() == git(repo, "rev-parse", "HEAD").strip()


def test_a_noted_file_swapped_for_a_link_a_fifo_or_put_behind_a_linked_directory_is_never_read_through(
        tmp_path: Path) -> None:
    repo = _with_build(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not the project's\n")
    (repo / "build" / "link.txt").symlink_to(outside / "secret.txt")
    os.mkfifo(repo / "build" / "pipe")
    (repo / "build" / "through").symlink_to(outside, target_is_directory=True)
    before = create(repo, 1)
    noted = _note(repo, [[REF.format(1), before.commit]], ["build/link.txt", "build/pipe", "build/through/secret.txt"])
    assert noted.ok and noted.detail == ""
    assert set(noted.skipped) == {"build/pipe"}  # there, not read: the daemon does not note it, no undo touches it
    [[_ref, commit]] = noted.amended
    assert "build/pipe" not in _held(repo, commit) and "build/through/secret.txt" not in _held(repo, commit)
    # The link is kept as a link: its target's bytes never enter the repository.
    assert git(repo, "cat-file", "-p", f"{commit}:build/link.txt") == str(outside / "secret.txt")
    assert "not the project's" not in git(repo, "log", "-p", "--all")


def test_captures_read_noted_files_even_past_the_cap_on_lone_ignored_files(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {".gitignore": "*.log\n", "a.txt": "one\n"})
    for i in range(MAX_IGNORED + 5):
        (repo / f"f{i:05d}.log").write_text(f"{i}\n")
    last = f"f{MAX_IGNORED + 4:05d}.log"
    plain = create(repo, 1)
    assert last in plain.skipped  # past the cap: a plain capture does not read it
    noted = create(repo, 2, extra_paths=[last])
    assert last in _held(repo, noted.commit)


def test_a_restore_puts_back_a_file_noted_later_that_the_target_holds(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    (repo / ".env").write_text("KEY=orig\n")  # ignored on its own: every capture reads it
    first = create(repo, 1)
    (repo / ".env").write_text("KEY=agent\n")
    rolled = job(repo, CheckpointJobKind.RESTORE, target=first.commit, apply=True, safety_ref=REF.format(2),
                 message="rollback", extra_paths=[".env"], noted_later=[".env"])
    assert rolled.ok and rolled.applied and (repo / ".env").read_text() == "KEY=orig\n"
    assert not any(line.startswith(".env") for line in rolled.left)


def test_a_noted_path_that_became_a_directory_is_read_file_by_file_and_undone(tmp_path: Path) -> None:
    repo = _with_build(tmp_path)
    start = files_of(repo)
    before = create(repo, 1)
    assert _note(repo, [[REF.format(1), before.commit]], ["build/lib"]).ok  # a directory is moved onto it
    (repo / "build" / "lib" / "sub").mkdir(parents=True)
    (repo / "build" / "lib" / "a.py").write_text("a\n")
    (repo / "build" / "lib" / "sub" / "b.py").write_text("b\n")
    after = create(repo, 2, extra_paths=["build/lib"])
    assert {"build/lib/a.py", "build/lib/sub/b.py"} <= _held(repo, after.commit)
    commit = git(repo, "rev-parse", REF.format(1)).strip()
    undo = job(repo, CheckpointJobKind.RESTORE, target=commit, scope_from=after.commit, expected=after.commit,
               apply=True, safety_ref=REF.format(3), message="undo", extra_paths=["build/lib"])
    assert undo.ok and undo.applied and files_of(repo) == start


def test_a_ref_the_daemon_moved_but_never_recorded_is_amended_again_and_the_recorded_commit_survives_gc(
        tmp_path: Path) -> None:
    repo = _with_build(tmp_path)
    before = create(repo, 1)
    first = _note(repo, [[REF.format(1), before.commit]], ["build/keep.txt"])
    [[_ref, amended]] = first.amended
    (repo / "build" / "second.txt").write_text("second\n")
    # The daemon was killed before it recorded `amended`: it still names the checkpoint as `before.commit`.
    git(repo, "reflog", "expire", "--expire=now", "--all")
    git(repo, "gc", "-q", "--prune=now")
    assert git(repo, "cat-file", "-t", before.commit).strip() == "commit"
    again = _note(repo, [[REF.format(1), before.commit]], ["build/second.txt"])
    assert again.ok and again.detail == "", again.detail
    [[_ref, newest]] = again.amended
    assert {"build/keep.txt", "build/second.txt"} <= _held(repo, newest)
    assert git(repo, "rev-parse", f"{newest}^2").strip() == amended
