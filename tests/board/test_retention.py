"""The count cap (worker side) and the ttl prune (daemon side): file names decide age across agent
directories, links are never followed, live and resumable tasks keep their boards."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from yagent.ipc.state_layout import artifacts_dir, notes_dir, task_dir
from yagent.ipc.state_retention import prune_boards
from yagent.workers.board import ArtifactStore, Handoff, NoteRef, NoteStore, enforce_count_cap


def _note(store: NoteStore, agent: str, stem: str) -> NoteRef:
    ref = store.write(agent, Handoff(stem), "body")
    target = store.root / ref.agent / f"{stem}.md"
    os.rename(store.path(ref), target)
    return NoteRef(ref.agent, stem)


def test_the_count_cap_sorts_by_file_name_across_agent_dirs_and_keeps_the_dirs(tmp_path: Path) -> None:
    store = NoteStore(tmp_path / "notes")
    # By path, every "a_repo" note would sort before every "z_coding" one; by file name they interleave.
    _note(store, "z_coding", "20261201-000000-000000-00000001")
    _note(store, "a_repo", "20261202-000000-000000-00000002")
    _note(store, "z_coding", "20261203-000000-000000-00000003")
    _note(store, "a_repo", "20261204-000000-000000-00000004")
    (store.root / "a_repo" / "20261130-000000-000000-00000000.md.tmp").write_text("in progress")
    assert enforce_count_cap(store, 2) == 2
    assert [r.stem for r in store.refs()] == ["20261203-000000-000000-00000003", "20261204-000000-000000-00000004"]
    assert (store.root / "a_repo" / "20261130-000000-000000-00000000.md.tmp").exists()
    _note(store, "only_old", "20261101-000000-000000-00000009")
    enforce_count_cap(store, 2)
    assert (store.root / "only_old").is_dir() and not list((store.root / "only_old").iterdir())


def test_the_count_cap_never_follows_or_removes_a_link(tmp_path: Path) -> None:
    store = NoteStore(tmp_path / "notes")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    victim = elsewhere / "20260101-000000-000000-00000000.md"
    victim.write_text("not ours")
    _note(store, "repo", "20261201-000000-000000-00000001")
    (store.root / "repo" / "20250101-000000-000000-00000000.md").symlink_to(victim)
    (store.root / "linked").symlink_to(elsewhere)
    assert enforce_count_cap(store, 1) == 0
    assert victim.read_text() == "not ours"
    assert (store.root / "repo" / "20250101-000000-000000-00000000.md").is_symlink()


def _age(path: Path, seconds: float) -> None:
    for dirpath, dirnames, filenames in os.walk(path):
        for name in (*dirnames, *filenames):
            t = os.lstat(os.path.join(dirpath, name)).st_mtime - seconds
            os.utime(os.path.join(dirpath, name), (t, t), follow_symlinks=False)
    t = os.lstat(path).st_mtime - seconds
    os.utime(path, (t, t), follow_symlinks=False)


def _task_with_board(home: Path, task: str, age: float) -> None:
    NoteStore(notes_dir(home, task)).write("repo", Handoff("c"), "body")
    ArtifactStore(artifacts_dir(home, task)).put("long text")
    (task_dir(home, task) / "memory.jsonl").write_text("{}\n")
    _age(task_dir(home, task), age)


def test_boards_and_artifacts_idle_past_their_retention_are_removed_unless_kept(tmp_path: Path) -> None:
    home = tmp_path
    _task_with_board(home, "old", 10_000)
    _task_with_board(home, "live", 10_000)
    _task_with_board(home, "fresh", 0)
    pruned = prune_boards(home, ttl=5_000, artifact_retention=5_000, keep=lambda task: task == "live")
    assert pruned.boards == ["old"] and pruned.artifacts == 1
    assert not notes_dir(home, "old").exists() and not list(artifacts_dir(home, "old").iterdir())
    assert (task_dir(home, "old") / "memory.jsonl").exists()  # the conversation is not the board's to remove
    assert list(NoteStore(notes_dir(home, "live")).refs()) and list(NoteStore(notes_dir(home, "fresh")).refs())


def test_one_fresh_note_keeps_a_whole_board(tmp_path: Path) -> None:
    _task_with_board(tmp_path, "t", 10_000)
    NoteStore(notes_dir(tmp_path, "t")).write("coding", Handoff("new"), "body")
    assert prune_boards(tmp_path, ttl=5_000, artifact_retention=0, keep=lambda _t: False).boards == []


def test_ttl_zero_never_removes(tmp_path: Path) -> None:
    _task_with_board(tmp_path, "old", 10**8)
    assert prune_boards(tmp_path, ttl=0, artifact_retention=0, keep=lambda _t: False).boards == []
    assert NoteStore(notes_dir(tmp_path, "old")).refs()


def test_the_prune_never_follows_a_link(tmp_path: Path) -> None:
    home = tmp_path / "home"
    precious = tmp_path / "precious"
    NoteStore(precious).write("repo", Handoff("c"), "body")
    _age(precious, 10_000)
    (home / "tasks").mkdir(parents=True)
    (home / "tasks" / "linked-task").symlink_to(precious.parent)  # a task dir that is a link
    task_dir(home, "t").mkdir()
    notes_dir(home, "t").symlink_to(precious)  # a board that is a link
    artifacts_dir(home, "t").mkdir()
    (artifacts_dir(home, "t") / "20260101-000000-000000-00000000").symlink_to(precious / "repo")
    _age(task_dir(home, "t"), 10_000)
    prune_boards(home, ttl=5_000, artifact_retention=5_000, keep=lambda _t: False)
    assert NoteStore(precious).refs(), "the link's target was removed"
    assert not os.path.lexists(notes_dir(home, "t"))  # the link itself goes


def test_the_prune_is_off_with_the_blackboard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _task_with_board(tmp_path, "old", 10_000)
    monkeypatch.setenv("YAGENT_BLACKBOARD", "0")
    assert prune_boards(tmp_path, ttl=5_000, artifact_retention=5_000, keep=lambda _t: False).boards == []
    assert NoteStore(notes_dir(tmp_path, "old")).refs()


def test_an_old_artifact_stays_while_its_board_is_written_to(tmp_path: Path) -> None:
    _task_with_board(tmp_path, "t", 10_000)
    NoteStore(notes_dir(tmp_path, "t")).write("coding", Handoff("new"), "body pointing at the artifact")
    assert prune_boards(tmp_path, ttl=0, artifact_retention=5_000, keep=lambda _t: False).artifacts == 0
    assert list(artifacts_dir(tmp_path, "t").iterdir())
