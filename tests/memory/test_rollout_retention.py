"""Retention removes a task's old rollouts but never the newest turn's (what a resume needs), nor via a link."""

from __future__ import annotations

import os
from pathlib import Path

from tests.memory.rollout_fixtures import conversation, write_rollout
from yagent.ipc.state_layout import rollout_dir, thinklink_dir
from yagent.workers.memory.rollout_retention import prune_rollouts

DAY = 86400.0


def _write(home: Path, name: str, run: str, parent: str, *, age_days: float, now: float) -> Path:
    directory = rollout_dir(home, "t1")
    directory.mkdir(parents=True, exist_ok=True)
    path = write_rollout(directory / name, conversation(), parent_run=parent, delegation_id="c" if parent else "")
    text = path.read_text().replace('"run":"run-child"', f'"run":"{run}"', 1)
    path.write_text(text)
    os.utime(path, (now - age_days * DAY, now - age_days * DAY))
    return path


def test_old_rollouts_go_and_the_newest_turn_with_its_children_stays(tmp_path: Path) -> None:
    now = 1_800_000_000.0
    old_root = _write(tmp_path, "20260101-000000_r1.jsonl", "r1", "", age_days=90, now=now)
    old_child = _write(tmp_path, "20260101-000001_r2_repo.jsonl", "r2", "r1", age_days=90, now=now)
    root = _write(tmp_path, "20260201-000000_r3.jsonl", "r3", "", age_days=60, now=now)
    child = _write(tmp_path, "20260201-000001_r4_coding.jsonl", "r4", "r3", age_days=60, now=now)
    grandchild = _write(tmp_path, "20260201-000002_r5_repo.jsonl", "r5", "r4", age_days=60, now=now)
    recent = _write(tmp_path, "20260301-000000_r6_chat.jsonl", "r6", "r9", age_days=1, now=now)
    outside = tmp_path / "outside.jsonl"
    outside.write_text("not a rollout\n")
    os.utime(outside, (now - 90 * DAY, now - 90 * DAY))
    link = rollout_dir(tmp_path, "t1") / "20250101-000000_link.jsonl"
    link.symlink_to(outside)
    thinklinks = thinklink_dir(tmp_path, "t1")
    thinklinks.mkdir()
    for run in ("r1", "r3"):
        (thinklinks / f"{run}.jsonl").write_text("{}\n")
    (thinklinks / "r2.jsonl").symlink_to(outside)  # a link where a log should be is never followed

    removed = prune_rollouts(tmp_path / "tasks" / "t1", 30 * DAY, now=now)

    assert sorted(removed) == sorted([old_root, old_child])
    assert sorted(p.name for p in thinklinks.iterdir()) == ["r2.jsonl", "r3.jsonl"]  # r1's log went with its rollout
    for kept in (root, child, grandchild, recent, link, outside):
        assert kept.exists() or kept.is_symlink(), kept
    assert prune_rollouts(tmp_path / "tasks" / "t1", 0, now=now + 1000 * DAY) == []  # 0 = kept forever


def test_a_linked_thinklink_dir_is_never_pruned_through(tmp_path: Path, caplog) -> None:
    now = 1_800_000_000.0
    elsewhere = tmp_path / "elsewhere"  # what the link points at: a later run must not delete in it
    elsewhere.mkdir()
    (elsewhere / "X.jsonl").write_text("precious\n")
    crafted = _write(tmp_path, "20260101-000000_x.jsonl", "X", "", age_days=90, now=now)  # backdated, names run X
    _write(tmp_path, "20260201-000000_r3.jsonl", "r3", "", age_days=60, now=now)
    link = thinklink_dir(tmp_path, "t1")
    link.symlink_to(elsewhere, target_is_directory=True)

    removed = prune_rollouts(tmp_path / "tasks" / "t1", 30 * DAY, now=now)

    assert removed == [crafted]  # the task's own old rollout still goes
    assert (elsewhere / "X.jsonl").read_text() == "precious\n"
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1 and f"{link} is a symbolic link" in warned[0] and "remove it" in warned[0]


def test_a_linked_rollout_dir_is_never_scanned_or_pruned(tmp_path: Path, caplog) -> None:
    now = 1_800_000_000.0
    elsewhere = tmp_path / "elsewhere"  # another home's rollouts, old enough to go if they were this task's
    old = _write(elsewhere, "20260101-000000_r1.jsonl", "r1", "", age_days=90, now=now)
    _write(elsewhere, "20260201-000000_r3.jsonl", "r3", "", age_days=60, now=now)
    before = sorted(p.name for p in old.parent.iterdir())
    link = rollout_dir(tmp_path, "t1")
    link.parent.mkdir(parents=True)
    link.symlink_to(old.parent, target_is_directory=True)

    assert prune_rollouts(tmp_path / "tasks" / "t1", 30 * DAY, now=now) == []

    assert sorted(p.name for p in old.parent.iterdir()) == before and old.exists()
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1 and f"{link} is a symbolic link" in warned[0] and "remove it" in warned[0]
