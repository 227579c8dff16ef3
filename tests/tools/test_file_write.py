"""create_file, search_replace_in_file, delete_file, rename_file on real files."""

from __future__ import annotations

import json
import os
import stat
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
