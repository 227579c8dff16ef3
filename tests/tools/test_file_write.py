"""create_file, search_replace_in_file, delete_file, rename_file on real files."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

from yagent.workers.tools import YoloLevel

from .doubles import call_tool, make_ctx

TEN_MB = 10 * 1024 * 1024


def test_create_file_makes_parents_and_refuses_to_clobber(project: Path, tmp_path: Path) -> None:
    ctx = make_ctx(project, tmp_path)
    result = call_tool(ctx, "create_file", {"path": "a/b/c.txt", "content": "one\ntwo\n"})
    assert json.loads(result.content) == {"path": "a/b/c.txt", "created": True, "bytes": 8, "lines": 2}
    assert (project / "a/b/c.txt").read_text() == "one\ntwo\n"
    again = call_tool(ctx, "create_file", {"path": "a/b/c.txt", "content": "x"})
    assert again.is_error and "search_replace_in_file" in again.content
    assert (project / "a/b/c.txt").read_text() == "one\ntwo\n"
    over = call_tool(ctx, "create_file", {"path": "a/b/c.txt", "content": "x", "overwrite": True})
    assert json.loads(over.content)["created"] is False and (project / "a/b/c.txt").read_text() == "x"
    assert [p.name for p in (project / "a/b").iterdir()] == ["c.txt"]  # no temp file left behind


def test_create_file_refuses_content_over_10_mb(project: Path, tmp_path: Path) -> None:
    result = call_tool(make_ctx(project, tmp_path), "create_file", {"path": "big", "content": "x" * (TEN_MB + 1)})
    assert result.is_error and "10 MB" in result.content and not (project / "big").exists()


def test_search_replace_requires_exactly_one_match(project: Path, tmp_path: Path) -> None:
    target = project / "m.py"
    target.write_text("def f():\n    return 1\n\ndef g():\n    return 1\n")
    ctx = make_ctx(project, tmp_path)
    twice = call_tool(ctx, "search_replace_in_file", {"path": "m.py", "search": "return 1", "replace": "return 2"})
    assert twice.is_error and "2 times" in twice.content and "lines 2, 5" in twice.content
    none = call_tool(ctx, "search_replace_in_file", {"path": "m.py", "search": "return 3", "replace": "x"})
    assert none.is_error and "not found" in none.content
    assert target.read_text() == "def f():\n    return 1\n\ndef g():\n    return 1\n"

    once = call_tool(ctx, "search_replace_in_file",
                     {"path": "m.py", "search": "def g():\n    return 1", "replace": "def g():\n    return 2"})
    assert not once.is_error
    assert target.read_text() == "def f():\n    return 1\n\ndef g():\n    return 2\n"
    diff = once.data["diff"]
    assert diff.startswith("--- a/m.py\n+++ b/m.py\n")
    assert "-    return 1\n+    return 2\n" in diff
    assert once.content == f"File: m.py  (1 replacement)\n{diff}"


def test_search_replace_keeps_crlf_and_mode(project: Path, tmp_path: Path) -> None:
    target = project / "run.sh"
    target.write_bytes(b"echo a\r\necho b\r\n")
    target.chmod(0o755)
    result = call_tool(make_ctx(project, tmp_path), "search_replace_in_file",
                       {"path": "run.sh", "search": "echo a\necho b", "replace": "echo a\necho c"})
    assert not result.is_error
    assert target.read_bytes() == b"echo a\r\necho c\r\n"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o755


def test_search_replace_enforces_10_mb_both_ways(project: Path, tmp_path: Path) -> None:
    ctx = make_ctx(project, tmp_path)
    big = project / "big.txt"
    with open(big, "wb") as fh:
        fh.truncate(TEN_MB + 1)
    too_big = call_tool(ctx, "search_replace_in_file", {"path": "big.txt", "search": "a", "replace": "b"})
    assert too_big.is_error and "10 MB" in too_big.content
    near = project / "near.txt"
    near.write_text("MARK" + "x" * (TEN_MB - 10))
    grown = call_tool(ctx, "search_replace_in_file", {"path": "near.txt", "search": "MARK", "replace": "y" * 100})
    assert grown.is_error and "nothing was written" in grown.content
    assert near.read_text().startswith("MARK")


def test_delete_file_and_empty_directory(project: Path, tmp_path: Path) -> None:
    ctx = make_ctx(project, tmp_path, yolo=YoloLevel.YOLO)
    (project / "d" / "e").mkdir(parents=True)
    (project / "d" / "e" / "f.txt").write_text("x")
    full = call_tool(ctx, "delete_file", {"path": "d/e"})
    assert full.is_error and "non-empty" in full.content
    assert json.loads(call_tool(ctx, "delete_file", {"path": "d/e/f.txt"}).content) == {
        "path": "d/e/f.txt", "deleted": "file"}
    assert json.loads(call_tool(ctx, "delete_file", {"path": "d/e"}).content)["deleted"] == "directory"
    assert "project root" in call_tool(ctx, "delete_file", {"path": "."}).content
    assert project.exists()


def test_rename_file_moves_and_refuses_to_overwrite(project: Path, tmp_path: Path) -> None:
    ctx = make_ctx(project, tmp_path, yolo=YoloLevel.YOLO)
    (project / "a.txt").write_text("a")
    (project / "b.txt").write_text("b")
    clash = call_tool(ctx, "rename_file", {"source": "a.txt", "destination": "b.txt"})
    assert clash.is_error and (project / "b.txt").read_text() == "b"
    moved = call_tool(ctx, "rename_file", {"source": "a.txt", "destination": "new/dir/a.txt"})
    assert json.loads(moved.content) == {"source": "a.txt", "destination": "new/dir/a.txt"}
    assert (project / "new/dir/a.txt").read_text() == "a" and not (project / "a.txt").exists()


def test_search_replace_diff_applies_when_the_file_has_no_final_newline(project: Path, tmp_path: Path) -> None:
    (project / "a.txt").write_text("one\ntwo")
    result = call_tool(make_ctx(project, tmp_path), "search_replace_in_file",
                       {"path": "a.txt", "search": "two", "replace": "three"})
    assert "-two\n\\ No newline at end of file\n+three\n\\ No newline at end of file\n" in result.data["diff"]
    # The diff is a real patch: applied to the old text it gives the new one.
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "a.txt").write_text("one\ntwo")
    (copy / "edit.patch").write_text(result.data["diff"])
    subprocess.run(["git", "apply", "edit.patch"], cwd=copy, check=True, capture_output=True)
    assert (copy / "a.txt").read_bytes() == (project / "a.txt").read_bytes() == b"one\nthree"


def test_search_replace_keeps_crlf_when_the_replacement_adds_lines(project: Path, tmp_path: Path) -> None:
    target = project / "win.bat"
    target.write_bytes(b"@echo off\r\necho a\r\n")
    result = call_tool(make_ctx(project, tmp_path), "search_replace_in_file",
                       {"path": "win.bat", "search": "echo a", "replace": "echo a\necho b"})
    assert not result.is_error
    assert target.read_bytes() == b"@echo off\r\necho a\r\necho b\r\n"


def test_search_replace_points_at_a_whitespace_near_miss(project: Path, tmp_path: Path) -> None:
    target = project / "m.py"
    original = "class A:\n    def f(self):\n        return  1\n\n\ndef g():\n\treturn 2\n"
    target.write_text(original)
    ctx = make_ctx(project, tmp_path)
    indented = call_tool(ctx, "search_replace_in_file",
                         {"path": "m.py", "search": "  def f(self):\n      return 1\n", "replace": "x"})
    assert indented.is_error and "matches at line(s) 2-3 if whitespace is ignored" in indented.content
    tabs = call_tool(ctx, "search_replace_in_file", {"path": "m.py", "search": "    return 2", "replace": "x"})
    assert tabs.is_error and "matches at line(s) 7 if whitespace is ignored" in tabs.content
    unrelated = call_tool(ctx, "search_replace_in_file", {"path": "m.py", "search": "return 3", "replace": "x"})
    assert unrelated.is_error and "whitespace is ignored" not in unrelated.content
    assert target.read_text() == original


def test_edits_through_a_symlink_keep_the_link(project: Path, tmp_path: Path) -> None:
    (project / "real.txt").write_text("old\n")
    (project / "alias.txt").symlink_to("real.txt")
    ctx = make_ctx(project, tmp_path)
    call_tool(ctx, "search_replace_in_file", {"path": "alias.txt", "search": "old", "replace": "new"})
    call_tool(ctx, "create_file", {"path": "alias.txt", "content": "newer\n", "overwrite": True})
    assert (project / "alias.txt").is_symlink() and (project / "real.txt").read_text() == "newer\n"


def test_delete_file_removes_a_symlink_not_its_target(project: Path, tmp_path: Path) -> None:
    ctx = make_ctx(project, tmp_path, yolo=YoloLevel.YOLO)
    (project / "data").mkdir()
    (project / "data" / "keep.txt").write_text("precious")
    (project / "link.txt").symlink_to("data/keep.txt")
    (project / "dirlink").symlink_to("data")
    (project / "dangling").symlink_to("gone.txt")
    for name in ("link.txt", "dirlink", "dangling"):
        assert json.loads(call_tool(ctx, "delete_file", {"path": name}).content) == {
            "path": name, "deleted": "symlink"}
        assert not os.path.lexists(project / name)
    assert (project / "data" / "keep.txt").read_text() == "precious"


def test_rename_file_moves_a_symlink_not_its_target(project: Path, tmp_path: Path) -> None:
    ctx = make_ctx(project, tmp_path, yolo=YoloLevel.YOLO)
    (project / "target.txt").write_text("t")
    (project / "old-link").symlink_to("target.txt")
    (project / "dangling").symlink_to("nowhere.txt")
    moved = call_tool(ctx, "rename_file", {"source": "old-link", "destination": "new-link"})
    assert json.loads(moved.content) == {"source": "old-link", "destination": "new-link"}
    assert (project / "new-link").is_symlink() and not os.path.lexists(project / "old-link")
    assert (project / "target.txt").read_text() == "t" and (project / "new-link").read_text() == "t"
    onto_link = call_tool(ctx, "rename_file", {"source": "target.txt", "destination": "dangling"})
    assert onto_link.is_error and "dangling already exists" in onto_link.content
    assert not (project / "nowhere.txt").exists() and (project / "target.txt").exists()


def test_rename_file_refuses_to_move_a_directory_into_itself(project: Path, tmp_path: Path) -> None:
    ctx = make_ctx(project, tmp_path, yolo=YoloLevel.YOLO)
    (project / "pkg").mkdir()
    result = call_tool(ctx, "rename_file", {"source": "pkg", "destination": "pkg/sub/pkg"})
    assert result.is_error and "into itself" in result.content and "unexpectedly" not in result.content
    assert (project / "pkg").is_dir() and not (project / "pkg" / "sub").exists()
