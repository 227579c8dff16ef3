"""search_by_regex: the Python fallback, its output shape, and ripgrep parity when rg is installed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from yagent.workers.tools import ResultPaths, extract_result_paths

from .doubles import call_tool, make_ctx

RG = shutil.which("rg")


@pytest.fixture
def tree(project: Path) -> Path:
    files = {
        "a.txt": "foo at top\n",
        "a-b.txt": "no match\nxfoo\n",
        "a/b.txt": "foo bar\nFOO upper\nfoo again\n",
        "src/main.py": "import os\n\ndef foo():\n    return 'foo'\n",
        "src/util.py": "def helper():\n    pass\n",
        "src/deep/x.py": "# foo in a comment\n",
        "crlf.txt": "first\r\nfoo crlf\r\n",
        "long.txt": "foo " + "y" * 400 + "\n",
        "unicode.txt": "naïve foo ünïcode\n",
        ".hidden/h.txt": "foo hidden\n",
        "ignored/i.txt": "foo ignored\n",
        "debug.log": "foo log\n",
        ".gitignore": "ignored/\n*.log\n",
    }
    for rel, text in files.items():
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text(text, newline="")
    (project / "blob.bin").write_bytes(b"foo\x00binary")
    return project


@pytest.fixture
def no_rg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def _search(project: Path, tmp_path: Path, **args: object) -> str:
    return call_tool(make_ctx(project, tmp_path), "search_by_regex", args).content


def test_fallback_output_shape(tree: Path, tmp_path: Path, no_rg: None) -> None:
    out = _search(tree, tmp_path, pattern="foo")
    assert out.split("\n") == [
        "a/b.txt:1:foo bar",
        "a/b.txt:3:foo again",
        "a-b.txt:2:xfoo",
        "a.txt:1:foo at top",
        "crlf.txt:2:foo crlf",
        "long.txt:1:foo " + "y" * 296 + "…",
        "src/deep/x.py:1:# foo in a comment",
        "src/main.py:3:def foo():",
        "src/main.py:4:    return 'foo'",
        "unicode.txt:1:naïve foo ünïcode",
        "[10 matches in 8 files]",
    ]
    assert extract_result_paths(ResultPaths.RG, out)[:2] == ["a/b.txt", "a-b.txt"]


def test_fallback_glob_case_and_path(tree: Path, tmp_path: Path, no_rg: None) -> None:
    assert _search(tree, tmp_path, pattern="foo", glob="*.py").split("\n")[-1] == "[3 matches in 2 files]"
    assert _search(tree, tmp_path, pattern="foo", glob="!*.txt").split("\n")[-1] == "[3 matches in 2 files]"
    upper = _search(tree, tmp_path, pattern="^foo", path="a", case_insensitive=True)
    assert upper.split("\n") == ["a/b.txt:1:foo bar", "a/b.txt:2:FOO upper", "a/b.txt:3:foo again",
                                 "[3 matches in 1 files]"]
    one_file = _search(tree, tmp_path, pattern="return", path="src/main.py")
    assert one_file.split("\n")[0] == "src/main.py:4:    return 'foo'"


def test_fallback_caps_results_and_says_how_to_narrow(tree: Path, tmp_path: Path, no_rg: None) -> None:
    lines = _search(tree, tmp_path, pattern="foo", max_results=3).split("\n")
    assert lines[:3] == ["a/b.txt:1:foo bar", "a/b.txt:3:foo again", "a-b.txt:2:xfoo"]
    assert lines[3] == "[showing the first 3 matches; narrow the pattern, path or glob to see the rest]"


def test_fallback_errors(tree: Path, tmp_path: Path, no_rg: None) -> None:
    ctx = make_ctx(tree, tmp_path)
    bad = call_tool(ctx, "search_by_regex", {"pattern": "fo("})
    assert bad.is_error and "invalid regular expression" in bad.content
    none = call_tool(ctx, "search_by_regex", {"pattern": "zzz_nothing"})
    assert not none.is_error and none.content == "[no matches for 'zzz_nothing' in .]"
    missing = call_tool(ctx, "search_by_regex", {"pattern": "x", "path": "nope"})
    assert missing.is_error and "does not exist" in missing.content


QUERIES = [
    {"pattern": "foo"},
    {"pattern": "foo", "glob": "*.py"},
    {"pattern": "^foo", "path": "a", "case_insensitive": True},
    {"pattern": "foo", "max_results": 3},
    {"pattern": "zzz_nothing"},
    {"pattern": "return", "path": "src/main.py"},
    {"pattern": "foo(?= (bar|again))"},  # look-ahead: not in ripgrep's default engine
    {"pattern": r"(o)\1"},  # a backreference, likewise
]


@pytest.mark.skipif(RG is None, reason="ripgrep (rg) is not on PATH; the Python fallback is tested above")
@pytest.mark.parametrize("query", QUERIES, ids=lambda q: ",".join(f"{k}={v}" for k, v in q.items()))
def test_ripgrep_and_fallback_give_the_same_output(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, query: dict[str, object]
) -> None:
    with_rg = _search(tree, tmp_path, **query)
    empty = tmp_path / "empty-bin"
    empty.mkdir(exist_ok=True)
    monkeypatch.setenv("PATH", str(empty))
    assert _search(tree, tmp_path, **query) == with_rg


@pytest.fixture
def edge_tree(project: Path) -> Path:
    """Files where the two back-ends used to disagree: other ignore files, CRLF anchors, binary and big files."""
    files: dict[str, bytes] = {
        ".ignore": b"dotignored.txt\n!sub/kept.txt\n",
        ".rgignore": b"rgignored.txt\n",
        "sub/.gitignore": b"kept.txt\ndropped.txt\n",
        "sub/kept.txt": b"foo kept: .ignore outranks .gitignore\n",
        "sub/dropped.txt": b"foo dropped\n",
        "dotignored.txt": b"foo in .ignore\n",
        "rgignored.txt": b"foo in .rgignore\n",
        "crlf.txt": b"foo;\r\nbar\r\n",
        "late-nul.dat": b"foo before\n" + b"y" * 20_000 + b"\0\nfoo after\n",
        "blob.bin": b"foo\0binary\n",
        "big.txt": b"foo big\n" + b"x" * (10 * 1024 * 1024),
        "plain.txt": b"foo plain\n",
    }
    for rel, data in files.items():
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_bytes(data)
    return project


EDGE_QUERIES = [
    {"pattern": "foo"},
    {"pattern": "foo;$"},
    {"pattern": "foo", "path": "blob.bin"},
    {"pattern": "foo", "path": "big.txt"},
]


def test_fallback_on_ignore_files_crlf_binary_and_big_files(edge_tree: Path, tmp_path: Path, no_rg: None) -> None:
    assert _search(edge_tree, tmp_path, pattern="foo").split("\n") == [
        "crlf.txt:1:foo;", "plain.txt:1:foo plain", "sub/kept.txt:1:foo kept: .ignore outranks .gitignore",
        "[3 matches in 3 files]"]
    assert _search(edge_tree, tmp_path, pattern="foo;$").split("\n")[0] == "crlf.txt:1:foo;"
    binary = call_tool(make_ctx(edge_tree, tmp_path), "search_by_regex", {"pattern": "foo", "path": "blob.bin"})
    assert binary.is_error and "binary" in binary.content and "run_bash" in binary.content


@pytest.mark.skipif(RG is None, reason="ripgrep (rg) is not on PATH; the Python fallback is tested above")
def test_ripgrep_and_fallback_agree_on_ignore_files_crlf_binary_and_big_files(
    edge_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_rg = [_search(edge_tree, tmp_path, **query) for query in EDGE_QUERIES]
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert [_search(edge_tree, tmp_path, **query) for query in EDGE_QUERIES] == with_rg


@pytest.mark.skipif(RG is None, reason="ripgrep (rg) is not on PATH")
def test_ripgrep_reports_a_bad_pattern_every_time(tree: Path, tmp_path: Path) -> None:
    # rg's exit status 2 used to be lost now and then (reaped by Popen.kill, reported as 255): "no matches".
    ctx = make_ctx(tree, tmp_path)
    results = [call_tool(ctx, "search_by_regex", {"pattern": "fo(["}) for _ in range(100)]
    assert [r.content.split(":", 1)[0] for r in results if not r.is_error] == []
    assert all("invalid regular expression" in r.content for r in results)
