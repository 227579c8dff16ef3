"""read_file paging and limits, list_dir, print_dir_tree — on real files."""

from __future__ import annotations

from pathlib import Path

from yagent.workers.tools import ResultPaths, extract_result_paths

from .doubles import call_tool, make_ctx


def _lines(n: int) -> str:
    return "".join(f"line {i}\n" for i in range(1, n + 1))


def test_read_file_pages_by_1000_lines(project: Path, tmp_path: Path) -> None:
    (project / "big.txt").write_text(_lines(2500))
    ctx = make_ctx(project, tmp_path)
    first = call_tool(ctx, "read_file", {"path": "big.txt"})
    header, *body = first.content.split("\n")
    assert header == "File: big.txt  (lines 1-1000 of 2500; next page: offset=1001)"
    assert len(body) == 1000 and body[0] == "     1\tline 1" and body[-1] == "  1000\tline 1000"

    last = call_tool(ctx, "read_file", {"path": "big.txt", "offset": 2001, "limit": 5000})
    header, *body = last.content.split("\n")
    assert header == "File: big.txt  (lines 2001-2500 of 2500)"
    assert body[0] == "[limit capped at 1000 lines per call]"
    assert body[1] == "  2001\tline 2001" and body[-1] == "  2500\tline 2500"
    assert extract_result_paths(ResultPaths.HEADER, last.content) == ["big.txt"]


def test_read_file_limit_and_offset_past_end(project: Path, tmp_path: Path) -> None:
    (project / "f.txt").write_text(_lines(10))
    ctx = make_ctx(project, tmp_path)
    result = call_tool(ctx, "read_file", {"path": "f.txt", "offset": 3, "limit": 2})
    assert result.content.split("\n") == ["File: f.txt  (lines 3-4 of 10; next page: offset=5)",
                                          "     3\tline 3", "     4\tline 4"]
    past = call_tool(ctx, "read_file", {"path": "f.txt", "offset": 11})
    assert past.is_error and "10 lines" in past.content


def test_read_file_refuses_files_over_10_mb(project: Path, tmp_path: Path) -> None:
    with open(project / "huge.log", "wb") as fh:
        fh.truncate(10 * 1024 * 1024 + 1)  # sparse: the size check must fire before any read
    result = call_tool(make_ctx(project, tmp_path), "read_file", {"path": "huge.log"})
    assert result.is_error and "over the 10.0 MB read limit" in result.content
    assert "search_by_regex" in result.content


def test_read_file_warns_above_2_mb(project: Path, tmp_path: Path) -> None:
    line = "x" * 99 + "\n"
    (project / "large.txt").write_text(line * 22_000)  # 2.2 MB
    result = call_tool(make_ctx(project, tmp_path), "read_file", {"path": "large.txt", "limit": 1})
    assert not result.is_error
    assert result.content.split("\n")[1].startswith("[large file (2.1 MB)")
    (project / "small.txt").write_text(line * 100)
    small = call_tool(make_ctx(project, tmp_path), "read_file", {"path": "small.txt", "limit": 1})
    assert "large file" not in small.content


def test_read_file_cuts_very_long_lines(project: Path, tmp_path: Path) -> None:
    (project / "min.js").write_text("a" * 5000 + "\n")
    result = call_tool(make_ctx(project, tmp_path), "read_file", {"path": "min.js"})
    assert "[line cut: 5000 characters" in result.content and len(result.content) < 2300


def test_read_file_says_how_to_see_the_rest_of_a_cut_line(project: Path, tmp_path: Path) -> None:
    minified = "".join(chr(ord("a") + i % 26) for i in range(12_000))
    (project / "app min.js").write_text("header\n" + minified + "\n")
    ctx = make_ctx(project, tmp_path)
    result = call_tool(ctx, "read_file", {"path": "app min.js"})
    hint = result.content.split("see more of it with run_bash: ", 1)[1].removesuffix("]")
    rest = call_tool(ctx, "run_bash", {"command": hint})
    assert rest.content.split("\n")[1] == minified[2000:10_000]


def test_read_file_numbers_lines_like_search_by_regex(project: Path, tmp_path: Path) -> None:
    # Form feeds and U+2028 are line breaks to str.splitlines() but not to grep, sed or search_by_regex.
    (project / "old.c").write_text("a\n\x0c\nint x;\nvar s = 'p\u2028q';\nint target;\r\nend\n")
    ctx = make_ctx(project, tmp_path)
    body = call_tool(ctx, "read_file", {"path": "old.c"}).content.split("\n")
    assert body[0] == "File: old.c  (lines 1-6 of 6)"
    assert body[5] == "     5\tint target;"
    hit = call_tool(ctx, "search_by_regex", {"pattern": "target"}).content.split("\n")[0]
    assert hit == "old.c:5:int target;"


def test_read_file_says_when_a_file_is_not_utf8(project: Path, tmp_path: Path) -> None:
    (project / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    (project / "utf8.txt").write_text("café\n")
    ctx = make_ctx(project, tmp_path)
    latin1 = call_tool(ctx, "read_file", {"path": "latin1.txt"}).content.split("\n")
    assert latin1[1].startswith("[not valid UTF-8") and latin1[2] == "     1\tcaf\ufffd"
    assert "UTF-8" not in call_tool(ctx, "read_file", {"path": "utf8.txt"}).content


def test_read_file_errors_are_actionable(project: Path, tmp_path: Path) -> None:
    ctx = make_ctx(project, tmp_path)
    (project / "config.yaml").write_text("a: 1\n")
    (project / "blob.bin").write_bytes(b"\x00\x01\x02")
    (project / "empty.txt").write_text("")
    missing = call_tool(ctx, "read_file", {"path": "config.yml"})
    assert missing.is_error and "config.yaml" in missing.content
    assert "directory" in call_tool(ctx, "read_file", {"path": "."}).content
    assert "binary" in call_tool(ctx, "read_file", {"path": "blob.bin"}).content
    assert call_tool(ctx, "read_file", {"path": "empty.txt"}).content == "File: empty.txt  (empty file)"


def test_list_dir_lists_paths_relative_to_the_root(project: Path, tmp_path: Path) -> None:
    (project / "src" / "pkg").mkdir(parents=True)
    (project / "src" / "b.py").write_text("")
    (project / "src" / "a.py").write_text("")
    (project / "src" / ".env").write_text("")
    result = call_tool(make_ctx(project, tmp_path), "list_dir", {"path": "src"})
    assert result.content.split("\n") == ["src/pkg/", "src/.env", "src/a.py", "src/b.py"]
    assert extract_result_paths(ResultPaths.BARE, result.content) == ["src/pkg", "src/.env", "src/a.py", "src/b.py"]
    root = call_tool(make_ctx(project, tmp_path), "list_dir", {})
    assert root.content == "src/"


def test_list_dir_caps_entries(project: Path, tmp_path: Path) -> None:
    for i in range(1005):
        (project / f"f{i:04d}").write_text("")
    result = call_tool(make_ctx(project, tmp_path), "list_dir", {})
    lines = result.content.split("\n")
    assert len(lines) == 1001 and lines[-1].startswith("[5 more entries")


def test_print_dir_tree_skips_hidden_and_ignored(project: Path, tmp_path: Path) -> None:
    (project / ".gitignore").write_text("build/\n*.pyc\n")
    for rel in ["src/app/main.py", "src/app/main.pyc", "build/out.o", ".git/HEAD", "docs/deep/er/est/x.md"]:
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text("")
    result = call_tool(make_ctx(project, tmp_path), "print_dir_tree", {"max_depth": 3})
    assert result.content.split("\n") == [
        "./",
        "  docs/",
        "    deep/",
        "      er/",
        "  src/",
        "    app/",
        "      main.py",
        "[5 directories, 1 files; hidden and .gitignored entries skipped]",
    ]


def test_print_dir_tree_stops_at_its_line_cap(project: Path, tmp_path: Path) -> None:
    for i in range(600):
        (project / f"f{i:03d}").write_text("")
    result = call_tool(make_ctx(project, tmp_path), "print_dir_tree", {})
    lines = result.content.split("\n")
    assert lines[-1].startswith("[stopped at 500 entries") and len(lines) <= 503


def test_a_byte_order_mark_is_not_shown_and_an_edit_of_line_one_keeps_it(project: Path, tmp_path: Path) -> None:
    (project / "bom.py").write_bytes(b"\xef\xbb\xbfimport os\nprint(os.sep)\n")
    ctx = make_ctx(project, tmp_path)
    shown = call_tool(ctx, "read_file", {"path": "bom.py"}).content
    assert "\ufeff" not in shown and "     1\timport os" in shown and "byte-order mark" in shown
    edit = call_tool(ctx, "search_replace_in_file", {"path": "bom.py", "search": "import os", "replace": "import sys"})
    assert not edit.is_error
    assert (project / "bom.py").read_bytes() == b"\xef\xbb\xbfimport sys\nprint(os.sep)\n"
